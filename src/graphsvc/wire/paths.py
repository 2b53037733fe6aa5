"""The shortest-path answer, the reference's unified graph: nodes keyed by graph id, edges
between those ids."""

from __future__ import annotations

from datetime import datetime

import msgspec


class PathNode(msgspec.Struct):
    label: str  # the node's name
    kind: str  # its primary kind
    kinds: list[str]
    objectId: str
    isTierZero: bool
    isOwnedObject: bool
    lastSeen: datetime


class PathEdge(msgspec.Struct):
    source: str  # graph ids, as keys of `nodes`
    target: str
    label: str  # the kind, as the reference repeats it
    kind: str
    lastSeen: datetime


class PathGraph(msgspec.Struct):
    nodes: dict[str, PathNode]
    edges: list[PathEdge]


class PathGraphResponse(msgspec.Struct):
    data: PathGraph
