"""All SQL. Functions take an open connection; the caller owns the transaction."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from graphsvc import models as m
from graphsvc.db import (
    Connection,
    Row,
    in_list,
    json_property_equals,
    json_value_param,
    list_param,
    refresh_planner_statistics,
    sync_id_sequence,
)
from graphsvc.records import NodeRecord

BULK_BATCH = 50_000  # rows per COPY (or multi-row insert) in bulk loads

# --- reading helpers --------------------------------------------------------------------


async def fetch_page(
    conn: Connection, sql: str, args: Sequence[Any], skip: int, limit: int
) -> tuple[int, list[Row]]:
    """Rows of one page plus the total count; `sql` selects `count(*) OVER ()` last."""
    n = len(args)
    rows = await conn.fetch(f"{sql} LIMIT ${n + 1} OFFSET ${n + 2}", *args, limit, skip)
    if rows:
        return int(rows[0][-1]), rows
    total = await conn.fetchval(f"SELECT count(*) FROM ({sql}) AS page", *args)
    return int(total or 0), []


def order_clause(sort: Sequence[tuple[str, bool]], columns: dict[str, str], tie: str) -> str:
    """ORDER BY from (column, descending) pairs already checked against `columns`."""
    parts = [f"{columns[name]} {'DESC' if desc else 'ASC'}" for name, desc in sort]
    return ", ".join([*parts, tie])


# --- data quality -----------------------------------------------------------------------

AGGREGATION_COLUMNS = """id, created_at, updated_at, deleted_at, run_id, extension_id,
    environment_kind_id, metric_type, metric_name, metric_value, kind_id"""
TIME_SORT_COLUMNS = {"created_at": "created_at", "updated_at": "updated_at"}


def aggregation_from_row(r: Row) -> m.DataQualityAggregation:
    return m.DataQualityAggregation(
        r[0], r[1], r[2], m.null_time(r[3]), r[4], r[5], r[6], r[7], r[8], float(r[9]), r[10]
    )


async def extension_exists(conn: Connection, extension_id: int) -> bool:
    found = await conn.fetchval(
        "SELECT 1 FROM schema_extensions WHERE id = $1 AND deleted_at IS NULL", extension_id
    )
    return found is not None


async def list_aggregations(
    conn: Connection,
    environment_kind_id: int,
    extension_id: int | None,
    start: datetime,
    end: datetime,
    sort: Sequence[tuple[str, bool]],
    skip: int,
    limit: int,
) -> tuple[int, list[m.DataQualityAggregation]]:
    args: list[Any] = [environment_kind_id, start, end]
    extension_filter = ""
    if extension_id is not None:
        args.append(extension_id)
        extension_filter = "AND extension_id = $4"
    window = f"""FROM data_quality_aggregations
        WHERE environment_kind_id = $1 AND created_at >= $2 AND created_at <= $3
          AND deleted_at IS NULL {extension_filter}"""
    # The total is a scalar subquery, not count(*) OVER (): a window function reads every
    # row of the window before the page, which over a long history costs a hundred times
    # what the page does (both halves run from the index dq_aggregations_window).
    sql = f"""SELECT {AGGREGATION_COLUMNS}, (SELECT count(*) {window}) {window}
        ORDER BY {order_clause(sort, TIME_SORT_COLUMNS, "id DESC")}"""
    total, rows = await fetch_page(conn, sql, args, skip, limit)
    return total, [aggregation_from_row(r) for r in rows]


@dataclass
class AggregationRow:
    run_id: str
    extension_id: int
    environment_kind_id: int
    metric_type: str
    metric_name: str
    metric_value: float
    kind_id: int | None


async def insert_aggregations(
    conn: Connection, rows: Iterable[AggregationRow], created_at: datetime
) -> None:
    await conn.executemany(
        """INSERT INTO data_quality_aggregations (run_id, extension_id, environment_kind_id,
            metric_type, metric_name, metric_value, kind_id, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)""",
        [
            (
                r.run_id,
                r.extension_id,
                r.environment_kind_id,
                r.metric_type,
                r.metric_name,
                r.metric_value,
                r.kind_id,
                created_at,
            )
            for r in rows
        ],
    )


async def bulk_insert_aggregations(
    conn: Connection, rows: Iterable[tuple[AggregationRow, datetime]]
) -> int:
    """Append aggregation rows, each with its own creation time (benchmark histories)."""
    columns = ["run_id", "extension_id", "environment_kind_id", "metric_type", "metric_name",
               "metric_value", "kind_id", "created_at", "updated_at"]  # fmt: skip
    count = 0
    batch: list[tuple[Any, ...]] = []
    for r, created_at in rows:
        batch.append((r.run_id, r.extension_id, r.environment_kind_id, r.metric_type,
                      r.metric_name, r.metric_value, r.kind_id, created_at,
                      created_at))  # fmt: skip
        if len(batch) >= BULK_BATCH:
            await conn.copy_rows("data_quality_aggregations", columns, batch)
            count += len(batch)
            batch.clear()
    await conn.copy_rows("data_quality_aggregations", columns, batch)
    await refresh_planner_statistics(conn, ["data_quality_aggregations"])
    return count + len(batch)


TENANT_COUNT_FIELDS = (
    "users",
    "groups",
    "apps",
    "service_principals",
    "devices",
    "management_groups",
    "subscriptions",
    "resource_groups",
    "vms",
    "key_vaults",
    "relationships",
)


async def tenant_known(conn: Connection, tenant_id: str) -> bool:
    """A tenant is known when it has a tenant node or any stats row, deleted or not."""
    found = await conn.fetchval(
        """SELECT 1 FROM azure_tenant_stats WHERE tenant_id = $1
        UNION ALL
        SELECT 1 FROM nodes WHERE object_id = $1 AND label = 'AZTenant'
        LIMIT 1""",
        tenant_id.upper(),
    )
    return found is not None


async def list_tenant_stats(
    conn: Connection,
    tenant_id: str,
    start: datetime,
    end: datetime,
    sort: Sequence[tuple[str, bool]],
    skip: int,
    limit: int,
) -> tuple[int, list[m.AzureTenantStats]]:
    sql = f"""SELECT id, created_at, updated_at, deleted_at, tenant_id,
            {", ".join(TENANT_COUNT_FIELDS)}, run_id, count(*) OVER ()
        FROM azure_tenant_stats
        WHERE tenant_id = $1 AND created_at >= $2 AND created_at <= $3 AND deleted_at IS NULL
        ORDER BY {order_clause(sort, TIME_SORT_COLUMNS, "id DESC")}"""
    total, rows = await fetch_page(conn, sql, [tenant_id.upper(), start, end], skip, limit)
    return total, [
        m.AzureTenantStats(
            id=r[0],
            created_at=r[1],
            updated_at=r[2],
            deleted_at=m.null_time(r[3]),
            tenantid=r[4],
            run_id=r[16],
            **dict(zip(TENANT_COUNT_FIELDS, r[5:16], strict=True)),
        )
        for r in rows
    ]


async def insert_tenant_stats(
    conn: Connection, tenant_id: str, counts: dict[str, int], run_id: str, created_at: datetime
) -> None:
    columns = ", ".join(TENANT_COUNT_FIELDS)
    values = ", ".join(f"${i}" for i in range(4, 4 + len(TENANT_COUNT_FIELDS)))
    await conn.execute(
        f"""INSERT INTO azure_tenant_stats (tenant_id, run_id, created_at, updated_at, {columns})
        VALUES ($1, $2, $3, $3, {values})""",
        tenant_id.upper(),
        run_id,
        created_at,
        *(counts[f] for f in TENANT_COUNT_FIELDS),
    )


# --- schema extensions and kinds --------------------------------------------------------


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
class Extension:
    id: int
    name: str
    display_name: str
    version: str
    is_builtin: bool
    environments: list[tuple[int, str, str | None]]  # (environment kind id, kind, source kind)


async def list_extensions(conn: Connection) -> list[Extension]:
    rows = await conn.fetch(
        """SELECT x.id, x.name, x.display_name, x.version, x.is_builtin, e.environment_kind_id,
            ek.name, sk.name
        FROM schema_extensions x
        LEFT JOIN schema_environments e ON e.extension_id = x.id AND e.deleted_at IS NULL
        LEFT JOIN kinds ek ON ek.id = e.environment_kind_id
        LEFT JOIN kinds sk ON sk.id = e.source_kind_id
        WHERE x.deleted_at IS NULL ORDER BY x.id, e.environment_kind_id"""
    )
    extensions: dict[int, Extension] = {}
    for r in rows:
        ext = extensions.setdefault(r[0], Extension(r[0], r[1], r[2], r[3], r[4], []))
        if r[5] is not None:
            ext.environments.append((r[5], r[6], r[7]))
    return list(extensions.values())


async def create_extension(
    conn: Connection,
    name: str,
    display_name: str,
    version: str,
    node_kinds: Sequence[str],
    relationship_kinds: Sequence[str],
    environments: Sequence[tuple[str, str | None]],
    now: datetime,
) -> int:
    extension_id: int = await conn.fetchval(
        """INSERT INTO schema_extensions (name, display_name, version, is_builtin, created_at,
            updated_at) VALUES ($1, $2, $3, FALSE, $4, $4) RETURNING id""",
        name,
        display_name,
        version,
        now,
    )
    kind_ids = await ensure_kinds(
        conn, [*node_kinds, *relationship_kinds, *(k for env in environments for k in env if k)]
    )
    await conn.executemany(
        "INSERT INTO schema_extension_kinds (extension_id, kind_id, category) VALUES ($1, $2, $3)",
        [(extension_id, kind_ids[k], "node") for k in dict.fromkeys(node_kinds)]
        + [(extension_id, kind_ids[k], "relationship") for k in dict.fromkeys(relationship_kinds)],
    )
    await conn.executemany(
        """INSERT INTO schema_environments (extension_id, environment_kind_id, source_kind_id,
            created_at, updated_at) VALUES ($1, $2, $3, $4, $4)""",
        [
            (extension_id, kind_ids[env], kind_ids[src] if src else None, now)
            for env, src in environments
        ],
    )
    return extension_id


# --- graph ------------------------------------------------------------------------------

NODE_SORT_COLUMNS = {"name": "n.name", "objectid": "n.object_id", "label": "n.label"}


@dataclass
class DcomTarget:
    computer_id: int
    execute_dcom_kind: int | None  # None until some ingest has produced such an edge
    member_of_kind: int | None


async def find_dcom_target(conn: Connection, object_id: str) -> DcomTarget | None:
    """The computer, with the two edge kinds its DCOM walk follows, in one statement."""
    r = await conn.fetchrow(
        """SELECT id, (SELECT id FROM kinds WHERE name = 'ExecuteDCOM'),
            (SELECT id FROM kinds WHERE name = 'MemberOf')
        FROM nodes WHERE object_id = $1 AND label = 'Computer'""",
        object_id.upper(),
    )
    return None if r is None else DcomTarget(r[0], r[1], r[2])


async def list_dcom_holders(
    conn: Connection, target: DcomTarget, sort: Sequence[tuple[str, bool]], skip: int, limit: int
) -> tuple[int, list[m.NodeListEntry]]:
    """Principals with ExecuteDCOM on the computer, and every member of those, transitively.

    UNION (not UNION ALL) de-duplicates, which also ends the recursion on group cycles. The
    kinds are parameters, not subqueries: with table statistics present, SQLite planned the
    subquery form to read the edge rows themselves and ran fifteen times slower.
    """
    if target.execute_dcom_kind is None:
        return 0, []
    sql = f"""WITH RECURSIVE holders(node_id) AS (
            SELECT e.start_id FROM edges e WHERE e.end_id = $1 AND e.kind_id = $2
          UNION
            SELECT e.start_id FROM edges e JOIN holders h ON e.end_id = h.node_id
            WHERE e.kind_id = $3
        )
        SELECT n.object_id, n.name, n.label, n.kinds, count(*) OVER ()
        FROM holders h JOIN nodes n ON n.id = h.node_id
        ORDER BY {order_clause(sort, NODE_SORT_COLUMNS, "n.id")}"""
    args = [target.computer_id, target.execute_dcom_kind, target.member_of_kind or 0]
    total, rows = await fetch_page(conn, sql, args, skip, limit)
    decode = msgspec.json.Decoder(list[str]).decode
    return total, [m.NodeListEntry(r[0], r[1], r[2], decode(r[3])) for r in rows]


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


async def get_nodes(conn: Connection, object_ids: Iterable[str]) -> dict[str, StoredNode]:
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


async def upsert_nodes(
    conn: Connection, nodes: Sequence[NodeRecord], run_id: str, now: datetime
) -> None:
    """Insert or replace collected nodes (already merged with what was stored)."""
    await conn.executemany(
        """INSERT INTO nodes (object_id, name, label, kinds, properties, environment_id, run_id,
            created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
        ON CONFLICT (object_id) DO UPDATE SET name = excluded.name, label = excluded.label,
            kinds = excluded.kinds, properties = excluded.properties,
            environment_id = excluded.environment_id, run_id = excluded.run_id,
            updated_at = excluded.updated_at""",
        [(n.object_id, n.name, n.kinds[0] if n.kinds else "Entity", json.dumps(n.kinds),
          json.dumps(n.properties), n.environment_id, run_id, now) for n in nodes],
    )  # fmt: skip
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
    edges: Sequence[tuple[int, int, str, dict[str, Any], str | None]],
    run_id: str,
    now: datetime,
) -> None:
    """Insert or update edges (start id, end id, kind, properties, environment id)."""
    kind_ids = await ensure_kinds(conn, (e[2] for e in edges))
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


async def bulk_insert_graph(
    conn: Connection,
    nodes: Iterable[tuple[int, str, str, str]],
    edges: Iterable[tuple[int, int, str]],
    environment_id: str,
    now: datetime,
) -> tuple[int, int]:
    """Append a whole graph to the store, for benchmarks at scale: nodes as (id, object id,
    name, label), edges as (start id, end id, kind), ids counting from 1 within the graph.
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
        node_rows.append((node_id + offset, object_id, name, label, json.dumps([label, "Base"]),
                          json.dumps({"name": name}), environment_id, now, now))  # fmt: skip
        label_id = kind_ids.get(label) or await kind(label)
        kind_rows += [(node_id + offset, label_id), (node_id + offset, base)]
        if len(node_rows) >= BULK_BATCH:
            node_count += await copy_nodes(conn, node_rows, kind_rows)
    node_count += await copy_nodes(conn, node_rows, kind_rows)
    await sync_id_sequence(conn, "nodes")
    edge_rows: list[tuple[Any, ...]] = []
    for start, end, edge_kind in edges:
        kind_id = kind_ids.get(edge_kind) or await kind(edge_kind)
        edge_rows.append((start + offset, end + offset, kind_id, "{}", environment_id, now, now))
        if len(edge_rows) >= BULK_BATCH:
            edge_count += await copy_edges(conn, edge_rows)
    edge_count += await copy_edges(conn, edge_rows)
    await refresh_planner_statistics(conn, GRAPH_TABLES)
    return node_count, edge_count


async def copy_nodes(
    conn: Connection, rows: list[tuple[Any, ...]], kind_rows: list[tuple[int, int]]
) -> int:
    count = len(rows)
    await conn.copy_rows("nodes", ["id", "object_id", "name", "label", "kinds", "properties",
                                   "environment_id", "created_at", "updated_at"], rows)  # fmt: skip
    await conn.copy_rows("node_kinds", ["node_id", "kind_id"], kind_rows)
    rows.clear()
    kind_rows.clear()
    return count


async def copy_edges(conn: Connection, rows: list[tuple[Any, ...]]) -> int:
    count = len(rows)
    await conn.copy_rows("edges", ["start_id", "end_id", "kind_id", "properties",
                                   "environment_id", "created_at", "updated_at"], rows)  # fmt: skip
    rows.clear()
    return count


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
    conn: Connection, run_id: str, files: Sequence[str], nodes: int, edges: int, now: datetime
) -> None:
    await conn.execute(
        """INSERT INTO ingest_runs (id, created_at, files, node_count, edge_count)
        VALUES ($1, $2, $3, $4, $5)""",
        run_id,
        now,
        json.dumps(list(files)),
        nodes,
        edges,
    )


@dataclass
class KindCount:
    metric_type: str  # "node" or "relationship"
    kind_name: str
    kind_id: int
    count: int


async def count_extension_kinds(conn: Connection, extension_id: int) -> list[KindCount]:
    """Nodes per node kind and edges per relationship kind of one extension, zeros left out."""
    rows = await conn.fetch(
        """SELECT 'node', k.name, k.id, count(*) FROM schema_extension_kinds x
            JOIN kinds k ON k.id = x.kind_id JOIN node_kinds nk ON nk.kind_id = k.id
            WHERE x.extension_id = $1 AND x.category = 'node' GROUP BY k.name, k.id
        UNION ALL
        SELECT 'relationship', k.name, k.id, count(*) FROM schema_extension_kinds x
            JOIN kinds k ON k.id = x.kind_id JOIN edges e ON e.kind_id = k.id
            WHERE x.extension_id = $1 AND x.category = 'relationship' GROUP BY k.name, k.id
        ORDER BY 1, 2""",
        extension_id,
    )
    return [KindCount(r[0], r[1], r[2], int(r[3])) for r in rows]


async def fill_edge_environments(conn: Connection, run_id: str) -> None:
    """Edges whose record named no environment take their end node's, else their start's."""
    await conn.execute(
        """UPDATE edges SET environment_id = COALESCE(
            (SELECT n.environment_id FROM nodes n WHERE n.id = edges.end_id),
            (SELECT n.environment_id FROM nodes n WHERE n.id = edges.start_id))
        WHERE run_id = $1 AND environment_id IS NULL""",
        run_id,
    )


@dataclass
class RunCount:
    environment_id: str
    kind_id: int
    kind_name: str
    count: int


async def run_counts(conn: Connection, run_id: str) -> tuple[list[RunCount], list[RunCount]]:
    """Per environment and kind: the nodes a run collected, and the edges it produced."""
    nodes = await conn.fetch(
        """SELECT n.environment_id, k.id, k.name, count(*) FROM nodes n
        JOIN node_kinds nk ON nk.node_id = n.id JOIN kinds k ON k.id = nk.kind_id
        WHERE n.run_id = $1 AND n.environment_id IS NOT NULL
        GROUP BY n.environment_id, k.id, k.name""",
        run_id,
    )
    edges = await conn.fetch(
        """SELECT x.environment_id, k.id, k.name, count(*) FROM edges x
        JOIN kinds k ON k.id = x.kind_id
        WHERE x.run_id = $1 AND x.environment_id IS NOT NULL
        GROUP BY x.environment_id, k.id, k.name""",
        run_id,
    )
    return (
        [RunCount(r[0], r[1], r[2], int(r[3])) for r in nodes],
        [RunCount(r[0], r[1], r[2], int(r[3])) for r in edges],
    )


@dataclass
class EnvironmentInstance:
    environment_id: str  # the object id of the domain, tenant, ... node
    extension_id: int
    environment_kind_id: int
    environment_kind: str


async def environment_instances(
    conn: Connection, environment_ids: Iterable[str]
) -> list[EnvironmentInstance]:
    """The stored nodes among these ids that are of a registered environment kind."""
    rows = await conn.fetch(
        f"""SELECT n.object_id, se.extension_id, se.environment_kind_id, k.name FROM nodes n
        JOIN node_kinds nk ON nk.node_id = n.id
        JOIN schema_environments se ON se.environment_kind_id = nk.kind_id
            AND se.deleted_at IS NULL
        JOIN kinds k ON k.id = se.environment_kind_id
        WHERE {in_list(conn.dialect, "n.object_id", "$1")}
        ORDER BY n.object_id, se.extension_id""",
        list_param(conn.dialect, set(environment_ids)),
    )
    return [EnvironmentInstance(r[0], r[1], r[2], r[3]) for r in rows]


async def extension_kinds(conn: Connection) -> dict[int, dict[int, str]]:
    """Per extension: its kind ids and their category (node or relationship)."""
    kinds: dict[int, dict[int, str]] = {}
    for extension_id, kind_id, category in await conn.fetch(
        "SELECT extension_id, kind_id, category FROM schema_extension_kinds"
    ):
        kinds.setdefault(extension_id, {})[kind_id] = category
    return kinds


async def insert_environment_stats(
    conn: Connection,
    rows: Sequence[tuple[AggregationRow, str]],
    created_at: datetime,
) -> None:
    """Per-instance metrics: (the row, the environment instance's object id)."""
    await conn.executemany(
        """INSERT INTO data_quality_environment_stats (run_id, extension_id,
            environment_kind_id, environment_id, metric_type, metric_name, metric_value,
            kind_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)""",
        [(r.run_id, r.extension_id, r.environment_kind_id, env, r.metric_type, r.metric_name,
          r.metric_value, r.kind_id, created_at) for r, env in rows],
    )  # fmt: skip


async def count_graph(conn: Connection) -> tuple[int, int]:
    row = await conn.fetchrow("SELECT (SELECT count(*) FROM nodes), (SELECT count(*) FROM edges)")
    assert row is not None
    return int(row[0]), int(row[1])


# --- SAML providers ---------------------------------------------------------------------


@dataclass
class SamlProviderRow:
    id: int
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    name: str
    display_name: str
    idp_issuer_uri: str
    idp_sso_uri: str
    principal_attribute_mappings: list[str]
    sso_provider_id: int | None


async def get_saml_provider(conn: Connection, provider_id: int) -> SamlProviderRow | None:
    r = await conn.fetchrow(
        """SELECT id, created_at, updated_at, deleted_at, name, display_name, idp_issuer_uri,
            idp_sso_uri, principal_attribute_mappings, sso_provider_id
        FROM saml_providers WHERE id = $1 AND deleted_at IS NULL""",
        provider_id,
    )
    if r is None:
        return None
    return SamlProviderRow(
        id=r[0],
        created_at=r[1],
        updated_at=r[2],
        deleted_at=r[3],
        name=r[4],
        display_name=r[5],
        idp_issuer_uri=r[6],
        idp_sso_uri=r[7],
        principal_attribute_mappings=json.loads(r[8]),
        sso_provider_id=r[9],
    )


async def insert_saml_provider(
    conn: Connection,
    name: str,
    display_name: str,
    idp_issuer_uri: str,
    idp_sso_uri: str,
    mappings: Sequence[str],
    now: datetime,
) -> int:
    provider_id: int = await conn.fetchval(
        """INSERT INTO saml_providers (name, display_name, idp_issuer_uri, idp_sso_uri,
            principal_attribute_mappings, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING id""",
        name,
        display_name,
        idp_issuer_uri,
        idp_sso_uri,
        json.dumps(list(mappings)),
        now,
    )
    return provider_id


async def saml_provider_name_taken(conn: Connection, name: str) -> bool:
    return await conn.fetchval("SELECT 1 FROM saml_providers WHERE name = $1", name) is not None


# --- clients ----------------------------------------------------------------------------

COLLECTION_FLAGS = (
    "session_collection",
    "local_group_collection",
    "ad_structure_collection",
    "cert_services_collection",
    "ca_registry_collection",
    "dc_registry_collection",
    "all_trusted_domains",
)
FLAG_COLUMNS = ", ".join(COLLECTION_FLAGS)


def collection_flags(values: Sequence[bool]) -> dict[str, bool]:
    return dict(zip(COLLECTION_FLAGS, values, strict=True))


ou_refs = msgspec.json.Decoder(list[m.OUReference])
domain_refs = msgspec.json.Decoder(list[m.DomainReference])


async def get_client(conn: Connection, client_id: str) -> m.Client | None:
    r = await conn.fetchrow(
        """SELECT id, name, ip_address, hostname, configured_user, last_checkin, current_job_id,
            current_task_id, completed_job_count, completed_task_count, domain_controller,
            version, user_sid
        FROM clients WHERE id = $1 AND deleted_at IS NULL""",
        client_id,
    )
    if r is None:
        return None
    events = [
        m.ClientEvent(
            id=e[0],
            client_id=e[1],
            rrule=e[2],
            ous=ou_refs.decode(e[10]),
            domains=domain_refs.decode(e[11]),
            **collection_flags(e[3:10]),
        )
        for e in await conn.fetch(
            f"""SELECT id, client_id, rrule, {FLAG_COLUMNS}, ous, domains FROM client_events
            WHERE client_id = $1 AND deleted_at IS NULL ORDER BY id""",
            client_id,
        )
    ]
    token = await get_client_token(conn, client_id)
    current_job = await get_job(conn, r[6], r[1]) if r[6] is not None else None
    current_task = await get_job(conn, r[7], r[1]) if r[7] is not None else None
    return m.Client(
        id=r[0],
        name=r[1],
        ip_address=r[2],
        hostname=r[3],
        configured_user=r[4],
        last_checkin=r[5] or m.ZERO_TIME,
        events=events,
        token=token or m.zero_token(),
        current_job_id=m.null_int64(r[6]),
        current_task_id=m.null_int64(r[7]),
        current_job=current_job or m.zero_job(),
        current_task=current_task or m.zero_job(),
        completed_job_count=r[8],
        completed_task_count=r[9],
        domain_controller=m.null_string(r[10]),
        version=r[11],
        user_sid=m.null_string(r[12]),
    )


MASKED_KEY = "********"


async def get_client_token(conn: Connection, client_id: str) -> m.ClientToken | None:
    """The client's newest live token; its key is never read back, only masked."""
    r = await conn.fetchrow(
        """SELECT id, created_at, updated_at, deleted_at, user_id, name, hmac_method,
            last_access, created_by
        FROM auth_tokens WHERE client_id = $1 AND deleted_at IS NULL
        ORDER BY created_at DESC, id LIMIT 1""",
        client_id,
    )
    if r is None:
        return None
    return m.ClientToken(
        r[0],
        r[1],
        r[2],
        m.null_time(r[3]),
        m.null_uuid(r[4]),
        m.null_string(r[5]),
        MASKED_KEY,
        r[6],
        r[7],
        m.null_uuid(r[8]),
    )


async def get_job(conn: Connection, job_id: int, client_name: str) -> m.Job | None:
    r = await conn.fetchrow(
        f"""SELECT id, client_id, event_id, execution_time, start_time, end_time,
            status_message, {FLAG_COLUMNS}, domain_controller, ous, domains
        FROM jobs WHERE id = $1""",
        job_id,
    )
    if r is None:
        return None
    results = [
        m.DomainResult(
            id=d[0],
            created_at=d[1],
            updated_at=d[2],
            deleted_at=m.null_time(d[3]),
            job_id=d[4],
            domain_name=d[5],
            success=d[6],
            message=d[7],
            **dict(zip(DOMAIN_RESULT_COUNTS, d[8:20], strict=True)),
        )
        for d in await conn.fetch(
            """SELECT id, created_at, updated_at, deleted_at, job_id, domain_name, success,
                message, user_count, group_count, computer_count, gpo_count, ou_count,
                container_count, aiaca_count, rootca_count, enterpriseca_count,
                ntauthstore_count, certtemplate_count, deleted_count
            FROM domain_collection_results WHERE job_id = $1 AND deleted_at IS NULL
            ORDER BY id""",
            job_id,
        )
    ]
    return m.Job(
        id=r[0],
        client_id=r[1],
        client_name=client_name,
        event_id=m.null_int32(r[2]),
        execution_time=r[3],
        start_time=r[4] or m.ZERO_TIME,
        end_time=r[5] or m.ZERO_TIME,
        status_message=r[6],
        domain_controller=r[14],
        ous=ou_refs.decode(r[15]),
        domains=domain_refs.decode(r[16]),
        domain_results=results,
        **collection_flags(r[7:14]),
    )


async def client_name_taken(conn: Connection, name: str) -> bool:
    return await conn.fetchval("SELECT 1 FROM clients WHERE name = $1", name) is not None


async def insert_client(
    conn: Connection,
    client_id: str,
    name: str,
    ip_address: str,
    hostname: str,
    now: datetime,
    configured_user: str = "",
    version: str = "",
    domain_controller: str | None = None,
    user_sid: str | None = None,
    last_checkin: datetime | None = None,
) -> None:
    await conn.execute(
        """INSERT INTO clients (id, name, ip_address, hostname, configured_user, last_checkin,
            completed_job_count, completed_task_count, domain_controller, version, user_sid,
            created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, 0, 0, $7, $8, $9, $10, $10)""",
        client_id,
        name,
        ip_address,
        hostname,
        configured_user,
        last_checkin,
        domain_controller,
        version,
        user_sid,
        now,
    )


@dataclass
class CollectionPlan:
    """What a scheduled event or a job collects."""

    flags: dict[str, bool]
    ous: list[m.OUReference]
    domains: list[m.DomainReference]

    def flag_values(self) -> list[bool]:
        return [self.flags.get(f, False) for f in COLLECTION_FLAGS]


async def insert_client_event(
    conn: Connection, client_id: str, rrule: str, plan: CollectionPlan, now: datetime
) -> int:
    marks = ", ".join(f"${i}" for i in range(3, 3 + len(COLLECTION_FLAGS)))
    n = 3 + len(COLLECTION_FLAGS)
    event_id: int = await conn.fetchval(
        f"""INSERT INTO client_events (client_id, rrule, {FLAG_COLUMNS}, ous, domains,
            created_at, updated_at) VALUES ($1, $2, {marks}, ${n}, ${n + 1}, ${n + 2}, ${n + 2})
        RETURNING id""",
        client_id,
        rrule,
        *plan.flag_values(),
        msgspec.json.encode(plan.ous).decode(),
        msgspec.json.encode(plan.domains).decode(),
        now,
    )
    return event_id


@dataclass
class JobRow:
    client_id: str
    event_id: int | None
    execution_time: datetime
    start_time: datetime | None
    end_time: datetime | None
    status: int
    status_message: str
    domain_controller: str
    plan: CollectionPlan


async def insert_job(conn: Connection, job: JobRow, now: datetime) -> int:
    first_flag = 8
    marks = ", ".join(f"${i}" for i in range(first_flag, first_flag + len(COLLECTION_FLAGS)))
    n = first_flag + len(COLLECTION_FLAGS)
    job_id: int = await conn.fetchval(
        f"""INSERT INTO jobs (client_id, event_id, execution_time, start_time, end_time, status,
            status_message, {FLAG_COLUMNS}, domain_controller, ous, domains, created_at,
            updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, {marks}, ${n}, ${n + 1}, ${n + 2}, ${n + 3},
            ${n + 3})
        RETURNING id""",
        job.client_id,
        job.event_id,
        job.execution_time,
        job.start_time,
        job.end_time,
        job.status,
        job.status_message,
        *job.plan.flag_values(),
        job.domain_controller,
        msgspec.json.encode(job.plan.ous).decode(),
        msgspec.json.encode(job.plan.domains).decode(),
        now,
    )
    return job_id


DOMAIN_RESULT_COUNTS = (
    "user_count",
    "group_count",
    "computer_count",
    "gpo_count",
    "ou_count",
    "container_count",
    "aiaca_count",
    "rootca_count",
    "enterpriseca_count",
    "ntauthstore_count",
    "certtemplate_count",
    "deleted_count",
)


async def insert_domain_result(
    conn: Connection,
    job_id: int,
    domain_name: str,
    success: bool,
    message: str,
    counts: dict[str, int],
    now: datetime,
) -> None:
    marks = ", ".join(f"${i}" for i in range(5, 5 + len(DOMAIN_RESULT_COUNTS)))
    n = 5 + len(DOMAIN_RESULT_COUNTS)
    await conn.execute(
        f"""INSERT INTO domain_collection_results (job_id, domain_name, success, message,
            {", ".join(DOMAIN_RESULT_COUNTS)}, created_at, updated_at)
        VALUES ($1, $2, $3, $4, {marks}, ${n}, ${n})""",
        job_id,
        domain_name,
        success,
        message,
        *(counts.get(c, 0) for c in DOMAIN_RESULT_COUNTS),
        now,
    )


async def set_client_work(
    conn: Connection,
    client_id: str,
    current_job_id: int | None,
    current_task_id: int | None,
    completed_jobs: int,
    completed_tasks: int,
) -> None:
    await conn.execute(
        """UPDATE clients SET current_job_id = $2, current_task_id = $3,
            completed_job_count = $4, completed_task_count = $5 WHERE id = $1""",
        client_id,
        current_job_id,
        current_task_id,
        completed_jobs,
        completed_tasks,
    )


# --- users, tokens, sessions ------------------------------------------------------------


async def role_permissions(conn: Connection) -> dict[int, frozenset[str]]:
    rows = await conn.fetch(
        """SELECT rp.role_id, p.authority, p.name FROM roles_permissions rp
        JOIN permissions p ON p.id = rp.permission_id"""
    )
    grouped: dict[int, set[str]] = {}
    for role_id, authority, name in rows:
        grouped.setdefault(role_id, set()).add(f"{authority}/{name}")
    return {role: frozenset(perms) for role, perms in grouped.items()}


async def find_role_id(conn: Connection, role_name: str) -> int | None:
    found = await conn.fetchval("SELECT id FROM roles WHERE lower(name) = lower($1)", role_name)
    return None if found is None else int(found)


async def list_role_names(conn: Connection) -> list[str]:
    return [r[0] for r in await conn.fetch("SELECT name FROM roles ORDER BY id")]


@dataclass
class Principal:
    """The user a request acts for."""

    user_id: str
    role_id: int
    disabled: bool


@dataclass
class UserLogin:
    id: str
    secret_digest: str | None
    principal: Principal


async def find_user_login(conn: Connection, name: str) -> UserLogin | None:
    r = await conn.fetchrow(
        """SELECT id, secret_digest, role_id, is_disabled FROM users
        WHERE name = $1 AND deleted_at IS NULL""",
        name,
    )
    return None if r is None else UserLogin(r[0], r[1], Principal(r[0], r[2], r[3]))


async def find_user_id(conn: Connection, name: str) -> str | None:
    found = await conn.fetchval("SELECT id FROM users WHERE name = $1 AND deleted_at IS NULL", name)
    return None if found is None else str(found)


async def insert_user(
    conn: Connection,
    user_id: str,
    name: str,
    role_id: int,
    secret_digest: str | None,
    disabled: bool,
    now: datetime,
) -> None:
    await conn.execute(
        """INSERT INTO users (id, name, role_id, secret_digest, is_disabled, created_at,
            updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)""",
        user_id,
        name,
        role_id,
        secret_digest,
        disabled,
        now,
    )


@dataclass
class TokenCredentials:
    key_ciphertext: str
    principal: Principal | None  # None for a token that belongs to a collection client


async def find_token_credentials(conn: Connection, token_id: str) -> TokenCredentials | None:
    r = await conn.fetchrow(
        """SELECT t.key_ciphertext, u.id, u.role_id, u.is_disabled
        FROM auth_tokens t LEFT JOIN users u ON u.id = t.user_id AND u.deleted_at IS NULL
        WHERE t.id = $1 AND t.deleted_at IS NULL
          AND (t.user_id IS NULL OR u.id IS NOT NULL)""",
        token_id,
    )
    if r is None:
        return None
    return TokenCredentials(r[0], None if r[1] is None else Principal(r[1], r[2], r[3]))


async def insert_token(
    conn: Connection,
    token_id: str,
    key_ciphertext: str,
    hmac_method: str,
    now: datetime,
    user_id: str | None = None,
    client_id: str | None = None,
    name: str | None = None,
    created_by: str | None = None,
) -> None:
    await conn.execute(
        """INSERT INTO auth_tokens (id, user_id, client_id, name, key_ciphertext, hmac_method,
            last_access, created_by, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $7, $7)""",
        token_id,
        user_id,
        client_id,
        name,
        key_ciphertext,
        hmac_method,
        now,
        created_by,
    )


async def touch_token(conn: Connection, token_id: str, now: datetime) -> None:
    await conn.execute("UPDATE auth_tokens SET last_access = $2 WHERE id = $1", token_id, now)


async def insert_session(
    conn: Connection, session_id: str, user_id: str, now: datetime, expires_at: datetime
) -> None:
    await conn.execute(
        """INSERT INTO user_sessions (id, user_id, created_at, expires_at)
        VALUES ($1, $2, $3, $4)""",
        session_id,
        user_id,
        now,
        expires_at,
    )


async def find_session_principal(
    conn: Connection, session_id: str, user_id: str, now: datetime
) -> Principal | None:
    r = await conn.fetchrow(
        """SELECT u.id, u.role_id, u.is_disabled FROM user_sessions s
        JOIN users u ON u.id = s.user_id AND u.deleted_at IS NULL
        WHERE s.id = $1 AND s.user_id = $2 AND s.expires_at > $3""",
        session_id,
        user_id,
        now,
    )
    return None if r is None else Principal(r[0], r[1], r[2])


async def delete_session(conn: Connection, session_id: str) -> None:
    await conn.execute("DELETE FROM user_sessions WHERE id = $1", session_id)


async def store_is_empty(conn: Connection) -> bool:
    """No graph, users, clients or SAML providers yet (migration seed rows do not count)."""
    found = await conn.fetchval(
        """SELECT 1 FROM nodes UNION ALL SELECT 1 FROM users UNION ALL SELECT 1 FROM clients
        UNION ALL SELECT 1 FROM saml_providers LIMIT 1"""
    )
    return found is None


async def ping(conn: Connection) -> None:
    await conn.fetchval("SELECT 1")
