"""AdminTo, CanPSRemote, ExecuteDCOM and CanRDP from the computers' local groups, as the
reference's post-processing derives them (ingest keeps each local group with members as an
ADLocalGroup node, LocalToComputer its computer, its members MemberOfLocalGroup it):

- AdminTo, CanPSRemote, ExecuteDCOM: from each direct member of a local group of the
  computer whose id ends in -544 (Administrators), -580 (Remote Management Users) or -562
  (Distributed COM Users). Nesting is not unrolled: a group's members reach the computer
  through MemberOf when a path or a list is read.
- CanRDP, with the reference's user-rights rule (always enforced there): when the computer's
  Remote Desktop Users group (-555) holds RemoteInteractiveLogonRight on it, its direct
  members; otherwise, of the holders of that right on the computer, each that is the group
  or one of its members at any depth, or else each of the holder's own members at any depth
  that is (a computer without user rights collected gets none). With Citrix support
  (GRAPHSVC_CITRIX_RDP_SUPPORT) a computer with a local group named "Direct Access Users..."
  gives CanRDP to the principals in the Remote Desktop Users group, in that group and
  holding the right, combined as the reference's cross product combines them. Never from a
  computer to itself.

Where a computer has two groups of one RID (its own and one a GPO sets), the members of both
count; the reference takes the first it finds.
"""

from __future__ import annotations

from collections import defaultdict

from graphsvc.analysis.principals import Memberships, calculate_cross_product
from graphsvc.store import analysis as store
from graphsvc.store.analysis import DerivedEdge
from graphsvc.store.db import Connection

# The edge a local group's direct members get to its computer, by the group's RID.
DIRECT_MEMBER_EDGES = {"-544": "AdminTo", "-580": "CanPSRemote", "-562": "ExecuteDCOM"}
REMOTE_DESKTOP_USERS = "-555"
DIRECT_ACCESS_USERS = "DIRECT ACCESS USERS"  # the start of the Citrix group's name
LOCAL_MEMBERSHIP = ("MemberOf", "MemberOfLocalGroup")


class ComputerGroups:
    """The local groups of one computer that the rules read."""

    def __init__(self, domain: str | None) -> None:
        self.domain = domain
        self.by_edge: dict[str, set[str]] = defaultdict(set)  # edge kind -> groups
        self.remote_desktop: set[str] = set()
        self.direct_access: set[str] = set()


async def local_group_edges(conn: Connection, citrix: bool) -> list[DerivedEdge]:
    computers: dict[str, ComputerGroups] = {}
    found = await store.list_local_groups(conn, DIRECT_ACCESS_USERS)
    for group, direct_access, computer, domain in found:
        if computer not in computers:
            computers[computer] = ComputerGroups(domain)
        groups = computers[computer]
        kind = DIRECT_MEMBER_EDGES.get(group[group.rfind("-") :])
        if kind is not None:
            groups.by_edge[kind].add(group)
        if group.endswith(REMOTE_DESKTOP_USERS):
            groups.remote_desktop.add(group)
        elif direct_access:
            groups.direct_access.add(group)
    if not computers:
        return []
    # A local group's own members (MemberOfLocalGroup only: a DC's BUILTIN groups are domain
    # groups too, whose MemberOf members are not the local group's); nesting below them
    # follows both kinds.
    groups_read = {
        group
        for groups in computers.values()
        for group in (*groups.remote_desktop, *groups.direct_access)
    }.union(*(held for groups in computers.values() for held in groups.by_edge.values()))
    local_members: dict[str, set[str]] = defaultdict(set)
    for member, group, _ in await store.list_members(
        conn, sorted(groups_read), ("MemberOfLocalGroup",)
    ):
        local_members[group].add(member)
    memberships = Memberships(conn, LOCAL_MEMBERSHIP, ("Group", "ADLocalGroup"))
    logon_rights: dict[str, set[str]] = defaultdict(set)
    for holder, _, computer in await store.list_edges_of_kinds(
        conn, ("RemoteInteractiveLogonRight",)
    ):
        logon_rights[computer].add(holder)
    edges: list[DerivedEdge] = []
    for computer, groups in sorted(computers.items()):
        for kind, holders in sorted(groups.by_edge.items()):
            members = set().union(*(local_members[group] for group in holders))
            edges += [(member, computer, kind, groups.domain) for member in sorted(members)]
        if not groups.remote_desktop:
            continue
        rdp = await remote_desktop_users(
            memberships, local_members, groups, logon_rights.get(computer, set()), citrix
        )
        edges += [(user, computer, "CanRDP", groups.domain) for user in sorted(rdp - {computer})]
    return edges


async def remote_desktop_users(
    memberships: Memberships,
    local_members: dict[str, set[str]],
    groups: ComputerGroups,
    holders: set[str],
    citrix: bool,
) -> set[str]:
    """Who gets CanRDP on a computer with these local groups, `holders` holding
    RemoteInteractiveLogonRight on it."""
    rdu = groups.remote_desktop
    if citrix and groups.direct_access:
        return await calculate_cross_product(memberships, [set(rdu), groups.direct_access, holders])
    if not rdu.isdisjoint(holders):
        return set().union(*(local_members[group] for group in rdu))
    below = await memberships.find_members_below(set(rdu)) or set()
    found: set[str] = set()
    for holder in holders:
        if holder in rdu or holder in below:
            found.add(holder)
        else:
            found |= (await memberships.find_members_below({holder}) or set()) & (below | rdu)
    return found
