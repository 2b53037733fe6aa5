"""`POST /api/v2/graphs/cypher`: the query asked, and the reference's unified graph it
answers with (nodes keyed by graph id, edges between those ids, and the values that are
neither as literals)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType


class CypherQueryRequest(msgspec.Struct, forbid_unknown_fields=True):
    query: str
    include_properties: bool = False
    # $name values of the query (the reference has none: its clients build query text).
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)


class CypherNode(msgspec.Struct, omit_defaults=True):
    label: str  # the node's name (its object id without one)
    kind: str  # its primary kind
    kinds: list[str]
    objectId: str
    isTierZero: bool
    isOwnedObject: bool
    lastSeen: datetime
    properties: dict[str, Any] | UnsetType = UNSET  # with include_properties


class CypherEdge(msgspec.Struct, omit_defaults=True):
    source: str  # graph ids, as keys of `nodes`
    target: str
    label: str  # the kind, as the reference repeats it
    kind: str
    lastSeen: datetime
    properties: dict[str, Any] | UnsetType = UNSET  # with include_properties


class CypherLiteral(msgspec.Struct):
    value: Any  # a node in a value is its graph id; a relationship its ends and kind
    key: str  # the column it was returned as


class CypherGraph(msgspec.Struct, omit_defaults=True):
    nodes: dict[str, CypherNode]
    edges: list[CypherEdge]
    literals: list[CypherLiteral]
    node_keys: list[str] | UnsetType = UNSET  # with include_properties: every node's keys
    edge_keys: list[str] | UnsetType = UNSET


class CypherResponse(msgspec.Struct):
    data: CypherGraph
