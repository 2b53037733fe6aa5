"""The shortest-path answer, the reference's unified graph (nodes keyed by graph id, edges
between those ids), and a domain's exposure to its tier zero."""

from __future__ import annotations

from datetime import datetime

import msgspec

from graphsvc.wire.common import Count


class PathNode(msgspec.Struct):
    label: str  # the node's name
    kind: str  # its primary kind
    kinds: list[str]  # its kinds, then its tags' labels (Tag_Tier_Zero, Tag_Owned...)
    objectId: str
    isTierZero: bool
    isOwnedObject: bool
    lastSeen: datetime
    system_tags: str  # admin_tier_0 and owned, space-separated, as it is in each


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


class PathSet(msgspec.Struct):
    """Shortest paths from a set of objects to another (GET /api/v2/graphs/paths-between):
    their nodes and edges as one graph, as shortest-path answers, and each path as the
    positions of its edges in `edges`, from its start on."""

    nodes: dict[str, PathNode]
    edges: list[PathEdge]
    paths: list[list[Count]]
    reaching: Count  # how many of the starts have a path to the ends
    truncated: bool  # there were more paths than `limit`


class PathSetResponse(msgspec.Struct):
    data: PathSet


class FirstHop(msgspec.Struct):
    objectID: str
    name: str
    label: str
    kind: str  # the kind of the step to it


class ExposedPrincipal(msgspec.Struct):
    objectID: str
    name: str
    label: str
    kinds: list[str]  # its kinds, then its tags' labels (Tag_Owned...)
    length: int  # steps of its shortest path to the domain's tier zero
    firstHop: FirstHop  # where one such path goes first
    isTierZero: bool
    isOwnedObject: bool
    system_tags: str  # admin_tier_0 and owned, space-separated, as it is in each


class UserExposure(msgspec.Struct):
    enabled: Count  # the domain's enabled users
    exposed: Count  # how many of them have a path to its tier zero
    share: float  # exposed / enabled (0 with no enabled user)


class ExposureList(msgspec.Struct):
    count: Count
    skip: Count
    limit: Count
    users: UserExposure
    data: list[ExposedPrincipal]
