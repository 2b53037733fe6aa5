"""DCSync and SyncLAPSPassword: from each holder of both GetChanges and GetChangesAll on a
domain to the domain, and from each holder of both GetChanges and GetChangesInFilteredSet to
every computer of the domain with LAPS; holders combined over group membership as the
reference's CalculateCrossProductNodeSets combines them (`calculate_cross_product`)."""

from __future__ import annotations

from graphsvc.store import analysis as store
from graphsvc.store.analysis import DerivedEdge
from graphsvc.store.db import Connection

REPLICATION_RIGHTS = ("GetChanges", "GetChangesAll", "GetChangesInFilteredSet")
# Authenticated Users and Everyone: every principal is in them, whatever the graph says.
SPECIAL_GROUP_SUFFIXES = ("-S-1-5-11", "-S-1-1-0")


async def replication_edges(conn: Connection) -> list[DerivedEdge]:
    rights: dict[str, dict[str, set[str]]] = {}  # domain -> right -> holders
    for domain, right, holder, _ in await store.list_rights_on(conn, "Domain", REPLICATION_RIGHTS):
        rights.setdefault(domain, {}).setdefault(right, set()).add(holder)
    memberships = Memberships(conn)
    edges: list[DerivedEdge] = []
    for domain, held in sorted(rights.items()):
        changes = held.get("GetChanges", set())
        syncers = await calculate_cross_product(
            memberships, [changes, held.get("GetChangesAll", set())]
        )
        edges += [(holder, domain, "DCSync", domain) for holder in sorted(syncers)]
        readers = await calculate_cross_product(
            memberships, [changes, held.get("GetChangesInFilteredSet", set())]
        )
        if readers:
            for computer in await store.list_laps_computers(conn, domain):
                edges += [
                    (holder, computer, "SyncLAPSPassword", domain) for holder in sorted(readers)
                ]
    return edges


class Memberships:
    """MemberOf relationships, read from the store one level of nesting at a time and kept:
    only the few groups holding replication rights, and their members, are ever asked for."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.direct: dict[str, list[str]] = {}  # group -> direct members, once read

    async def read_members(self, groups: set[str]) -> None:
        wanted = groups - self.direct.keys()
        if not wanted:
            return
        for group in wanted:
            self.direct[group] = []
        for member, group in await store.list_members(self.conn, wanted):
            self.direct[group].append(member)

    async def find_members_below(
        self, starts: set[str], stop_at_special: bool = False
    ) -> set[str] | None:
        """Every transitive member of `starts` (not `starts` themselves); None, when asked to
        stop at Authenticated Users or Everyone, if one of them is in `starts` or below."""
        found: set[str] = set()
        frontier = set(starts)
        while frontier:
            if stop_at_special and any(is_special_group(p) for p in frontier):
                return None
            await self.read_members(frontier)
            frontier = {m for g in frontier for m in self.direct[g]} - found - starts
            found |= frontier
        return found


def is_special_group(object_id: str) -> bool:
    return object_id.endswith(SPECIAL_GROUP_SUFFIXES)


async def calculate_cross_product(
    memberships: Memberships, holder_sets: list[set[str]]
) -> set[str]:
    """The principals holding every one of the rights, as the reference's
    CalculateCrossProductNodeSets finds them.

    A set is each right's direct holders; unrolled, with all their transitive members. A set
    holding Authenticated Users or Everyone (directly or through nesting) is ignored, since
    everyone holds it: if all are, the union of the direct holders is the answer; if all but
    one are, that set's direct holders. Otherwise the answer is the first set's direct
    holders found in every other unrolled set, then, below the others, the first group (the
    smallest first) found in every other unrolled set, standing for its members; members
    reached through no such group are taken one by one.
    """
    first_degree: list[set[str]] = []
    unrolled: list[set[str]] = []
    for holders in holder_sets:
        below = await memberships.find_members_below(set(holders), stop_at_special=True)
        if below is not None:
            first_degree.append(set(holders))
            unrolled.append(set(holders) | below)
    if not first_degree:
        return {p for holders in holder_sets for p in holders}
    if len(first_degree) == 1:
        return first_degree[0]
    in_all_others = set.intersection(*unrolled[1:])
    result = first_degree[0] & in_all_others
    remaining: set[str] = set()
    for holder in first_degree[0] - in_all_others:
        remaining |= await memberships.find_members_below({holder}) or set()
    reaches: dict[str, set[str]] = {}
    for member in remaining:
        below = await memberships.find_members_below({member}) or set()
        if below:
            reaches[member] = below
    for group in sorted(reaches, key=lambda g: (len(reaches[g]), g)):
        if group not in remaining:
            continue  # already stood for by a group found before
        remaining.discard(group)
        if group in in_all_others:
            result.add(group)
            # The reference toggles the group's members (a bitmap XOR), not only removes them.
            remaining ^= reaches[group]
    return result | (remaining & in_all_others)
