"""Edges a run derives from several of its records, written once they are all stored.

- DCSync: the holders of both GetChanges and GetChangesAll on a domain; SyncLAPSPassword:
  the holders of both GetChanges and GetChangesInFilteredSet, to every computer of the
  domain with LAPS. Holders are combined over group membership as the reference's
  CalculateCrossProductNodeSets does (see `calculate_cross_product`).
- AdminTo, CanRDP, ExecuteDCOM, CanPSRemote on domain controllers: a DC reports the domain's
  BUILTIN groups as its local groups (`DOMAIN-S-1-5-32-544`, named IGNOREME). Like the
  reference, which links the one BUILTIN group node to every computer reporting it, the
  members any computer of the run reports get the edge to each computer reporting the group.

Only the run's own records count: its domains' ACEs, the MemberOf edges it wrote, the
computers it collected. The reference recomputes these over its whole graph after every
ingest; here a later run that collects a domain again derives them again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from graphsvc.ingest.records import EdgeRecord
from graphsvc.store import graph
from graphsvc.store.db import Connection

if TYPE_CHECKING:
    from graphsvc.ingest.writer import GraphWriter

REPLICATION_RIGHTS = ("GetChanges", "GetChangesAll", "GetChangesInFilteredSet")
# Authenticated Users and Everyone: every principal is in them, whatever the graph says.
SPECIAL_GROUP_SUFFIXES = ("-S-1-5-11", "-S-1-1-0")


@dataclass
class BuiltinGroup:
    kind: str  # the edge its members get
    members: dict[str, str] = field(default_factory=dict)  # object id -> kind
    computers: dict[str, str | None] = field(default_factory=dict)  # object id -> domain


class DerivedEdges:
    """What the SharpHound parser gathers for these edges while reading: a few principals per
    domain and the domain controllers' built-in groups, whatever the input's size."""

    def __init__(self) -> None:
        # domain -> right -> principal object id -> kind
        self.rights: dict[str, dict[str, dict[str, str]]] = {}
        self.builtin_groups: dict[str, BuiltinGroup] = {}

    def record_domain_right(self, domain: str, right: str, principal: str, kind: str) -> None:
        if right in REPLICATION_RIGHTS:
            self.rights.setdefault(domain, {}).setdefault(right, {})[principal] = kind

    def record_builtin_group(
        self,
        group_id: str,
        kind: str,
        computer: str,
        environment: str | None,
        members: list[tuple[str, str]],
    ) -> None:
        group = self.builtin_groups.setdefault(group_id, BuiltinGroup(kind))
        group.members.update(members)
        group.computers[computer] = environment

    async def write_edges(self, writer: GraphWriter) -> None:
        """Called by the writer once every record of the run is stored."""
        for group in self.builtin_groups.values():
            for computer, environment in group.computers.items():
                for member, kind in group.members.items():
                    if not is_rdp_to_itself(group.kind, member, computer):
                        await writer.edge(
                            EdgeRecord(member, computer, group.kind, environment, kind, "Computer")
                        )
        memberships = Memberships(writer.conn, writer.run_number)
        for domain, rights in sorted(self.rights.items()):
            kinds = {p: k for holders in rights.values() for p, k in holders.items()}
            changes = rights.get("GetChanges", {})
            for holder in sorted(
                await calculate_cross_product(
                    memberships, [changes, rights.get("GetChangesAll", {})]
                )
            ):
                await writer.edge(
                    EdgeRecord(
                        holder, domain, "DCSync", domain, kinds.get(holder, "Base"), "Domain"
                    )
                )
            syncers = await calculate_cross_product(
                memberships, [changes, rights.get("GetChangesInFilteredSet", {})]
            )
            if not syncers:
                continue
            for computer in await graph.list_run_laps_computers(
                writer.conn, writer.run_number, domain
            ):
                for holder in sorted(syncers):
                    await writer.edge(
                        EdgeRecord(
                            holder,
                            computer,
                            "SyncLAPSPassword",
                            domain,
                            kinds.get(holder, "Base"),
                            "Computer",
                        )
                    )


class Memberships:
    """The run's MemberOf edges, read from the store one level of nesting at a time and kept:
    only the few groups holding replication rights, and their members, are ever asked for."""

    def __init__(self, conn: Connection, run_number: int) -> None:
        self.conn = conn
        self.run_number = run_number
        self.direct: dict[str, list[str]] = {}  # group -> direct members, once read

    async def read_members(self, groups: set[str]) -> None:
        wanted = groups - self.direct.keys()
        if not wanted:
            return
        for group in wanted:
            self.direct[group] = []
        for member, group in await graph.list_run_members(self.conn, self.run_number, wanted):
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


def is_rdp_to_itself(kind: str, member: str, computer: str) -> bool:
    # The reference drops a computer's CanRDP to itself (and keeps the other three kinds).
    return kind == "CanRDP" and member == computer


def is_special_group(object_id: str) -> bool:
    return object_id.endswith(SPECIAL_GROUP_SUFFIXES)


async def calculate_cross_product(
    memberships: Memberships, holder_sets: list[dict[str, str]]
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
