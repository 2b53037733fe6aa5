"""Loading collector output into the graph: one call is one collection run, all or nothing.

A format parser (opengraph.py; SharpHound and AzureHound later) turns a file into a
GraphBatch. The batch resolves edge endpoints against itself and the stored graph, then
the store writes it inside the caller's transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graphsvc import opengraph, store
from graphsvc.batch import Edge, Endpoint, GraphBatch, IngestError, Node, merge_kinds, read_json
from graphsvc.db import Connection


@dataclass
class IngestResult:
    run_id: str
    files: list[str]
    nodes: int
    edges: int
    created_at: datetime


def parse_file(path: Path, batch: GraphBatch) -> None:
    document = read_json(path)
    if not isinstance(document, dict):
        raise IngestError(str(path), "expected a JSON object at the top level")
    if "graph" in document:
        opengraph.parse(document, str(path), batch)
    elif "meta" in document or "data" in document:
        raise IngestError(
            str(path),
            "SharpHound/AzureHound files (meta + data) are not supported by this version yet; "
            "OpenGraph files (a top-level 'graph') are",
        )
    else:
        raise IngestError(str(path), "unknown format: expected a top-level 'graph' (OpenGraph)")


async def resolve_endpoint(
    conn: Connection, batch: GraphBatch, endpoint: Endpoint, edge: Edge, side: str
) -> store.StoredNode | Node:
    candidates: list[store.StoredNode | Node]
    if endpoint.match_by == "id":
        oid = endpoint.value.upper()
        found = batch.nodes.get(oid) or (await store.get_nodes(conn, [oid])).get(oid)
        candidates = [found] if found else []
    elif endpoint.match_by == "name":
        wanted = endpoint.value.upper()
        candidates = [n for n in batch.nodes.values() if n.name.upper() == wanted]
        if not candidates:
            candidates = list(await store.find_nodes_by_name(conn, endpoint.value))
    else:
        candidates = [
            n
            for n in batch.nodes.values()
            if all(n.properties.get(k) == v for k, v in endpoint.matchers)
        ]
        if not candidates:
            key, value = endpoint.matchers[0]
            stored = await store.find_nodes_by_property(conn, key, value)  # type: ignore[arg-type]
            candidates = [
                n for n in stored if all(n.properties.get(k) == v for k, v in endpoint.matchers)
            ]
    if endpoint.kind is not None:
        candidates = [n for n in candidates if endpoint.kind in n.kinds]
    where = f"{edge.element}.{side}"
    kind_note = f" of kind {endpoint.kind}" if endpoint.kind else ""
    if not candidates:
        raise IngestError(edge.source, f"no node{kind_note} with {endpoint.describe()}", where)
    if len(candidates) > 1:
        raise IngestError(
            edge.source, f"more than one node{kind_note} has {endpoint.describe()}", where
        )
    return candidates[0]


async def write_batch(conn: Connection, batch: GraphBatch, run_id: str, now: datetime) -> int:
    """Store the batch's nodes (merged with stored ones) and edges; returns the edge count."""
    stored = await store.get_nodes(conn, batch.nodes)
    rows = []
    for oid, node in batch.nodes.items():
        old = stored.get(oid)
        if old is None:
            rows.append((oid, node.name, node.kinds, node.properties))
        else:
            name = node.name if node.name != oid or not old.name else old.name
            rows.append(
                (
                    oid,
                    name,
                    merge_kinds(node.kinds, old.kinds),
                    {**old.properties, **node.properties},
                )
            )
    ids = await store.upsert_nodes(conn, rows, run_id, now) if rows else {}

    edges: dict[tuple[int, int, str], dict[str, Any]] = {}
    for edge in batch.edges:
        start = await resolve_endpoint(conn, batch, edge.start, edge, "start")
        end = await resolve_endpoint(conn, batch, edge.end, edge, "end")
        start_id = ids.get(start.object_id) or stored_id(start)
        end_id = ids.get(end.object_id) or stored_id(end)
        edges.setdefault((start_id, end_id, edge.kind), {}).update(edge.properties)
    if edges:
        await store.upsert_edges(
            conn, [(s, e, k, p) for (s, e, k), p in edges.items()], run_id, now
        )
    return len(edges)


def stored_id(node: store.StoredNode | Node) -> int:
    assert isinstance(node, store.StoredNode), "batch nodes are written before edges"
    return node.id


async def ingest_files(conn: Connection, paths: Sequence[Path]) -> IngestResult:
    """Parse every file first, then write; any error leaves the store unchanged."""
    batch = GraphBatch()
    for path in paths:
        parse_file(path, batch)
    run_id = str(uuid.uuid4())
    now = datetime.now(UTC)
    edge_count = await write_batch(conn, batch, run_id, now)
    files = [str(p) for p in paths]
    await store.insert_ingest_run(conn, run_id, files, len(batch.nodes), edge_count, now)
    return IngestResult(run_id, files, len(batch.nodes), edge_count, now)
