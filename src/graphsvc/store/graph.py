"""Writing the graph: kinds, nodes and edges as ingest stores them, and the records of ingest
runs."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from graphsvc.store.db import Connection, Row
from graphsvc.store.dialect import (
    encode_json,
    execute_counted,
    in_list,
    json_property_equals,
    json_value_param,
    list_param,
    next_number,
    refresh_planner_statistics,
    rows_source,
    time_values,
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
    seen: datetime  # when the newest collection of it was made (its lastseen)
    run_number: int | None  # the last run that collected it; None: a stub, only referenced


NODE_COLUMNS = "id, object_id, name, kinds, properties, environment_id, updated_at, run_number"


def stored_node(r: Row) -> StoredNode:
    return StoredNode(r[0], r[1], r[2], json.loads(r[3]), json.loads(r[4]), r[5], r[6], r[7])


async def find_nodes(conn: Connection, object_ids: Iterable[str]) -> dict[str, StoredNode]:
    rows = await conn.fetch(
        f"SELECT {NODE_COLUMNS} FROM nodes WHERE {in_list(conn.dialect, 'object_id', '$1')}",
        list_param(conn.dialect, set(object_ids)),
    )
    return {r[1]: stored_node(r) for r in rows}


async def any_collected(conn: Connection) -> bool:
    """Whether any node was collected (by a run: a stub, only referenced, has no number)."""
    return bool(
        await conn.fetchval("SELECT EXISTS (SELECT 1 FROM nodes WHERE run_number IS NOT NULL)")
    )


async def node_ids(conn: Connection, object_ids: Iterable[str]) -> dict[str, int]:
    rows = await conn.fetch(
        f"SELECT id, object_id FROM nodes WHERE {in_list(conn.dialect, 'object_id', '$1')}",
        list_param(conn.dialect, set(object_ids)),
    )
    return {object_id: node_id for node_id, object_id in rows}


async def find_nodes_by_name(conn: Connection, name: str, most: int = 2) -> list[StoredNode]:
    """Up to `most` nodes of this name (any case), by object id."""
    rows = await conn.fetch(
        f"SELECT {NODE_COLUMNS} FROM nodes WHERE upper(name) = $1 ORDER BY object_id LIMIT $2",
        name.upper(),
        most,
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
    seen: datetime | None


# An edge to write: start id, end id, kind, properties, environment id, the id of the node
# whose record stated it and the group of facts it belongs to (both None for a fact that
# accumulates: ingest/records.EdgeRecord), when its collection was made. A plain tuple: the
# writer makes millions.
EdgeRow = tuple[int, int, str, dict[str, Any], str | None, int | None, str | None, datetime]


class UnstorableText(Exception):
    """Properties holding a NUL character, which PostgreSQL cannot store (found in their
    JSON, already made: no walk of every value)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}: a property holds a NUL character")


def storable(what: str, encoded: str) -> str:
    if "\\u0000" in encoded:
        raise UnstorableText(what)
    return encoded


async def upsert_nodes(
    conn: Connection,
    nodes: Sequence[CollectedNode],
    run_number: int,
    now: datetime,
    kinds_only_grow: bool = False,
) -> dict[str, int]:
    """Insert or replace collected nodes (already merged with what was stored), stamped with
    the time their collection was made (`now` if they do not say); their ids by object id.
    With `kinds_only_grow` (each node's kinds include its stored ones, as the ingest writer
    merges them), no kind row is deleted: deleting them all was 2.4 s of a 1 GB ingest."""
    time_value = time_values(conn.dialect)
    rows, params = rows_source(
        conn.dialect,
        ("text", "text", "text", "text", "text", "text", "timestamptz"),
        [
            (
                n.object_id,
                n.name,
                n.kinds[0] if n.kinds else "Entity",
                encode_json(n.kinds),
                storable(n.object_id, encode_json(n.properties)),
                n.environment_id,
                time_value(n.seen or now),
            )
            for n in nodes
        ],
        2,
    )
    # WHERE true: SQLite would read ON CONFLICT as part of the SELECT's join otherwise.
    # RETURNING spares a statement reading the ids back: 1,331 fewer, 0.8 s of a 1 GB ingest.
    written = await conn.fetch(
        f"""INSERT INTO nodes (object_id, name, label, kinds, properties, environment_id,
            run_number, created_at, updated_at) SELECT c1, c2, c3, c4, c5, c6, $1, c7, c7
            FROM {rows} WHERE true
        ON CONFLICT (object_id) DO UPDATE SET name = excluded.name, label = excluded.label,
            kinds = excluded.kinds, properties = excluded.properties,
            environment_id = excluded.environment_id, run_number = excluded.run_number,
            updated_at = excluded.updated_at
        RETURNING id, object_id""",
        run_number,
        *params,
    )
    ids = {object_id: int(node_id) for node_id, object_id in written}
    kind_ids = await ensure_kinds(conn, (k for n in nodes for k in n.kinds))
    if not kinds_only_grow:
        await conn.execute(
            f"DELETE FROM node_kinds WHERE {in_list(conn.dialect, 'node_id', '$1', 'bigint')}",
            list_param(conn.dialect, [ids[n.object_id] for n in nodes]),
        )
    await insert_node_kinds(conn, [(ids[n.object_id], kind_ids[k]) for n in nodes for k in n.kinds])
    return ids


async def insert_node_kinds(conn: Connection, pairs: Sequence[tuple[int, int]]) -> None:
    rows, params = rows_source(conn.dialect, ("bigint", "int"), pairs, 1)
    await conn.execute(
        f"""INSERT INTO node_kinds (node_id, kind_id) SELECT c1, c2 FROM {rows} WHERE true
        ON CONFLICT DO NOTHING""",
        *params,
    )


async def ensure_nodes(
    conn: Connection, wanted: dict[str, str], now: datetime, names: dict[str, str] | None = None
) -> dict[str, int]:
    """Ids of the given object ids, adding a stub node (of the given kind, named by `names`
    or by its id) for each missing one.

    Stubs carry no run: they were referenced, not collected, so run statistics skip them.
    """
    ids = await node_ids(conn, wanted)
    missing = [(oid, kind) for oid, kind in wanted.items() if oid not in ids]
    if missing:
        names = names or {}
        rows, params = rows_source(
            conn.dialect,
            ("text", "text", "text", "text"),
            [(oid, names.get(oid, oid), kind, encode_json([kind])) for oid, kind in missing],
            2,
        )
        written = await conn.fetch(
            f"""INSERT INTO nodes (object_id, name, label, kinds, properties, created_at,
                updated_at) SELECT c1, c2, c3, c4, '{{}}', $1, $1 FROM {rows}
                RETURNING id, object_id""",
            now,
            *params,
        )
        added = {object_id: int(node_id) for node_id, object_id in written}
        kind_ids = await ensure_kinds(conn, (kind for _, kind in missing))
        await insert_node_kinds(conn, [(added[oid], kind_ids[kind]) for oid, kind in missing])
        ids.update(added)
    return ids


async def upsert_edges(conn: Connection, edges: Sequence[EdgeRow], run_number: int) -> None:
    """Insert or update edges (one row per start, kind and end); their kinds are created as
    needed. An edge's time is the newest collection's that stated it: a session's lastseen
    does not go back when an older collection is loaded after a newer one."""
    kind_ids = await ensure_kinds(conn, (e[2] for e in edges))
    # Most edges share a handful of property dicts (an ACE's are one of two) or have none:
    # each encoded once.
    encoded: dict[int, str] = {}
    time_value = time_values(conn.dialect)
    values = []
    for start, end, kind, properties, environment, owner, fact, seen in edges:
        text = encoded.get(id(properties)) if properties else "{}"
        if text is None:
            text = encoded[id(properties)] = storable("a relationship", encode_json(properties))
        values.append(
            (start, end, kind_ids[kind], text, environment, owner, fact, time_value(seen))
        )
    rows, params = rows_source(
        conn.dialect,
        ("bigint", "bigint", "int", "text", "text", "bigint", "text", "timestamptz"),
        values,
        2,
    )
    await conn.execute(
        f"""INSERT INTO edges (start_id, end_id, kind_id, properties, environment_id,
            fact_owner, fact, run_number, updated_at)
            SELECT c1, c2, c3, c4, c5, c6, c7, $1, c8 FROM {rows} WHERE true
        ON CONFLICT (end_id, kind_id, start_id) DO UPDATE SET
            properties = excluded.properties, environment_id = excluded.environment_id,
            fact_owner = excluded.fact_owner, fact = excluded.fact,
            run_number = excluded.run_number,
            updated_at = CASE WHEN excluded.updated_at > edges.updated_at
                THEN excluded.updated_at ELSE edges.updated_at END""",
        run_number,
        *params,
    )


async def insert_stated_facts(
    conn: Connection, run_number: int, stated: Sequence[tuple[int, str, datetime]]
) -> None:
    """The groups of facts a run's records stated (node id, fact, when collected) for nodes
    collected before: `delete_stale_facts` reads them."""
    time_value = time_values(conn.dialect)
    values = [(node_id, fact, time_value(seen)) for node_id, fact, seen in stated]
    rows, params = rows_source(conn.dialect, ("bigint", "text", "timestamptz"), values, 2)
    await conn.execute(
        f"""INSERT INTO stated_facts (run_number, node_id, fact, seen)
        SELECT $1, c1, c2, c3 FROM {rows} WHERE true
        ON CONFLICT (run_number, node_id, fact) DO UPDATE SET seen = excluded.seen""",
        run_number,
        *params,
    )


async def delete_stale_facts(conn: Connection, run_number: int) -> int:
    """Delete what an older collection stated in a group of facts that this run's records
    stated again for the same object, without it; how many relationships went. (The run's
    own relationships carry its number: those stay.)"""
    deleted = await execute_counted(
        conn,
        """DELETE FROM edges WHERE fact IS NOT NULL AND run_number <> $1
        AND EXISTS (SELECT 1 FROM stated_facts s WHERE s.run_number = $1
            AND s.node_id = edges.fact_owner AND s.fact = edges.fact
            AND s.seen >= edges.updated_at)""",
        run_number,
    )
    await conn.execute("DELETE FROM stated_facts WHERE run_number = $1", run_number)
    return deleted


# The reference's ACL relationship kinds: what a `controllers` list follows and an AD
# domain's `acls` statistic counts.
ACL_KINDS = (
    "AllExtendedRights",
    "ForceChangePassword",
    "AddMember",
    "AddAllowedToAct",
    "GenericAll",
    "WriteDacl",
    "WriteOwner",
    "GenericWrite",
    "ReadLAPSPassword",
    "ReadGMSAPassword",
    "Owns",
    "AddSelf",
    "WriteSPN",
    "AddKeyCredentialLink",
    "GetChanges",
    "GetChangesAll",
    "GetChangesInFilteredSet",
    "WriteAccountRestrictions",
    "WriteGPLink",
    "SyncLAPSPassword",
    "DCSync",
    "ManageCertificates",
    "ManageCA",
    "Enroll",
    "WritePKIEnrollmentFlag",
    "WritePKINameFlag",
    "WriteOwnerLimitedRights",
    "OwnsLimitedRights",
)
GRAPH_TABLES = ("nodes", "node_kinds", "edges")
# A run that adds this many nodes and edges refreshes the planner's statistics.
LARGE_RUN_ROWS = 10_000


async def refresh_statistics_after(conn: Connection, rows_added: int) -> None:
    if rows_added >= LARGE_RUN_ROWS:
        await refresh_planner_statistics(conn, GRAPH_TABLES)


async def delete_nodes(conn: Connection, object_ids: Sequence[str]) -> None:
    """Remove nodes by object id (collectors report deleted objects), as `delete_node_ids`."""
    found = await conn.fetch(
        f"SELECT id FROM nodes WHERE {in_list(conn.dialect, 'object_id', '$1')}",
        list_param(conn.dialect, object_ids),
    )
    await delete_node_ids(conn, [int(row[0]) for row in found])


async def delete_node_ids(conn: Connection, node_ids: Sequence[int]) -> None:
    """Remove nodes, their edges (edges have no foreign keys to cascade: migration 0009) and
    their tags' selections and memberships (nor have those; their kinds cascade)."""
    if not node_ids:
        return
    ids = list_param(conn.dialect, node_ids)
    # One statement per side, so that each reads its own index.
    for table, column in (
        ("edges", "start_id"),
        ("edges", "end_id"),
        ("tag_members", "node_id"),
        ("asset_group_tag_selector_nodes", "node_id"),
        ("nodes", "id"),
    ):
        await conn.execute(
            f"DELETE FROM {table} WHERE {in_list(conn.dialect, column, '$1', 'bigint')}", ids
        )


async def next_run_number(conn: Connection) -> int:
    """The number a new run's nodes and edges are written with (migration 0017)."""
    return await next_number(conn, "ingest_run_number", "ingest_runs", "number")


@contextlib.asynccontextmanager
async def page_cache(conn: Connection, mebibytes: int) -> AsyncIterator[None]:
    """SQLite's page cache of the connection at `mebibytes` for a run's writes, then back as
    it was, its pages freed (the process keeps the memory for reuse); PostgreSQL's cache is
    its server's.

    An ingest writes each relationship into indexes in its ends' order, all over them: with
    SQLite's own 2 MiB, most pages were written out and read back many times over. The 1 GB
    collection (bench/ingest_large.py), alternated: 130.4 and 120.6 s in 569 MB at its peak
    with 128 MiB, 133.2 and 133.0 s in 415 MB with 2 MiB; timed step by step, the nodes'
    inserts took 19.4 s with 2 MiB and 13.9 s with 128 (bench/ingest_phases.py)."""
    if conn.dialect != "sqlite" or mebibytes == 0:
        yield
        return
    before = int(await conn.fetchval("PRAGMA cache_size"))
    await conn.execute(f"PRAGMA cache_size = {-mebibytes * 1024}")
    try:
        yield
    finally:
        await conn.execute(f"PRAGMA cache_size = {before}")
        await conn.execute("PRAGMA shrink_memory")


# A relationships' condition naming every kind, before the flag and the run, so that SQLite
# seeks the index by kind, flag, run and environment (migration 0026) one kind at a time:
# without it, a condition on the flag or the run read every relationship (the 1 GB
# collection's six million, 0.3 to 1 s a statement). Every relationship's kind is a row of
# `kinds`, which nothing deletes.
EACH_KIND = "kind_id IN (SELECT id FROM kinds)"


async def count_run(conn: Connection, run_number: int) -> tuple[int, int]:
    """Nodes and edges one run collected (not the derived ones: an analysis keeps those it
    finds stored, with the run that first derived them)."""
    row = await conn.fetchrow(
        f"""SELECT (SELECT count(*) FROM nodes WHERE run_number = $1),
            (SELECT count(*) FROM edges WHERE {EACH_KIND} AND derived = false
                AND run_number = $1)""",
        run_number,
    )
    assert row is not None
    return int(row[0]), int(row[1])


async def insert_ingest_run(
    conn: Connection,
    run_id: str,
    run_number: int,
    files: Sequence[str],
    nodes: int,
    edges: int,
    now: datetime,
    duration_seconds: float,
) -> None:
    await conn.execute(
        """INSERT INTO ingest_runs (id, number, created_at, files, node_count, edge_count,
            duration_seconds) VALUES ($1, $2, $3, $4, $5, $6, $7)""",
        run_id,
        run_number,
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
