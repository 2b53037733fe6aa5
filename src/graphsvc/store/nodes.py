"""Reading the graph: nodes found by name or object id, the AD domains and Azure tenants in it,
and the DCOM walk."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from graphsvc import wire
from graphsvc.store.db import Connection, like_pattern
from graphsvc.store.paging import SortKey, fetch_page, order_clause

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
    conn: Connection, target: DcomTarget, sort: Sequence[SortKey], skip: int, limit: int
) -> tuple[int, list[wire.NodeListEntry]]:
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
    return total, [wire.NodeListEntry(r[0], r[1], r[2], decode(r[3])) for r in rows]


@dataclass
class FoundNode:
    object_id: str
    label: str
    name: str
    properties: dict[str, Any]


async def search_nodes(
    conn: Connection, text: str, kind: str | None, skip: int, limit: int
) -> tuple[int, list[FoundNode]]:
    """Nodes whose object id is `text` or whose name contains it, case-insensitively: the
    object id first, then names that start with it, then the rest, by name. Names are
    matched by scanning (there is no index on a substring)."""
    upper = text.upper()
    args: list[Any] = [upper, like_pattern(upper) + "%", "%" + like_pattern(upper) + "%"]
    kind_filter = ""
    if kind is not None:
        args.append(kind)
        kind_filter = """AND EXISTS (SELECT 1 FROM node_kinds nk JOIN kinds k
            ON k.id = nk.kind_id WHERE nk.node_id = n.id AND k.name = $4)"""
    sql = f"""SELECT n.object_id, n.label, n.name, n.properties, count(*) OVER ()
        FROM nodes n
        WHERE (n.object_id = $1 OR upper(n.name) LIKE $3 ESCAPE '\\') {kind_filter}
        ORDER BY CASE WHEN n.object_id = $1 THEN 0
            WHEN upper(n.name) LIKE $2 ESCAPE '\\' THEN 1 ELSE 2 END, n.name, n.object_id"""
    total, rows = await fetch_page(conn, sql, args, skip, limit)
    return total, [FoundNode(r[0], r[1], r[2], json.loads(r[3])) for r in rows]


@dataclass
class EnvironmentNode:
    object_id: str
    label: str  # Domain or AZTenant
    name: str
    collected: bool  # a collector reported it, not only something that refers to it


async def list_environment_nodes(conn: Connection) -> list[EnvironmentNode]:
    """The AD domains and Azure tenants in the graph."""
    rows = await conn.fetch(
        """SELECT object_id, label, name, run_number IS NOT NULL FROM nodes
        WHERE label IN ('Domain', 'AZTenant') ORDER BY label, name, object_id"""
    )
    return [EnvironmentNode(r[0], r[1], r[2], bool(r[3])) for r in rows]


async def list_run_environments(conn: Connection, run_number: int) -> list[EnvironmentNode]:
    """The AD domains and Azure tenants whose objects a run collected."""
    rows = await conn.fetch(
        """SELECT e.object_id, e.label, e.name, e.run_number IS NOT NULL FROM nodes e
        WHERE e.label IN ('Domain', 'AZTenant') AND EXISTS (
            SELECT 1 FROM nodes n WHERE n.environment_id = e.object_id AND n.run_number = $1)
        ORDER BY e.label, e.name""",
        run_number,
    )
    return [EnvironmentNode(r[0], r[1], r[2], bool(r[3])) for r in rows]
