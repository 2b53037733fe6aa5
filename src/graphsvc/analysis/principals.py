"""Principals and what they hold through group membership: MemberOf relationships read as
they are needed (`Memberships`), and the reference's CalculateCrossProductNodeSets, which
finds who holds several rights at once (`calculate_cross_product`)."""

from __future__ import annotations

from graphsvc.store import analysis as store
from graphsvc.store.db import Connection

# Authenticated Users and Everyone: every principal is in them, whatever the graph says.
SPECIAL_GROUP_SUFFIXES = ("-S-1-5-11", "-S-1-1-0")


class Memberships:
    """MemberOf relationships, read from the store one level of nesting at a time and kept:
    only the few groups holding the rights asked about, and their members, are ever read."""

    def __init__(
        self,
        conn: Connection,
        kinds: tuple[str, ...] = ("MemberOf",),
        group_labels: tuple[str, ...] = ("Group",),
    ) -> None:
        self.conn = conn
        self.kinds = kinds  # the memberships followed
        self.group_labels = group_labels  # the labels of the nodes that have members
        self.direct: dict[str, list[str]] = {}  # group -> direct members, once read
        self.labels: dict[str, str] = {}  # the label of each member read
        self.groups: set[str] = set()  # the members read that are groups
        self.special: set[str] = set()  # the members read that are Authenticated Users or Everyone
        self.below: dict[tuple[frozenset[str], bool], set[str] | None] = {}
        self.unrolled: dict[frozenset[str], frozenset[str] | None] = {}
        self.accounts: dict[tuple[frozenset[str], frozenset[str]], set[str]] = {}
        self.closures: dict[str, set[str]] = {}  # one group -> its members at any depth

    async def read_members(self, groups: set[str]) -> None:
        # (Not `groups - self.direct.keys()`: a set less a dict's keys walks every key.)
        wanted = {group for group in groups if group not in self.direct}
        if not wanted:
            return
        for group in wanted:
            self.direct[group] = []
        for member, group, label in await store.list_members(self.conn, wanted, self.kinds):
            self.direct[group].append(member)
            self.labels[member] = label
            if label in self.group_labels:
                self.groups.add(member)
                if is_special_group(member):
                    self.special.add(member)

    async def unroll(self, holders: set[str]) -> frozenset[str] | None:
        """The holders and their members at any depth; None if Authenticated Users or
        Everyone is among them. Kept: the escalation rules unroll Domain Users (every user)
        template after template (a copy each time was most of a 100,000-object analysis)."""
        key = frozenset(holders)
        if key not in self.unrolled:
            below = await self.find_members_below(set(holders), stop_at_special=True)
            self.unrolled[key] = None if below is None else key | below
        return self.unrolled[key]

    async def expand_to_accounts(self, principals: set[str], groups: set[str]) -> set[str]:
        """The principals that are not groups, and every member of those that are (at any
        depth) that is not a group; `groups` says which of `principals` are groups. Kept
        and shared, as `find_members_below`'s answers: callers must not change it."""
        key = (frozenset(principals), frozenset(principals & groups))
        if key not in self.accounts:
            below = await self.find_members_below(set(key[1])) or set()
            self.accounts[key] = (principals - groups) | (below - self.groups)
        return self.accounts[key]

    async def find_members_below(
        self, starts: set[str], stop_at_special: bool = False
    ) -> set[str] | None:
        """Every transitive member of `starts` (not `starts` themselves); None, when asked to
        stop at Authenticated Users or Everyone, if one of them is in `starts` or below. The
        answer is kept (the escalation rules ask for the same enrollers template after
        template) and shared: callers must not change it. A group whose own members were
        found before is taken whole, not walked again (cross products ask for each nested
        group of a remainder: at 100,000 objects this walk was the analysis's busiest
        Python)."""
        key = (frozenset(starts), stop_at_special)
        if key in self.below:
            return self.below[key]
        found: set[str] | None = set()
        frontier = set(starts)
        if stop_at_special and any(is_special_group(p) for p in starts):
            frontier, found = set(), None
        while frontier and found is not None:
            if stop_at_special and not self.special.isdisjoint(frontier):
                found = None
                break
            # Only a group has members: a user or a computer read as a member is not asked.
            groups = set()
            # A member is asked for its members if it is a group or not read yet; tested one
            # by one: `frontier - self.labels.keys()` walked every label read (a million at
            # a million objects: 48 s of the relay rules' 55).
            unread = {member for member in frontier if member not in self.labels}
            for group in (frontier & self.groups) | unread:
                known = self.closures.get(group)
                # (A lone start's own walk is what fills its entry.)
                if known is not None and (group not in starts or len(starts) > 1):
                    found |= known
                else:
                    groups.add(group)
            if stop_at_special and not self.special.isdisjoint(found):
                found = None
                break
            await self.read_members(groups)
            frontier = {m for g in groups for m in self.direct[g]} - found - starts
            found |= frontier
        if found is not None and len(starts) > 1:
            found -= starts  # a start another's members hold is no member found
        self.below[key] = found
        if found is not None and len(starts) == 1:
            self.closures[next(iter(starts))] = found
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
    unrolled: list[frozenset[str]] = []
    for holders in holder_sets:
        found = await memberships.unroll(holders)
        if found is not None:
            first_degree.append(set(holders))
            unrolled.append(found)
    if not first_degree:
        return {p for holders in holder_sets for p in holders}
    if len(first_degree) == 1:
        return first_degree[0]
    in_all_others = unrolled[1].intersection(*unrolled[2:])
    result = first_degree[0] & in_all_others
    remaining: set[str] = set()
    for holder in first_degree[0] - in_all_others:
        remaining |= await memberships.find_members_below({holder}) or set()
    reaches: dict[str, set[str]] = {}
    # Only a group has members: asking for each user's took one statement a user (15 s of
    # a 2,000-object domain's analysis, with Domain Users enrolling on a CA).
    for member in remaining & memberships.groups:
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
