"""OpenGraph files: {"metadata": {"source_kind"}, "graph": {"nodes": [...], "edges": [...]}}.

A node's `environmentid` property names the environment instance it belongs to.

Checked against the rules of the published node and edge schemas: node `id` and `kinds`
required (at most three kinds), property values primitive or homogeneous primitive arrays,
no `objectid` property that differs from the id, edge kinds of letters, digits and `_`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from graphsvc.ingest.records import Endpoint, IngestError, MatchedEdge, NodeRecord, Primitive
from graphsvc.ingest.writer import GraphWriter
from graphsvc.store import clearing

Reader = Callable[[str], AsyncIterator[tuple[int, Any]]]

EDGE_KIND = re.compile(r"[A-Za-z0-9_]+")
MATCH_BY = ("id", "name", "property")
MAX_KINDS = 3


async def ingest(read: Reader, source: str, writer: GraphWriter) -> None:
    """Nodes are written as they stream in; edges wait until every node of the run is stored,
    since they may name nodes by name or property, or nodes of a later file."""
    metadata = [m async for _, m in read("metadata")]
    source_kind = parse_metadata(metadata[0] if metadata else None, source)
    if source_kind:  # clear-database can then delete its nodes (store/clearing.py)
        await clearing.register_source_kind(writer.conn, source_kind)
    seen = 0
    async for i, raw in read("graph.nodes.item"):
        await writer.node(parse_node(raw, source, f"graph.nodes[{i}]", source_kind))
        seen += 1
    async for i, raw in read("graph.edges.item"):
        writer.matched_edge(parse_edge(raw, source, f"graph.edges[{i}]"))
        seen += 1
    if not seen:
        await check_graph_shape(read, source)


async def check_graph_shape(read: Reader, source: str) -> None:
    """For a file that yielded no node and no edge: say what is wrong with its shape."""
    graphs = [g async for _, g in read("graph")]
    if not graphs:
        raise IngestError(
            source,
            "unknown format: expected a top-level 'graph' (OpenGraph) or "
            "'meta' and 'data' (SharpHound, AzureHound)",
        )
    graph = graphs[0]
    if not isinstance(graph, dict):
        raise IngestError(source, "must be an object", "graph")
    if "nodes" not in graph and "edges" not in graph:
        raise IngestError(source, "needs 'nodes', 'edges' or both", "graph")
    for name in ("nodes", "edges"):
        if name in graph and not isinstance(graph[name], list):
            raise IngestError(source, "must be an array", f"graph.{name}")


def parse_metadata(metadata: Any, source: str) -> str | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise IngestError(source, "must be an object", "metadata")
    unknown = set(metadata) - {"source_kind"}
    if unknown:
        raise IngestError(source, f"unknown field(s) {sorted(unknown)}", "metadata")
    source_kind = metadata.get("source_kind")
    if source_kind is not None and (not isinstance(source_kind, str) or not source_kind):
        raise IngestError(source, "must be a non-empty string", "metadata.source_kind")
    return source_kind


def parse_node(raw: Any, source: str, where: str, source_kind: str | None) -> NodeRecord:
    if not isinstance(raw, dict):
        raise IngestError(source, "must be an object", where)
    node_id = raw.get("id")
    if not isinstance(node_id, str) or not node_id.strip():
        raise IngestError(source, "'id' must be a non-empty string", where)
    kinds = raw.get("kinds")
    if not isinstance(kinds, list) or not all(isinstance(k, str) and k for k in kinds):
        raise IngestError(source, "'kinds' must be an array of non-empty strings", where)
    if len(kinds) > MAX_KINDS:
        raise IngestError(source, f"'kinds' has {len(kinds)} entries, at most {MAX_KINDS}", where)
    properties = parse_properties(raw.get("properties"), source, f"{where}.properties")
    objectid = properties.get("objectid")
    if objectid is not None and str(objectid).upper() != node_id.upper():
        raise IngestError(
            source,
            f"'objectid' {objectid!r} differs from the node id {node_id!r}",
            f"{where}.properties",
        )
    if source_kind and source_kind not in kinds:
        kinds = [*kinds, source_kind]
    name = properties.get("name")
    environment = properties.get("environmentid")
    return NodeRecord(
        object_id=node_id.upper(),
        name=name if isinstance(name, str) and name else node_id,
        kinds=list(dict.fromkeys(kinds)),
        properties=properties,
        environment_id=environment.upper() if isinstance(environment, str) else None,
    )


def parse_properties(raw: Any, source: str, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise IngestError(source, "must be an object or null", where)
    for key, value in raw.items():
        if not is_property_value(value):
            raise IngestError(
                source,
                "values must be strings, numbers, booleans or arrays of one of those types",
                f"{where}.{key}",
            )
    return dict(raw)


def is_primitive(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def is_property_value(value: Any) -> bool:
    if is_primitive(value):
        return True
    if not isinstance(value, list) or not all(is_primitive(v) for v in value):
        return False
    # Homogeneous: all strings, all booleans, or all numbers (bool is an int in Python).
    families = {
        "bool" if isinstance(v, bool) else "str" if isinstance(v, str) else "num" for v in value
    }
    return len(families) <= 1


def parse_edge(raw: Any, source: str, where: str) -> MatchedEdge:
    if not isinstance(raw, dict):
        raise IngestError(source, "must be an object", where)
    kind = raw.get("kind")
    if not isinstance(kind, str) or not EDGE_KIND.fullmatch(kind):
        raise IngestError(source, "'kind' must match ^[A-Za-z0-9_]+$", where)
    return MatchedEdge(
        kind=kind,
        start=parse_endpoint(raw.get("start"), source, f"{where}.start"),
        end=parse_endpoint(raw.get("end"), source, f"{where}.end"),
        properties=parse_properties(raw.get("properties"), source, f"{where}.properties"),
        source=source,
        element=where,
    )


def parse_endpoint(raw: Any, source: str, where: str) -> Endpoint:
    if not isinstance(raw, dict):
        raise IngestError(source, "must be an object with 'value' (and 'match_by')", where)
    match_by = raw.get("match_by", "id")
    if match_by not in MATCH_BY:
        raise IngestError(source, f"'match_by' must be one of {', '.join(MATCH_BY)}", where)
    kind = raw.get("kind")
    if kind is not None and (not isinstance(kind, str) or not kind):
        raise IngestError(source, "'kind' must be a non-empty string", where)
    if match_by == "property":
        return Endpoint("property", "", kind, parse_matchers(raw, source, where))
    value = raw.get("value")
    if not isinstance(value, str) or not value:
        raise IngestError(source, "'value' must be a non-empty string", where)
    return Endpoint(match_by, value, kind)


def parse_matchers(raw: dict[str, Any], source: str, where: str) -> list[tuple[str, Primitive]]:
    matchers = raw.get("property_matchers")
    if not isinstance(matchers, list) or not matchers:
        raise IngestError(
            source, "match_by 'property' needs a non-empty 'property_matchers'", where
        )
    parsed = []
    for i, m in enumerate(matchers):
        at = f"{where}.property_matchers[{i}]"
        if not isinstance(m, dict) or not isinstance(m.get("key"), str) or not m["key"]:
            raise IngestError(source, "needs a non-empty string 'key'", at)
        if m.get("operator", "equals") != "equals":
            raise IngestError(source, "'operator' must be 'equals'", at)
        if not is_primitive(m.get("value")):
            raise IngestError(source, "'value' must be a string, number or boolean", at)
        parsed.append((m["key"], m["value"]))
    return parsed
