"""Bulk loads of generated shapes for the benchmarks: COPY on PostgreSQL, multi-row inserts
on SQLite (through `Connection.copy_rows`), skipping the ingest path."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from graphsvc.store.data_quality import AggregationRow
from graphsvc.store.db import Connection
from graphsvc.store.dialect import refresh_planner_statistics, sync_id_sequence
from graphsvc.store.graph import GRAPH_TABLES, ensure_kinds

BULK_BATCH = 50_000  # rows per COPY (or multi-row insert) in bulk loads


async def bulk_insert_aggregations(
    conn: Connection, rows: Iterable[tuple[AggregationRow, datetime]]
) -> int:
    """Append aggregation rows, each with its own creation time (benchmark histories)."""
    columns = [
        "run_id",
        "extension_id",
        "environment_kind_id",
        "metric_type",
        "metric_name",
        "metric_value",
        "kind_id",
        "created_at",
        "updated_at",
    ]
    count = 0
    batch: list[tuple[Any, ...]] = []
    batches: Counter[tuple[str, int, int, datetime]] = Counter()
    for r, created_at in rows:
        batches[(r.run_id, r.environment_kind_id, r.extension_id, created_at)] += 1
        batch.append(
            (
                r.run_id,
                r.extension_id,
                r.environment_kind_id,
                r.metric_type,
                r.metric_name,
                r.metric_value,
                r.kind_id,
                created_at,
                created_at,
            )
        )
        if len(batch) >= BULK_BATCH:
            await conn.copy_rows("data_quality_aggregations", columns, batch)
            count += len(batch)
            batch.clear()
    await conn.copy_rows("data_quality_aggregations", columns, batch)
    counts = [(*key, n) for key, n in batches.items()]
    for start in range(0, len(counts), BULK_BATCH):
        await conn.copy_rows(
            "aggregation_batches",
            ["run_id", "environment_kind_id", "extension_id", "created_at", "row_count"],
            counts[start : start + BULK_BATCH],
        )
    await refresh_planner_statistics(conn, ["data_quality_aggregations", "aggregation_batches"])
    return count + len(batch)


async def bulk_insert_graph(
    conn: Connection,
    nodes: Iterable[tuple[int, str, str, str]],
    edges: Iterable[tuple[int, int, str]],
    environment_id: str,
    now: datetime,
    properties: Callable[[int, str, str], dict[str, Any]] | None = None,
) -> tuple[int, int]:
    """Append a whole graph to the store, for benchmarks at scale: nodes as (id, object id,
    name, label), edges as (start id, end id, kind), ids counting from 1 within the graph;
    each node's properties from `properties(id, label, name)` (default: its name only).
    The object ids must be new to the store. Returns the numbers of nodes and edges added."""
    offset = int(await conn.fetchval("SELECT coalesce(max(id), 0) FROM nodes"))
    kind_ids: dict[str, int] = {}

    async def kind(name: str) -> int:
        kind_ids.update(await ensure_kinds(conn, [name]))
        return kind_ids[name]

    base = await kind("Base")
    node_count = edge_count = 0
    node_rows: list[tuple[Any, ...]] = []
    kind_rows: list[tuple[int, int]] = []
    for node_id, object_id, name, label in nodes:
        node_rows.append(
            (
                node_id + offset,
                object_id,
                name,
                label,
                json.dumps([label, "Base"]),
                json.dumps(properties(node_id, label, name) if properties else {"name": name}),
                environment_id,
                now,
                now,
            )
        )
        label_id = kind_ids.get(label) or await kind(label)
        kind_rows += [(node_id + offset, label_id), (node_id + offset, base)]
        if len(node_rows) >= BULK_BATCH:
            node_count += await copy_nodes(conn, node_rows, kind_rows)
    node_count += await copy_nodes(conn, node_rows, kind_rows)
    await sync_id_sequence(conn, "nodes")
    edge_rows: list[tuple[Any, ...]] = []
    for start, end, edge_kind in edges:
        kind_id = kind_ids.get(edge_kind) or await kind(edge_kind)
        edge_rows.append((start + offset, end + offset, kind_id, "{}", environment_id, now))
        if len(edge_rows) >= BULK_BATCH:
            edge_count += await copy_edges(conn, edge_rows)
    edge_count += await copy_edges(conn, edge_rows)
    await refresh_planner_statistics(conn, GRAPH_TABLES)
    return node_count, edge_count


async def copy_nodes(
    conn: Connection, rows: list[tuple[Any, ...]], kind_rows: list[tuple[int, int]]
) -> int:
    count = len(rows)
    await conn.copy_rows(
        "nodes",
        [
            "id",
            "object_id",
            "name",
            "label",
            "kinds",
            "properties",
            "environment_id",
            "created_at",
            "updated_at",
        ],
        rows,
    )
    await conn.copy_rows("node_kinds", ["node_id", "kind_id"], kind_rows)
    rows.clear()
    kind_rows.clear()
    return count


async def copy_edges(conn: Connection, rows: list[tuple[Any, ...]]) -> int:
    count = len(rows)
    await conn.copy_rows(
        "edges",
        [
            "start_id",
            "end_id",
            "kind_id",
            "properties",
            "environment_id",
            "updated_at",
        ],
        rows,
    )
    rows.clear()
    return count
