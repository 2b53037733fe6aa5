"""Writing the graph: kinds, nodes and edges as ingest stores them, and the records of ingest
runs."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from graphsvc.store.db import (
    Connection,
    Row,
    in_list,
    json_property_equals,
    json_value_param,
    list_param,
    refresh_planner_statistics,
)


async def ensure_kinds(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Ids of the named kinds, creating the missing ones."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    await conn.executemany(
        "INSERT INTO kinds (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
        [(n,) for n in wanted],
    )
    rows = await conn.fetch(
        f"SELECT id, name FROM kinds WHERE {in_list(conn.dialect, 'name', '$1')}",
        list_param(conn.dialect, wanted),
    )
    return {name: kind_id for kind_id, name in rows}


@dataclass
class StoredNode:
    id: int
    object_id: str
    name: str
    kinds: list[str]
    properties: dict[str, Any]
    environment_id: str | None


NODE_COLUMNS = "id, object_id, name, kinds, properties, environment_id"


def stored_node(r: Row) -> StoredNode:
    return StoredNode(r[0], r[1], r[2], json.loads(r[3]), json.loads(r[4]), r[5])


async def find_nodes(conn: Connection, object_ids: Iterable[str]) -> dict[str, StoredNode]:
    rows = await conn.fetch(
        f"SELECT {NODE_COLUMNS} FROM nodes WHERE {in_list(conn.dialect, 'object_id', '$1')}",
        list_param(conn.dialect, set(object_ids)),
    )
    return {r[1]: stored_node(r) for r in rows}


async def node_ids(conn: Connection, object_ids: Iterable[str]) -> dict[str, int]:
    rows = await conn.fetch(
        f"SELECT id, object_id FROM nodes WHERE {in_list(conn.dialect, 'object_id', '$1')}",
        list_param(conn.dialect, set(object_ids)),
    )
    return {object_id: node_id for node_id, object_id in rows}


async def find_nodes_by_name(conn: Connection, name: str) -> list[StoredNode]:
    rows = await conn.fetch(
        f"SELECT {NODE_COLUMNS} FROM nodes WHERE upper(name) = $1 LIMIT 2", name.upper()
    )
    return [stored_node(r) for r in rows]


async def find_nodes_by_property(
    conn: Connection, key: str, value: str | float | bool
) -> list[StoredNode]:
    """Nodes whose top-level property `key` equals `value`, compared as JSON values."""
    condition = json_property_equals(conn.dialect, "properties", "$1", "$2")
    rows = await conn.fetch(
        f"SELECT {NODE_COLUMNS} FROM nodes WHERE {condition} LIMIT 2",
        key,
        json_value_param(conn.dialect, value),
    )
    return [stored_node(r) for r in rows]


class CollectedNode(Protocol):
    """A node as the ingest writer hands it over (its NodeRecord), merged with what was stored."""

    object_id: str
    name: str
    kinds: list[str]
    properties: dict[str, Any]
    environment_id: str | None


class EdgeRow(NamedTuple):
    start_id: int
    end_id: int
    kind: str
    properties: dict[str, Any]
    environment_id: str | None


async def upsert_nodes(
    conn: Connection, nodes: Sequence[CollectedNode], run_id: str, now: datetime
) -> None:
    """Insert or replace collected nodes (already merged with what was stored)."""
    await conn.executemany(
        """INSERT INTO nodes (object_id, name, label, kinds, properties, environment_id, run_id,
            created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
        ON CONFLICT (object_id) DO UPDATE SET name = excluded.name, label = excluded.label,
            kinds = excluded.kinds, properties = excluded.properties,
            environment_id = excluded.environment_id, run_id = excluded.run_id,
            updated_at = excluded.updated_at""",
        [
            (
                n.object_id,
                n.name,
                n.kinds[0] if n.kinds else "Entity",
                json.dumps(n.kinds),
                json.dumps(n.properties),
                n.environment_id,
                run_id,
                now,
            )
            for n in nodes
        ],
    )
    ids = await node_ids(conn, (n.object_id for n in nodes))
    kind_ids = await ensure_kinds(conn, (k for n in nodes for k in n.kinds))
    await conn.executemany(
        "DELETE FROM node_kinds WHERE node_id = $1", [(ids[n.object_id],) for n in nodes]
    )
    await conn.executemany(
        "INSERT INTO node_kinds (node_id, kind_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        [(ids[n.object_id], kind_ids[k]) for n in nodes for k in n.kinds],
    )


async def ensure_nodes(conn: Connection, wanted: dict[str, str], now: datetime) -> dict[str, int]:
    """Ids of the given object ids, adding a stub node (of the given kind) for each missing one.

    Stubs carry no run: they were referenced, not collected, so run statistics skip them.
    """
    ids = await node_ids(conn, wanted)
    missing = [(oid, kind) for oid, kind in wanted.items() if oid not in ids]
    if missing:
        await conn.executemany(
            """INSERT INTO nodes (object_id, name, label, kinds, properties, created_at,
                updated_at) VALUES ($1, $1, $2, $3, '{}', $4, $4)""",
            [(oid, kind, json.dumps([kind]), now) for oid, kind in missing],
        )
        added = await node_ids(conn, (oid for oid, _ in missing))
        kind_ids = await ensure_kinds(conn, (kind for _, kind in missing))
        await conn.executemany(
            "INSERT INTO node_kinds (node_id, kind_id) VALUES ($1, $2)",
            [(added[oid], kind_ids[kind]) for oid, kind in missing],
        )
        ids.update(added)
    return ids


async def upsert_edges(
    conn: Connection,
    edges: Sequence[EdgeRow],
    run_id: str,
    now: datetime,
) -> None:
    """Insert or update edges; their kinds are created as needed."""
    kind_ids = await ensure_kinds(conn, (e.kind for e in edges))
    await conn.executemany(
        """INSERT INTO edges (start_id, end_id, kind_id, properties, environment_id, run_id,
            created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
        ON CONFLICT (end_id, kind_id, start_id) DO UPDATE SET properties = excluded.properties,
            environment_id = excluded.environment_id, run_id = excluded.run_id,
            updated_at = excluded.updated_at""",
        [(s, e, kind_ids[k], json.dumps(p), env, run_id, now) for s, e, k, p, env in edges],
    )


GRAPH_TABLES = ("nodes", "node_kinds", "edges")
# A run that adds this many nodes and edges refreshes the planner's statistics.
LARGE_RUN_ROWS = 10_000


async def refresh_statistics_after(conn: Connection, rows_added: int) -> None:
    if rows_added >= LARGE_RUN_ROWS:
        await refresh_planner_statistics(conn, GRAPH_TABLES)


async def delete_nodes(conn: Connection, object_ids: Sequence[str]) -> None:
    """Remove nodes (collectors report deleted objects); their edges go with them."""
    await conn.execute(
        f"DELETE FROM nodes WHERE {in_list(conn.dialect, 'object_id', '$1')}",
        list_param(conn.dialect, object_ids),
    )


async def count_run(conn: Connection, run_id: str) -> tuple[int, int]:
    """Nodes collected and edges produced by one run."""
    row = await conn.fetchrow(
        """SELECT (SELECT count(*) FROM nodes WHERE run_id = $1),
            (SELECT count(*) FROM edges WHERE run_id = $1)""",
        run_id,
    )
    assert row is not None
    return int(row[0]), int(row[1])


async def insert_ingest_run(
    conn: Connection,
    run_id: str,
    files: Sequence[str],
    nodes: int,
    edges: int,
    now: datetime,
    duration_seconds: float,
) -> None:
    await conn.execute(
        """INSERT INTO ingest_runs (id, created_at, files, node_count, edge_count,
            duration_seconds) VALUES ($1, $2, $3, $4, $5, $6)""",
        run_id,
        now,
        json.dumps(list(files)),
        nodes,
        edges,
        duration_seconds,
    )


@dataclass
class IngestSummary:
    runs: int
    last_at: datetime | None
    last_nodes: int
    last_edges: int
    last_seconds: float


async def summarize_ingest_runs(conn: Connection) -> IngestSummary:
    """How many runs the store holds, and the newest one's figures."""
    r = await conn.fetchrow(
        """SELECT (SELECT count(*) FROM ingest_runs), created_at, node_count, edge_count,
            duration_seconds FROM ingest_runs ORDER BY created_at DESC LIMIT 1"""
    )
    if r is None:
        return IngestSummary(0, None, 0, 0, 0.0)
    return IngestSummary(int(r[0]), r[1], r[2], r[3], float(r[4] or 0.0))


async def count_graph(conn: Connection) -> tuple[int, int]:
    row = await conn.fetchrow("SELECT (SELECT count(*) FROM nodes), (SELECT count(*) FROM edges)")
    assert row is not None
    return int(row[0]), int(row[1])


async def store_is_empty(conn: Connection) -> bool:
    """No graph, users, clients or SAML providers yet (migration seed rows do not count)."""
    found = await conn.fetchval(
        """SELECT 1 FROM nodes UNION ALL SELECT 1 FROM users UNION ALL SELECT 1 FROM clients
        UNION ALL SELECT 1 FROM saml_providers LIMIT 1"""
    )
    return found is None


async def find_newest_run_id(conn: Connection) -> str | None:
    found = await conn.fetchval("SELECT id FROM ingest_runs ORDER BY created_at DESC LIMIT 1")
    return None if found is None else str(found)
