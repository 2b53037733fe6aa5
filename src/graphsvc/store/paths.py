"""What the path index is built from and answers with: the graph's version, every node's
object id and every edge as (start, end, kind) ids, in chunks, and the nodes and edges of an
answer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from graphsvc.store.db import Connection, Row
from graphsvc.store.dialect import in_list, json_property_equals, json_value_param, list_param
from graphsvc.store.paging import chunks_by_id
from graphsvc.store.tags import (
    IN_TAG,
    OWNED_TAG_ID,
    TIER_ZERO_TAG_ID,
    labels_of_names,
    tag_names_of_node,
)

# Rows read per statement while building the path index (bounds the rows held at once).
EDGE_CHUNK = 50_000
NODE_CHUNK = 50_000


@dataclass(frozen=True)
class GraphVersion:
    """Which graph the store holds. Ingest runs write nodes and edges, and each adds one row
    to ingest_runs, so their number moves with every run; the latest run's id (a random
    UUID) tells apart two stores, or one store emptied and filled again, that hold as many
    runs. Kinds are also added by a schema extension, without a run: their number (they are
    never removed) moves with those. A clearing (clear-database) deletes without a run:
    graph_clearings counts those (its rows are never removed either)."""

    runs: int
    latest_run: str
    kinds: int
    clearings: int = 0

    @property
    def name(self) -> str:
        cleared = f"-c{self.clearings}" if self.clearings else ""
        return f"{self.runs}-{self.latest_run or 'empty'}-{self.kinds}{cleared}"


async def read_graph_version(conn: Connection) -> GraphVersion:
    row = await conn.fetchrow(
        """SELECT (SELECT count(*) FROM ingest_runs),
            (SELECT id FROM ingest_runs ORDER BY created_at DESC, id DESC LIMIT 1),
            (SELECT count(*) FROM kinds), (SELECT count(*) FROM graph_clearings)"""
    )
    assert row is not None
    return GraphVersion(
        int(row[0]), "" if row[1] is None else str(row[1]), int(row[2]), int(row[3])
    )


async def count_edges(conn: Connection, kind_ids: Sequence[int] | None = None) -> int:
    """How many edges there are (of these kinds only, if given)."""
    if kind_ids is None:
        return int(await conn.fetchval("SELECT count(*) FROM edges"))
    return int(
        await conn.fetchval(
            f"SELECT count(*) FROM edges WHERE {in_list(conn.dialect, 'kind_id', '$1', 'int')}",
            list_param(conn.dialect, kind_ids),
        )
    )


async def read_edge_chunks(
    conn: Connection, kind_ids: Sequence[int] | None = None
) -> AsyncIterator[list[Row]]:
    """Every edge (of these kinds only, if given) as rows of (id, start id, end id, kind
    id), in chunks of EDGE_CHUNK, by edge id."""
    if kind_ids is None:
        query = "SELECT id, start_id, end_id, kind_id FROM edges WHERE id > $1 ORDER BY id LIMIT $2"
        async for rows in chunks_by_id(conn, query, EDGE_CHUNK):
            yield rows
        return
    query = f"""SELECT id, start_id, end_id, kind_id FROM edges
        WHERE id > $1 AND {in_list(conn.dialect, "kind_id", "$3", "int")} ORDER BY id LIMIT $2"""
    async for rows in chunks_by_id(conn, query, EDGE_CHUNK, list_param(conn.dialect, kind_ids)):
        yield rows


async def read_node_chunks(conn: Connection) -> AsyncIterator[list[Row]]:
    """Every node as rows of (id, object id, whether it is a user, computer or group a
    collection reported, not a stub), in chunks of NODE_CHUNK, by id."""
    query = """SELECT id, object_id,
            run_number IS NOT NULL AND label IN ('User', 'Computer', 'Group')
        FROM nodes WHERE id > $1 ORDER BY id LIMIT $2"""
    async for rows in chunks_by_id(conn, query, NODE_CHUNK):
        yield rows


async def read_tier_zero_ids(conn: Connection, domain_id: str) -> list[int]:
    rows = await conn.fetch(
        "SELECT node_id FROM tag_members WHERE tag_id = $1 AND environment_id = $2",
        TIER_ZERO_TAG_ID,
        domain_id,
    )
    return [r[0] for r in rows]


async def read_enabled_user_ids(conn: Connection, domain_id: str | None) -> list[int]:
    """The domain's collected users whose `enabled` property is true (every domain's, for
    None)."""
    enabled = json_property_equals(conn.dialect, "properties", "$1", "$2")
    args: list[object] = ["enabled", json_value_param(conn.dialect, True)]
    in_domain = ""
    if domain_id is not None:
        args.append(domain_id)
        in_domain = "environment_id = $3 AND"
    rows = await conn.fetch(
        f"""SELECT id FROM nodes WHERE {in_domain} label = 'User'
            AND run_number IS NOT NULL AND {enabled}""",
        *args,
    )
    return [r[0] for r in rows]


async def read_kinds(conn: Connection) -> dict[str, int]:
    """Every kind the graph knows, by name."""
    return {r[1]: r[0] for r in await conn.fetch("SELECT id, name FROM kinds")}


@dataclass
class PathNode:
    node_id: int
    object_id: str
    name: str
    label: str
    kinds: str  # JSON text
    updated_at: datetime
    is_tier_zero: bool
    is_owned: bool
    tag_labels: list[str]  # Tag_Tier_Zero...


async def read_path_nodes(conn: Connection, node_ids: Sequence[int]) -> list[PathNode]:
    """The nodes, with their tags: one statement (a path found costs two, this and its
    edges' times)."""
    rows = await conn.fetch(
        f"""SELECT n.id, n.object_id, n.name, n.label, n.kinds, n.updated_at,
            {IN_TAG.format(tag=TIER_ZERO_TAG_ID)}, {IN_TAG.format(tag=OWNED_TAG_ID)},
            {tag_names_of_node(conn.dialect)}
        FROM nodes n WHERE {in_list(conn.dialect, "n.id", "$1", "bigint")} ORDER BY n.id""",
        list_param(conn.dialect, node_ids),
    )
    return [
        PathNode(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), bool(r[7]), labels_of_names(r[8]))
        for r in rows
    ]


async def read_edge_times(
    conn: Connection, node_ids: Sequence[int]
) -> dict[tuple[int, int, int], datetime]:
    """(start, end, kind) -> updated_at of the edges between these nodes."""
    ids = list_param(conn.dialect, node_ids)
    rows = await conn.fetch(
        f"""SELECT start_id, end_id, kind_id, updated_at FROM edges
        WHERE {in_list(conn.dialect, "start_id", "$1", "bigint")}
            AND {in_list(conn.dialect, "end_id", "$1", "bigint")}""",
        ids,
    )
    return {(r[0], r[1], r[2]): r[3] for r in rows}
