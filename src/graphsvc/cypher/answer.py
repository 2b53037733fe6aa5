"""A query's rows as the reference's unified graph: each node, relationship and path in a row
goes into `nodes` and `edges`, every other value into `literals` under its column's name.

A node's `kind` is its primary kind, the first of its labels that is not `Base`, `AZBase` or
a tag (ingest stores the primary kind first); `label` is its name, or its object id without
one. Edges are listed once each (the reference repeats an edge met in several rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from msgspec import UNSET

from graphsvc import wire
from graphsvc.cypher.execute import Result
from graphsvc.cypher.functions import format_datetime
from graphsvc.cypher.graph import QueryGraph, cypher_properties, iso_time
from graphsvc.cypher.values import DateTime, Duration, Node, Path, Rel
from graphsvc.store.db import Row

SOURCE_KINDS = frozenset({"Base", "AZBase"})


@dataclass
class Collected:
    """What a result holds, gathered in the order it is met."""

    nodes: dict[int, None] = field(default_factory=dict)
    rels: dict[Rel, None] = field(default_factory=dict)
    literals: list[tuple[str, Any]] = field(default_factory=list)

    def add_graph(self, value: Any) -> bool:
        """Take a node, relationship or path (or a list of them: a variable-length
        relationship); False for any other value."""
        if isinstance(value, Node):
            self.nodes[value.id] = None
        elif isinstance(value, Rel):
            self.rels[value] = None
        elif isinstance(value, Path):
            for node in value.nodes:
                self.nodes[node] = None
            for rel in value.rels:
                self.rels[rel] = None
        elif isinstance(value, list) and value and all(isinstance(v, Rel) for v in value):
            for rel in value:
                self.rels[rel] = None
        else:
            return False
        return True


def collect(result: Result) -> Collected:
    found = Collected()
    for row in result.rows:
        for column, value in zip(result.columns, row, strict=True):
            if not found.add_graph(value):
                found.literals.append((column, value))
    return found


def primary_kind(labels: tuple[str, ...]) -> str:
    for label in labels:
        if label not in SOURCE_KINDS and not label.startswith("Tag_"):
            return label
    return next((label for label in labels if label in SOURCE_KINDS), "Unknown")


def literal_value(value: Any, graph: QueryGraph) -> Any:
    """A value as JSON: a node is its graph id (a key of `nodes` when the node is in the
    answer), a relationship its ends and kind, a path its nodes' ids and relationships."""
    if isinstance(value, Node):
        return str(value.id)
    if isinstance(value, Rel):
        return {
            "source": str(value.start),
            "target": str(value.end),
            "kind": graph.kind_names.get(value.kind, ""),
        }
    if isinstance(value, Path):
        return {
            "nodes": [str(n) for n in value.nodes],
            "edges": [literal_value(r, graph) for r in value.rels],
        }
    if isinstance(value, list):
        return [literal_value(v, graph) for v in value]
    if isinstance(value, dict):
        return {k: literal_value(v, graph) for k, v in value.items()}
    if isinstance(value, DateTime):
        return format_datetime(value)
    if isinstance(value, Duration):
        return f"PT{value.seconds:g}S"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def node_entry(
    graph: QueryGraph, node: int, stored: Row, include_properties: bool, now: datetime
) -> wire.CypherNode:
    """A node as the answer shows it, from the store's row of it (store/cypher.py
    `read_nodes`) and its labels."""
    object_id, name, text, moment = stored
    labels = graph.nodes.labels(node)
    properties: Any = UNSET
    if include_properties:
        lastseen = iso_time(moment) if moment is not None else None
        properties = cypher_properties(
            text, object_id, name, lastseen, graph.nodes.system_tags(node)
        )
    return wire.CypherNode(
        label=name or object_id or "",
        kind=primary_kind(labels),
        kinds=list(labels),
        objectId=object_id or "",
        isTierZero=graph.nodes.is_tier_zero(node),
        isOwnedObject=graph.nodes.is_owned(node),
        lastSeen=(moment.replace(tzinfo=UTC) if moment and moment.tzinfo is None else moment)
        or now,
        properties=properties,
    )


def graph_answer(
    graph: QueryGraph,
    found: Collected,
    stored_nodes: dict[int, Row],
    edges: dict[tuple[int, int, int], tuple[dict[str, Any], datetime]],
    include_properties: bool,
) -> wire.CypherResponse:
    """The answer, given the store's rows of the nodes found and the properties and times of
    the relationships found."""
    now = datetime.now(UTC)
    nodes = {
        str(node): node_entry(graph, node, stored_nodes[node], include_properties, now)
        for node in found.nodes
        if graph.nodes.exists(node) and node in stored_nodes
    }
    edge_entries = []
    for rel in found.rels:
        properties, moment = edges.get((rel.start, rel.kind, rel.end), ({}, now))
        kind = graph.kind_names.get(rel.kind, "")
        edge_entries.append(
            wire.CypherEdge(
                source=str(rel.start),
                target=str(rel.end),
                label=kind,
                kind=kind,
                lastSeen=moment if moment.tzinfo else moment.replace(tzinfo=UTC),
                properties=dict(properties) if include_properties else UNSET,
            )
        )
    literals = [
        wire.CypherLiteral(value=literal_value(value, graph), key=column)
        for column, value in found.literals
    ]
    answer = wire.CypherGraph(nodes=nodes, edges=edge_entries, literals=literals)
    if include_properties:
        node_keys = sorted({k for n in nodes.values() for k in (n.properties or {})})
        edge_keys = sorted({k for e in edge_entries for k in (e.properties or {})})
        if node_keys:
            answer.node_keys = node_keys
        if edge_keys:
            answer.edge_keys = edge_keys
    return wire.CypherResponse(data=answer)
