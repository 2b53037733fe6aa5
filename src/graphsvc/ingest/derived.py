"""Edges a run derives from several of its records, written once they are all stored:
AdminTo, CanRDP, ExecuteDCOM, CanPSRemote on domain controllers. A DC reports the domain's
BUILTIN groups as its local groups (`DOMAIN-S-1-5-32-544`, named IGNOREME). Like the
reference, which links the one BUILTIN group node to every computer reporting it, the
members any computer of the run reports get the edge to each computer reporting the group.
(The local groups are not kept in the graph, so this stays with the run's records; the
relationships derived from the graph itself are the analysis's: graphsvc.analysis.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from graphsvc.ingest.records import EdgeRecord

if TYPE_CHECKING:
    from graphsvc.ingest.writer import GraphWriter


@dataclass
class BuiltinGroup:
    kind: str  # the edge its members get
    members: dict[str, str] = field(default_factory=dict)  # object id -> kind
    computers: dict[str, str | None] = field(default_factory=dict)  # object id -> domain


class DerivedEdges:
    """What the SharpHound parser gathers for these edges while reading: the domain
    controllers' built-in groups, whatever the input's size."""

    def __init__(self) -> None:
        self.builtin_groups: dict[str, BuiltinGroup] = {}

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
                            EdgeRecord(
                                member,
                                computer,
                                group.kind,
                                environment,
                                kind,
                                "Computer",
                                fact=f"localgroup:{group.kind}",
                                owner=computer,
                            )
                        )


def is_rdp_to_itself(kind: str, member: str, computer: str) -> bool:
    # The reference drops a computer's CanRDP to itself (and keeps the other three kinds).
    return kind == "CanRDP" and member == computer
