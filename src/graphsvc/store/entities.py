"""Reading one entity of the graph and the lists around it (who is admin on a computer, what a
user controls, a domain's users...). Every list is one recursive query built from a `Walk`:
the relationship kinds of its hop, the hop's direction, and how group nesting widens it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from graphsvc import wire
from graphsvc.store.db import Connection
from graphsvc.store.nodes import NODE_SORT_COLUMNS
from graphsvc.store.paging import SortKey, fetch_page, order_clause

# How a list widens through group nesting (MemberOf, followed transitively; UNION ends
# cycles):
# - holders: who holds the kinds on the entity, and every member of those, at any depth
#   (the seed's DCOM rights: a holder through a group is listed, and so is the group);
# - groups: what the entity, or any group it is in at any depth, holds the kinds on;
# - members: who holds the kinds on the entity or on any of its members at any depth (the
#   computers where a group's members have sessions);
# - transitive: the kinds followed hop after hop (a group's members, trusts);
# - direct: one hop;
# - environment: the nodes of the domain whose label is the kind (a domain's users);
# - tier_zero: the domain's tier zero (store/tier_zero.py), the domain included.
Nesting = Literal[
    "holders", "groups", "members", "transitive", "direct", "environment", "tier_zero"
]
Direction = Literal["in", "out"]


@dataclass(frozen=True)
class Walk:
    kinds: tuple[str, ...]  # relationship kinds of the hop; a node label for `environment`
    direction: Direction  # "in": from the nodes that point at the entity
    nesting: Nesting


@dataclass
class EntityRow:
    node_id: int
    object_id: str
    name: str
    label: str
    kinds: list[str]
    properties: dict[str, Any]
    is_tier_zero: bool


async def find_entity(conn: Connection, object_id: str, label: str) -> EntityRow | None:
    """The node with this object id (any case) that has `label` among its kinds."""
    r = await conn.fetchrow(
        """SELECT n.id, n.object_id, n.name, n.label, n.kinds, n.properties,
            EXISTS (SELECT 1 FROM tier_zero t WHERE t.node_id = n.id) FROM nodes n
        WHERE n.object_id = $1 AND EXISTS (SELECT 1 FROM node_kinds nk JOIN kinds k
            ON k.id = nk.kind_id WHERE nk.node_id = n.id AND k.name = $2)""",
        object_id.upper(),
        label,
    )
    if r is None:
        return None
    return EntityRow(r[0], r[1], r[2], r[3], json.loads(r[4]), json.loads(r[5]), bool(r[6]))


async def find_kind_ids(conn: Connection, names: Sequence[str]) -> list[int]:
    """The ids of the relationship kinds the graph knows among `names`."""
    if not names:
        return []
    marks = ", ".join(f"${i + 1}" for i in range(len(names)))
    rows = await conn.fetch(f"SELECT id FROM kinds WHERE name IN ({marks})", *names)
    return [r[0] for r in rows]


def walk_sql(walk: Walk, kind_marks: str) -> str:
    """The set of node ids the walk reaches from node $1, as a query selecting `node_id`;
    `kind_marks` lists the parameters of the hop's kind ids, and MemberOf's is $2 where the
    walk follows nesting (`walk_arguments` gives them in that order)."""
    near, far = ("end_id", "start_id") if walk.direction == "in" else ("start_id", "end_id")
    if walk.nesting == "environment":
        return """SELECT n.id AS node_id FROM nodes n, nodes d
            WHERE d.id = $1 AND n.environment_id = d.object_id AND n.label = $2"""
    if walk.nesting == "tier_zero":
        return """SELECT t.node_id FROM tier_zero t
            WHERE t.domain_id = (SELECT object_id FROM nodes WHERE id = $1)"""
    if walk.nesting == "direct":
        return f"""SELECT e.{far} AS node_id FROM edges e
            WHERE e.{near} = $1 AND e.kind_id IN ({kind_marks})"""
    if walk.nesting == "transitive":
        return f"""WITH RECURSIVE reached(node_id) AS (
                SELECT e.{far} FROM edges e WHERE e.{near} = $1 AND e.kind_id IN ({kind_marks})
              UNION
                SELECT e.{far} FROM edges e JOIN reached r ON e.{near} = r.node_id
                WHERE e.kind_id IN ({kind_marks})
            ) SELECT node_id FROM reached WHERE node_id <> $1"""
    if walk.nesting == "holders":
        # The entity itself is listed when it is a member of a holder (a computer in a group
        # that may use DCOM on it), as the seed's DCOM rights list it.
        return f"""WITH RECURSIVE reached(node_id) AS (
                SELECT e.{far} FROM edges e WHERE e.{near} = $1 AND e.kind_id IN ({kind_marks})
              UNION
                SELECT e.start_id FROM edges e JOIN reached r ON e.end_id = r.node_id
                WHERE e.kind_id = $2
            ) SELECT node_id FROM reached"""
    # groups (the entity's groups, outward) or members (the entity's members, inward)
    step_near, step_far = (
        ("start_id", "end_id")
        if walk.nesting == "groups"
        else (
            "end_id",
            "start_id",
        )
    )
    return f"""WITH RECURSIVE circle(node_id) AS (
            SELECT CAST($1 AS BIGINT)
          UNION
            SELECT e.{step_far} FROM edges e JOIN circle c ON e.{step_near} = c.node_id
            WHERE e.kind_id = $2
        ) SELECT DISTINCT e.{far} AS node_id FROM edges e JOIN circle c ON e.{near} = c.node_id
        WHERE e.kind_id IN ({kind_marks}) AND e.{far} <> $1"""


async def list_reached(
    conn: Connection,
    entity_id: int,
    walk: Walk,
    sort: Sequence[SortKey],
    skip: int,
    limit: int,
) -> tuple[int, list[wire.NodeListEntry]]:
    """One page of the nodes the walk reaches from the entity, and their number."""
    args = await walk_arguments(conn, entity_id, walk)
    if args is None:
        return 0, []  # no ingest has produced the walk's kinds yet
    kinds_from = 3 if walk.nesting in NESTED else 2
    marks = ", ".join(f"${i}" for i in range(kinds_from, len(args) + 1))
    sql = f"""SELECT n.object_id, n.name, n.label, n.kinds, count(*) OVER ()
        FROM ({walk_sql(walk, marks)}) AS w JOIN nodes n ON n.id = w.node_id
        ORDER BY {order_clause(sort, NODE_SORT_COLUMNS, "n.id")}"""
    total, rows = await fetch_page(conn, sql, args, skip, limit)
    decode = msgspec.json.Decoder(list[str]).decode
    return total, [wire.NodeListEntry(r[0], r[1], r[2], decode(r[3])) for r in rows]


NESTED = ("holders", "groups", "members")  # the walks that also follow MemberOf


async def walk_arguments(conn: Connection, entity_id: int, walk: Walk) -> list[Any] | None:
    """The walk's query parameters: the entity, MemberOf (if it follows nesting) and the
    hop's kinds; None when the graph has none of those kinds."""
    if walk.nesting == "environment":
        return [entity_id, walk.kinds[0]]
    if walk.nesting == "tier_zero":
        return [entity_id]
    kind_ids = await find_kind_ids(conn, walk.kinds)
    if not kind_ids:
        return None
    if walk.nesting not in NESTED:
        return [entity_id, *kind_ids]
    member_of = await find_kind_ids(conn, ["MemberOf"])
    return [entity_id, member_of[0] if member_of else 0, *kind_ids]


async def count_reached(conn: Connection, entity_id: int, walk: Walk) -> int:
    total, _ = await list_reached(conn, entity_id, walk, [], 0, 0)
    return total
