"""What Cypher queries read beyond the path index (cypher/graph.py): every node's labels, a
property of every node (the columns queries filter and return on), the nodes an answer
shows, and the properties of relationships."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime

from graphsvc.store.db import Connection, Row
from graphsvc.store.dialect import in_list, json_member, list_param
from graphsvc.store.paging import chunks_by_id

# Rows read per statement while the node table is built (bounds the rows held at once).
NODE_CHUNK = 20_000
EDGE_CHUNK = 50_000


async def read_node_chunks(conn: Connection) -> AsyncIterator[list[Row]]:
    """Every node as rows of (id, kinds as JSON text, updated_at), in chunks, by id."""
    query = "SELECT id, kinds, updated_at FROM nodes WHERE id > $1 ORDER BY id LIMIT $2"
    async for rows in chunks_by_id(conn, query, NODE_CHUNK):
        yield rows


# What each of the table's columns holds (`read_node_column`): the name is the store's column
# for these, a property of `properties` (as JSON text) for any other.
NODE_COLUMNS = {"objectid": "object_id", "name": "name", "\x00properties": "properties"}


async def read_node_column(conn: Connection, key: str) -> AsyncIterator[list[Row]]:
    """Every node's `key` as rows of (id, value), in chunks, by id: the object id or the name
    as text, the whole properties as JSON text (key "\x00properties"), or a property as JSON
    text (None where absent)."""
    column = NODE_COLUMNS.get(key)
    selected = column if column is not None else json_member(conn.dialect, "properties", "$3")
    extra = () if column is not None else (key,)
    query = f"SELECT id, {selected} FROM nodes WHERE id > $1 ORDER BY id LIMIT $2"
    async for rows in chunks_by_id(conn, query, NODE_CHUNK, *extra):
        yield rows


async def read_nodes(conn: Connection, node_ids: Sequence[int]) -> dict[int, Row]:
    """id -> (object id, name, properties as JSON text, updated_at) of these nodes: what an
    answer shows of each node it holds."""
    rows = await conn.fetch(
        f"""SELECT id, object_id, name, properties, updated_at FROM nodes
        WHERE {in_list(conn.dialect, "id", "$1", "bigint")}""",
        list_param(conn.dialect, node_ids),
    )
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in rows}


async def find_object_ids(conn: Connection, object_ids: Sequence[str]) -> dict[str, int]:
    """object id -> node id, of those of these object ids that a node has."""
    rows = await conn.fetch(
        f"SELECT object_id, id FROM nodes WHERE {in_list(conn.dialect, 'object_id', '$1')}",
        list_param(conn.dialect, object_ids),
    )
    return {r[0]: r[1] for r in rows}


async def read_edge_property_chunks(conn: Connection) -> AsyncIterator[list[Row]]:
    """Every edge as rows of (id, start id, end id, kind id, properties as JSON text,
    updated_at), in chunks, by id."""
    query = """SELECT id, start_id, end_id, kind_id, properties, updated_at FROM edges
        WHERE id > $1 ORDER BY id LIMIT $2"""
    async for rows in chunks_by_id(conn, query, EDGE_CHUNK):
        yield rows


async def read_edges_between(
    conn: Connection, node_ids: Sequence[int]
) -> dict[tuple[int, int, int], tuple[str, datetime]]:
    """(start, kind, end) -> (properties as JSON text, updated_at) of the edges between
    these nodes."""
    ids = list_param(conn.dialect, node_ids)
    rows = await conn.fetch(
        f"""SELECT start_id, kind_id, end_id, properties, updated_at FROM edges
        WHERE {in_list(conn.dialect, "start_id", "$1", "bigint")}
            AND {in_list(conn.dialect, "end_id", "$1", "bigint")}""",
        ids,
    )
    return {(r[0], r[1], r[2]): (r[3], r[4]) for r in rows}
