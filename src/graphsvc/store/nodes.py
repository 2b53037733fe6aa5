"""Reading the graph: nodes found by name or object id, and the AD domains and Azure tenants
in it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from graphsvc.store.db import Connection
from graphsvc.store.dialect import like_pattern
from graphsvc.store.paging import fetch_page
from graphsvc.store.tags import (
    IN_TAG,
    OWNED_TAG_ID,
    TIER_ZERO_TAG_ID,
    labels_of_names,
    tag_names_of_node,
)


@dataclass
class FoundNode:
    object_id: str
    label: str
    name: str
    properties: dict[str, Any]
    kinds: list[str]  # its kinds, then its tags' labels (Tag_Tier_Zero...)
    is_tier_zero: bool
    is_owned: bool


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
    tier_zero, owned = IN_TAG.format(tag=TIER_ZERO_TAG_ID), IN_TAG.format(tag=OWNED_TAG_ID)
    sql = f"""SELECT n.object_id, n.label, n.name, n.properties, n.kinds,
            {tier_zero}, {owned}, {tag_names_of_node(conn.dialect)}, count(*) OVER ()
        FROM nodes n
        WHERE (n.object_id = $1 OR upper(n.name) LIKE $3 ESCAPE '\\') {kind_filter}
        ORDER BY CASE WHEN n.object_id = $1 THEN 0
            WHEN upper(n.name) LIKE $2 ESCAPE '\\' THEN 1 ELSE 2 END, n.name, n.object_id"""
    total, rows = await fetch_page(conn, sql, args, skip, limit)
    return total, [
        FoundNode(
            r[0],
            r[1],
            r[2],
            json.loads(r[3]),
            [*json.loads(r[4]), *labels_of_names(r[7])],
            bool(r[5]),
            bool(r[6]),
        )
        for r in rows
    ]


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
