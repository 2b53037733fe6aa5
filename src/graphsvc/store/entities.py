"""Reading one entity of the graph and the lists around it (who is admin on a computer, what a
user controls, a domain's users...). Every list is one recursive query built from a `Walk`:
the relationship kinds of its hop, the hop's direction, and how group nesting widens it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import msgspec

from graphsvc import wire
from graphsvc.store.db import Connection
from graphsvc.store.dialect import in_list, list_param
from graphsvc.store.paging import SortKey, fetch_page, order_clause
from graphsvc.store.tags import IN_TAG, OWNED_TAG_ID, TIER_ZERO_TAG_ID

NODE_SORT_COLUMNS = {"name": "n.name", "objectid": "n.object_id", "label": "n.label"}

# How a list widens through group nesting (MemberOf, followed transitively; UNION ends
# cycles):
# - holders: who holds the kinds on the entity, and every member of those, at any depth
#   (as the seed's DCOM rights list them: a holder through a group is listed, and so is
#   the group);
# - groups: what the entity, or any group it is in at any depth, holds the kinds on;
# - members: who holds the kinds on the entity or on any of its members at any depth (the
#   computers where a group's members have sessions);
# - transitive: the kinds followed hop after hop (a group's members, trusts); a walk with
#   `outward` kinds also follows those the other way (a CA's PKI hierarchy, up and down);
# - terminals: as transitive, only the nodes the kinds lead no further from (the ends of
#   delegation chains, as the reference lists them);
# - direct: one hop;
# - environment: the nodes of the domain whose label is the kind (a domain's users);
# - tier_zero: the domain's members of Tier Zero (graphsvc/tags), the domain included;
# - foreign: from the domain's nodes labelled `target`, the holders of the kinds on them and
#   their members at any depth, of another domain (their own is known and not the entity's),
#   labelled `result` if it says (a domain's foreign users, groups, admins, GPO controllers).
Nesting = Literal[
    "holders",
    "groups",
    "members",
    "transitive",
    "terminals",
    "direct",
    "environment",
    "tier_zero",
    "foreign",
]
Direction = Literal["in", "out"]


@dataclass(frozen=True)
class Walk:
    kinds: tuple[str, ...]  # relationship kinds of the hop; a node label for `environment`
    direction: Direction  # "in": from the nodes that point at the entity
    nesting: Nesting
    outward: tuple[str, ...] = ()  # kinds a transitive walk also follows the other way
    target: str = ""  # foreign: the label of the domain's nodes the kinds end at
    result: str = ""  # foreign, transitive: the label of the nodes listed ("" for any)
    membership: str = "MemberOf"  # the nesting followed (AZMemberOf in Azure)


@dataclass
class EntityRow:
    node_id: int
    object_id: str
    name: str
    label: str
    kinds: list[str]
    properties: dict[str, Any]
    is_tier_zero: bool
    is_owned: bool
    seen: datetime  # when its newest collection was made


# What a node is, its kinds decide (not its label, the first of them): a node of kinds
# ["Server", "Computer"] is a computer to every entity route.
HAS_KIND = """EXISTS (SELECT 1 FROM node_kinds nk JOIN kinds nkk ON nkk.id = nk.kind_id
    WHERE nk.node_id = n.id AND nkk.name = $2)"""


async def find_entity(conn: Connection, object_id: str, label: str) -> EntityRow | None:
    """The node with this object id (any case) that has `label` among its kinds."""
    r = await conn.fetchrow(
        f"""SELECT n.id, n.object_id, n.name, n.label, n.kinds, n.properties,
            {IN_TAG.format(tag=TIER_ZERO_TAG_ID)}, {IN_TAG.format(tag=OWNED_TAG_ID)}, n.updated_at
        FROM nodes n WHERE n.object_id = $1 AND {HAS_KIND}""",
        object_id.upper(),
        label,
    )
    if r is None:
        return None
    return EntityRow(
        r[0], r[1], r[2], r[3], json.loads(r[4]), json.loads(r[5]), bool(r[6]), bool(r[7]), r[8]
    )


async def find_entities_by_id(conn: Connection, node_ids: Sequence[int]) -> list[EntityRow]:
    """The nodes of these ids, as find_entity reads one (a page of a list's items)."""
    if not node_ids:
        return []
    rows = await conn.fetch(
        f"""SELECT n.id, n.object_id, n.name, n.label, n.kinds, n.properties,
            {IN_TAG.format(tag=TIER_ZERO_TAG_ID)}, {IN_TAG.format(tag=OWNED_TAG_ID)}, n.updated_at
        FROM nodes n WHERE {in_list(conn.dialect, "n.id", "$1", "bigint")}""",
        list_param(conn.dialect, list(node_ids)),
    )
    return [
        EntityRow(
            r[0], r[1], r[2], r[3], json.loads(r[4]), json.loads(r[5]), bool(r[6]), bool(r[7]), r[8]
        )
        for r in rows
    ]


async def count_descendants_by_label(conn: Connection, node_id: int, kind: str) -> dict[str, int]:
    """How many nodes of each label the node holds through `kind` (AZContains), at any
    depth: one walk for every kind an Azure container counts."""
    rows = await conn.fetch(
        """WITH RECURSIVE contained(node_id) AS (
                SELECT e.end_id FROM edges e WHERE e.start_id = $1
                    AND e.kind_id = (SELECT id FROM kinds WHERE name = $2)
              UNION
                SELECT e.end_id FROM edges e JOIN contained c ON e.start_id = c.node_id
                WHERE e.kind_id = (SELECT id FROM kinds WHERE name = $2)
            ) SELECT n.label, count(*) FROM contained c JOIN nodes n ON n.id = c.node_id
            WHERE c.node_id <> $1 GROUP BY n.label""",
        node_id,
        kind,
    )
    return {r[0]: int(r[1]) for r in rows}


@dataclass
class WalkStart:
    """The node a list is walked from, and the ids of the relationship kinds the graph knows
    among those its walks follow."""

    node_id: int
    kind_ids: dict[str, int]


async def find_walk_start(
    conn: Connection, object_id: str, label: str, walk: Walk
) -> WalkStart | None:
    """The node with this object id (any case) that has `label` among its kinds, with the
    ids of its walk's kinds, in one statement: a list is then two statements (two round
    trips on PostgreSQL), as the seed's DCOM list was. A subquery per kind: joining the
    kinds on a list of names took 97 us a lookup on PostgreSQL, the subqueries 78 us."""
    names = walk_kind_names(walk)
    kind_columns = "".join(
        f", (SELECT id FROM kinds WHERE name = ${i})" for i in range(3, 3 + len(names))
    )
    r = await conn.fetchrow(
        f"SELECT n.id{kind_columns} FROM nodes n WHERE n.object_id = $1 AND {HAS_KIND}",
        object_id.upper(),
        label,
        *names,
    )
    if r is None:
        return None
    found = zip(names, list(r)[1:], strict=True)
    return WalkStart(r[0], {name: kind_id for name, kind_id in found if kind_id is not None})


async def find_kind_ids(conn: Connection, names: Sequence[str]) -> dict[str, int]:
    """The ids of the relationship kinds the graph knows among `names`, by name."""
    rows = await conn.fetch(
        f"SELECT name, id FROM kinds WHERE {in_list(conn.dialect, 'name', '$1')}",
        list_param(conn.dialect, names),
    )
    return {r[0]: r[1] for r in rows}


def walk_kind_names(walk: Walk) -> tuple[str, ...]:
    """The relationship kinds whose ids the walk's query takes."""
    if walk.nesting in ("environment", "tier_zero"):
        return ()
    if walk.nesting in NESTED:
        return (*walk.kinds, walk.membership)
    return (*walk.kinds, *walk.outward)


def walk_sql(walk: Walk, kind_marks: str, outward_marks: str = "") -> str:
    """The set of node ids the walk reaches from node $1, as a query selecting `node_id`;
    `kind_marks` lists the parameters of the hop's kind ids (`outward_marks` those of its
    outward kinds), and MemberOf's is $2 where the walk follows nesting (`walk_arguments`
    gives them in that order). The kinds are parameters, not subqueries: with table
    statistics present, SQLite planned the subquery form of the DCOM walk to read the edge
    rows themselves and ran fifteen times slower."""
    near, far = ("end_id", "start_id") if walk.direction == "in" else ("start_id", "end_id")
    if walk.nesting == "environment":
        return """SELECT n.id AS node_id FROM nodes n, nodes d
            WHERE d.id = $1 AND n.environment_id = d.object_id AND n.label = $2"""
    if walk.nesting == "tier_zero":
        return f"""SELECT t.node_id FROM tag_members t
            WHERE t.tag_id = {TIER_ZERO_TAG_ID}
                AND t.environment_id = (SELECT object_id FROM nodes WHERE id = $1)"""
    if walk.nesting == "foreign":
        assert walk.target.isalpha() and (walk.result.isalpha() or not walk.result)
        listed = f"AND n.label = '{walk.result}'" if walk.result else ""
        return f"""WITH RECURSIVE domain(sid) AS (SELECT object_id FROM nodes WHERE id = $1),
            reached(node_id) AS (
                SELECT e.start_id FROM nodes t, domain d, edges e
                WHERE t.environment_id = d.sid AND t.label = '{walk.target}'
                    AND e.end_id = t.id AND e.kind_id IN ({kind_marks})
              UNION
                SELECT e.start_id FROM edges e JOIN reached r ON e.end_id = r.node_id
                WHERE e.kind_id = $2
            ) SELECT r.node_id FROM reached r, nodes n, domain d
            WHERE n.id = r.node_id AND n.environment_id IS NOT NULL
                AND n.environment_id <> d.sid {listed}"""
    if walk.nesting == "direct":  # DISTINCT: a node may hold several of the kinds
        return f"""SELECT DISTINCT e.{far} AS node_id FROM edges e
            WHERE e.{near} = $1 AND e.kind_id IN ({kind_marks})"""
    if walk.nesting in ("transitive", "terminals"):
        onward = ""
        if walk.nesting == "terminals":
            onward = f"""AND NOT EXISTS (SELECT 1 FROM edges o WHERE o.{near} = reached.node_id
                AND o.kind_id IN ({kind_marks}))"""
        reached = f"""reached(node_id) AS (
                SELECT e.{far} FROM edges e WHERE e.{near} = $1 AND e.kind_id IN ({kind_marks})
              UNION
                SELECT e.{far} FROM edges e JOIN reached r ON e.{near} = r.node_id
                WHERE e.kind_id IN ({kind_marks}))"""
        if walk.result:  # (an Azure container's descendants of one kind)
            assert walk.result.isalpha() and walk.nesting == "transitive" and not walk.outward
            return f"""WITH RECURSIVE {reached}
                SELECT r.node_id FROM reached r JOIN nodes n ON n.id = r.node_id
                WHERE r.node_id <> $1 AND n.label = '{walk.result}'"""
        if not walk.outward:
            return f"""WITH RECURSIVE {reached}
                SELECT node_id FROM reached WHERE node_id <> $1 {onward}"""
        return f"""WITH RECURSIVE {reached}, back(node_id) AS (
                SELECT e.{near} FROM edges e WHERE e.{far} = $1 AND e.kind_id IN ({outward_marks})
              UNION
                SELECT e.{near} FROM edges e JOIN back b ON e.{far} = b.node_id
                WHERE e.kind_id IN ({outward_marks})
            ) SELECT node_id FROM reached WHERE node_id <> $1
            UNION SELECT node_id FROM back WHERE node_id <> $1"""
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
    start: WalkStart,
    walk: Walk,
    sort: Sequence[SortKey],
    skip: int,
    limit: int,
) -> tuple[int, list[tuple[int, wire.NodeListEntry]]]:
    """One page of the nodes the walk reaches from the start (each with its node id), and
    their number."""
    args = walk_arguments(start, walk)
    if args is None:
        return 0, []  # no ingest has produced the walk's kinds yet
    kinds_from = 3 if walk.nesting in NESTED else 2
    hop_end = len(args) + 1 - (len(walk.outward) if walk.outward else 0)
    marks = ", ".join(f"${i}" for i in range(kinds_from, hop_end))
    outward_marks = ", ".join(f"${i}" for i in range(hop_end, len(args) + 1))
    sql = f"""SELECT n.object_id, n.name, n.label, n.kinds, n.id, count(*) OVER ()
        FROM ({walk_sql(walk, marks, outward_marks)}) AS w JOIN nodes n ON n.id = w.node_id
        ORDER BY {order_clause(sort, NODE_SORT_COLUMNS, "n.id")}"""
    total, rows = await fetch_page(conn, sql, args, skip, limit)
    decode = msgspec.json.Decoder(list[str]).decode
    return total, [(r[4], wire.NodeListEntry(r[0], r[1], r[2], decode(r[3]))) for r in rows]


# The walks whose nodes are in the list by a relationship of theirs with the entity (or the
# entity's with them), directly or through a group: `holdings` says which.
HOLDING_WALKS = ("holders", "groups", "direct")


async def holdings(
    conn: Connection, start: WalkStart, walk: Walk, node_ids: Sequence[int]
) -> dict[int, list[wire.Holding]]:
    """How each of `node_ids` (a page of the walk's list) is in the list: the kinds of the
    relationships between it and the entity, each with the group it comes through (None when
    the node, or for a `groups` walk the entity, holds it itself). One query for the page,
    walking up from its nodes' groups (a holders walk) or from the entity's (a groups walk);
    a page's nodes are few where the whole list may be a domain's users."""
    hop = [start.kind_ids[name] for name in walk.kinds if name in start.kind_ids]
    if walk.nesting not in HOLDING_WALKS or not hop or not node_ids:
        return {}
    near, far = ("end_id", "start_id") if walk.direction == "in" else ("start_id", "end_id")
    page = in_list(conn.dialect, "n.id", "$2", "bigint")
    kinds = in_list(conn.dialect, "e.kind_id", "$3", "bigint")
    args = [start.node_id, list_param(conn.dialect, node_ids), list_param(conn.dialect, hop)]
    if walk.nesting in NESTED:
        args.append(start.kind_ids.get("MemberOf", 0))
    if walk.nesting == "holders":
        # Each page node and the groups it is in at any depth; the edges those hold.
        sql = f"""WITH RECURSIVE up(node_id, via_id) AS (
                SELECT n.id, n.id FROM nodes n WHERE {page}
              UNION
                SELECT up.node_id, e.end_id FROM edges e JOIN up ON e.start_id = up.via_id
                WHERE e.kind_id = $4
            ) SELECT DISTINCT up.node_id, k.name AS kind, up.via_id FROM up
            JOIN edges e ON e.{far} = up.via_id AND e.{near} = $1
            JOIN kinds k ON k.id = e.kind_id WHERE {kinds}"""
    elif walk.nesting == "groups":
        # The entity and its groups at any depth; the edges those hold on the page's nodes.
        sql = f"""WITH RECURSIVE circle(via_id) AS (
                SELECT CAST($1 AS BIGINT)
              UNION
                SELECT e.end_id FROM edges e JOIN circle c ON e.start_id = c.via_id
                WHERE e.kind_id = $4
            ) SELECT DISTINCT n.id AS node_id, k.name AS kind, c.via_id FROM circle c
            JOIN edges e ON e.{near} = c.via_id JOIN nodes n ON n.id = e.{far}
            JOIN kinds k ON k.id = e.kind_id WHERE {page} AND {kinds}"""
    else:
        sql = f"""SELECT DISTINCT n.id AS node_id, k.name AS kind, CAST($1 AS BIGINT) AS via_id
            FROM edges e
            JOIN nodes n ON n.id = e.{far} JOIN kinds k ON k.id = e.kind_id
            WHERE e.{near} = $1 AND {page} AND {kinds}"""
    # Each with the node it comes through, named (read for the node itself too: the page's).
    rows = await conn.fetch(
        f"""SELECT h.node_id, h.kind, h.via_id, v.object_id, v.name, v.label, v.kinds
        FROM ({sql}) AS h JOIN nodes v ON v.id = h.via_id""",
        *args,
    )
    decode = msgspec.json.Decoder(list[str]).decode
    found: dict[int, list[wire.Holding]] = {}
    # In code-point order (a database's collation may order kinds otherwise).
    for node_id, kind, via_id, object_id, name, label, kinds in sorted(
        rows, key=lambda r: (r[0], r[1], r[2])
    ):
        # Null: the node itself, or the entity, holds it.
        through = None
        if via_id not in (node_id, start.node_id):
            through = wire.NodeListEntry(object_id, name, label, decode(kinds))
        found.setdefault(node_id, []).append(wire.Holding(kind, through))
    return found


NESTED = ("holders", "groups", "members", "foreign")  # the walks that also follow MemberOf


def walk_arguments(start: WalkStart, walk: Walk) -> list[Any] | None:
    """The walk's query parameters: the start, MemberOf (if it follows nesting) and the
    hop's kinds; None when the graph has none of those kinds."""
    if walk.nesting == "environment":
        return [start.node_id, walk.kinds[0]]
    if walk.nesting == "tier_zero":
        return [start.node_id]
    hop = [start.kind_ids[name] for name in walk.kinds if name in start.kind_ids]
    if walk.outward:
        # One parameter a kind, 0 (no kind's id) for one the graph lacks: the query's marks
        # then match the walk's kinds whatever the graph holds.
        known = [start.kind_ids.get(name, 0) for name in (*walk.kinds, *walk.outward)]
        return [start.node_id, *known] if hop or any(known) else None
    if not hop:
        return None
    if walk.nesting not in NESTED:
        return [start.node_id, *hop]
    return [start.node_id, start.kind_ids.get(walk.membership, 0), *hop]


async def count_reached(conn: Connection, start: WalkStart, walk: Walk) -> int:
    total, _ = await list_reached(conn, start, walk, [], 0, 0)
    return total
