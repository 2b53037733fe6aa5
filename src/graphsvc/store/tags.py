"""Tags, their selectors and seeds, what each selector selected, each tag's members, and the
history of changes (migration 0023; graphsvc/tags says what they mean)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from graphsvc.store.db import Connection, Dialect, Row
from graphsvc.store.dialect import (
    in_list,
    json_text,
    like_pattern,
    list_param,
    row_lock,
    text_aggregate,
)
from graphsvc.store.filters import (
    EQUALITY,
    RANGE,
    UNICODE_UPPER,
    Filter,
    FilterColumn,
    filter_conditions,
)
from graphsvc.store.paging import SortKey, fetch_page, order_clause

TIER_ZERO_TAG_ID = 1  # seeded by migration 0023, never deleted
OWNED_TAG_ID = 2
TEXT_MATCH = (*EQUALITY, "~eq")
# SQL testing that node n is a member of a tag (the tag's id written in with `format`).
IN_TAG = "EXISTS (SELECT 1 FROM tag_members m WHERE m.tag_id = {tag} AND m.node_id = n.id)"


def tag_names_of_node(dialect: Dialect) -> str:
    """SQL of the names of the tags node n is a member of, comma-separated (NULL: none); a
    tag's name holds no comma (service.py TAG_NAME)."""
    return f"""(SELECT {text_aggregate(dialect, "d.name")} FROM (SELECT DISTINCT t.name AS name
        FROM tag_members m JOIN asset_group_tags t ON t.id = m.tag_id
        WHERE m.node_id = n.id) d)"""


def system_tags(is_tier_zero: bool, is_owned: bool) -> str:
    """The reference's older `system_tags` text of a node: `admin_tier_0` and `owned`,
    space-separated, as it is in Tier Zero and Owned ('' in neither)."""
    return " ".join(
        tag for tag, held in (("admin_tier_0", is_tier_zero), ("owned", is_owned)) if held
    )


def labels_of_names(names: str | None) -> list[str]:
    """The tag labels of `tag_names_of_node`'s text, by name."""
    return sorted(tag_kind(name) for name in names.split(",")) if names else []


TAG_FILTERS = {
    "type": FilterColumn("t.type", "int", EQUALITY, bits=32),
    "name": FilterColumn("t.name", "text", TEXT_MATCH),
    "description": FilterColumn("t.description", "text", TEXT_MATCH),
    "created_at": FilterColumn("t.created_at", "time", RANGE),
    "updated_at": FilterColumn("t.updated_at", "time", RANGE),
    "created_by": FilterColumn("t.created_by", "text", EQUALITY),
    "updated_by": FilterColumn("t.updated_by", "text", EQUALITY),
}
SELECTOR_FILTERS = {
    # The seeds' type (a selector's seeds are all of one type).
    "type": FilterColumn(
        "(SELECT min(d.type) FROM asset_group_tag_selector_seeds d WHERE d.selector_id = s.id)",
        "int",
        EQUALITY,
        bits=32,
    ),
    "name": FilterColumn("s.name", "text", TEXT_MATCH),
    "description": FilterColumn("s.description", "text", TEXT_MATCH),
    "auto_certify": FilterColumn("s.auto_certify", "int", EQUALITY, bits=32),
    "created_at": FilterColumn("s.created_at", "time", RANGE),
    "updated_at": FilterColumn("s.updated_at", "time", RANGE),
    "disabled_at": FilterColumn("s.disabled_at", "time", RANGE, nullable=True),
    "created_by": FilterColumn("s.created_by", "text", EQUALITY),
    "updated_by": FilterColumn("s.updated_by", "text", EQUALITY),
    "disabled_by": FilterColumn("s.disabled_by", "text", EQUALITY, nullable=True),
}
SELECTOR_SORT_COLUMNS = {"id": "s.id", "name": "s.name", "created_at": "s.created_at"}
MEMBER_FILTERS = {
    "name": FilterColumn("n.name", "text", TEXT_MATCH),
    "object_id": FilterColumn("n.object_id", "text", TEXT_MATCH),
    "primary_kind": FilterColumn("n.label", "text", EQUALITY),
}
MEMBER_SORT_COLUMNS = {"id": "n.id", "objectid": "n.object_id", "name": "n.name"}
HISTORY_FILTERS = {
    "created_at": FilterColumn("h.created_at", "time", RANGE),
    "actor": FilterColumn("h.actor", "text", TEXT_MATCH),
    "email": FilterColumn("h.email", "text", TEXT_MATCH, nullable=True),
    "action": FilterColumn("h.action", "text", TEXT_MATCH),
    "target": FilterColumn("h.target", "text", TEXT_MATCH),
    "environment_id": FilterColumn("h.environment_id", "text", TEXT_MATCH, nullable=True),
    "note": FilterColumn("h.note", "text", TEXT_MATCH, nullable=True),
    "asset_group_tag_id": FilterColumn("h.asset_group_tag_id", "int", EQUALITY, bits=32),
}
HISTORY_SORT_COLUMNS = {
    name: f"h.{name}"
    for name in ("id", "created_at", "actor", "email", "action", "target", "asset_group_tag_id")
}

TAG_FIELDS = """t.id, t.type, t.name, t.description, t.legacy_tag, t.position,
    t.require_certify, t.analysis_enabled, t.glyph, t.created_at, t.created_by, t.updated_at,
    t.updated_by"""
SELECTOR_FIELDS = """s.id, s.tag_id, s.name, s.description, s.auto_certify, s.is_default,
    s.allow_disable, s.created_at, s.created_by, s.updated_at, s.updated_by, s.disabled_at,
    s.disabled_by"""


def tag_kind(name: str) -> str:
    """The label a tag puts on its members (the reference's `Tag_` and the name, spaces as
    underscores)."""
    return "Tag_" + name.replace(" ", "_")


@dataclass(frozen=True)
class TagRow:
    id: int
    type: int  # 1 tier, 2 label, 3 owned
    name: str
    description: str
    legacy_tag: str  # its name among the reference's older asset groups
    position: int | None
    require_certify: bool | None
    analysis_enabled: bool | None
    glyph: str | None
    created_at: datetime
    created_by: str
    updated_at: datetime
    updated_by: str

    @property
    def kind(self) -> str:
        return tag_kind(self.name)


def tag_row(r: Row) -> TagRow:
    return TagRow(
        r[0], r[1], r[2], r[3], r[4], r[5],
        None if r[6] is None else bool(r[6]),
        None if r[7] is None else bool(r[7]),
        r[8], r[9], r[10], r[11], r[12],
    )  # fmt: skip


@dataclass(frozen=True)
class Seed:
    type: int  # 1 object id, 2 Cypher
    value: str


@dataclass(frozen=True)
class SelectorRow:
    id: int
    tag_id: int
    name: str
    description: str
    auto_certify: int
    is_default: bool
    allow_disable: bool
    created_at: datetime
    created_by: str
    updated_at: datetime
    updated_by: str
    disabled_at: datetime | None
    disabled_by: str | None
    seeds: list[Seed] = field(default_factory=list)


def selector_row(r: Row, seeds: list[Seed]) -> SelectorRow:
    return SelectorRow(
        r[0], r[1], r[2], r[3], r[4], bool(r[5]), bool(r[6]), r[7], r[8], r[9], r[10], r[11],
        r[12], seeds,
    )  # fmt: skip


# --- tags ------------------------------------------------------------------------------------


async def list_tags(conn: Connection, filters: Sequence[Filter] = ()) -> list[TagRow]:
    args: list[Any] = []
    conditions = [
        "t.deleted_at IS NULL",
        *filter_conditions(conn.dialect, filters, TAG_FILTERS, args),
    ]
    rows = await conn.fetch(
        f"SELECT {TAG_FIELDS} FROM asset_group_tags t WHERE {' AND '.join(conditions)} "
        "ORDER BY t.id",
        *args,
    )
    return [tag_row(r) for r in rows]


async def find_tag(conn: Connection, tag_id: int) -> TagRow | None:
    row = await conn.fetchrow(
        f"SELECT {TAG_FIELDS} FROM asset_group_tags t WHERE t.id = $1 AND t.deleted_at IS NULL",
        tag_id,
    )
    return None if row is None else tag_row(row)


def reference_key(text: str) -> str:
    """A tag's name or older tag as one may type it: "tier-zero", "Tier Zero", "TIER_ZERO"."""
    return "".join(c for c in text.lower() if c.isalnum())


async def find_tag_by_reference(conn: Connection, text: str) -> TagRow | None:
    """The tag `text` names: its id, its name or its older asset group's tag, in any case,
    with or without spaces, hyphens and underscores ("owned", "tier-zero", "admin_tier_0")."""
    wanted = reference_key(text)
    for tag in await list_tags(conn):
        if text.strip() == str(tag.id) or wanted in (
            reference_key(tag.name),
            reference_key(tag.legacy_tag),
        ):
            return tag
    return None


async def read_member_ids(conn: Connection, tag_id: int) -> list[int]:
    rows = await conn.fetch(
        "SELECT DISTINCT node_id FROM tag_members WHERE tag_id = $1 ORDER BY node_id", tag_id
    )
    return [r[0] for r in rows]


async def tag_taking(conn: Connection, text: str, other_than: int = 0) -> TagRow | None:
    """The tag (not `other_than`) whose name or older tag reads as `text` does, once case,
    spaces, hyphens and underscores are set aside: two such would share a Cypher label
    (`Tag_A_B` for "A B" and "A_B") or a name one types to find them."""
    wanted = reference_key(text)
    for tag in await list_tags(conn):
        if tag.id != other_than and wanted in (
            reference_key(tag.name),
            reference_key(tag.legacy_tag),
        ):
            return tag
    return None


async def insert_tag(
    conn: Connection,
    tag_type: int,
    name: str,
    description: str,
    legacy_tag: str,
    actor: str,
    now: datetime,
) -> int:
    tag_id = await conn.fetchval(
        """INSERT INTO asset_group_tags (type, name, description, legacy_tag, created_at,
            created_by, updated_at, updated_by)
        VALUES ($1, $2, $3, $4, $5, $6, $5, $6) RETURNING id""",
        tag_type,
        name,
        description,
        legacy_tag,
        now,
        actor,
    )
    return int(tag_id)


async def update_tag(
    conn: Connection, tag_id: int, name: str, description: str, actor: str, now: datetime
) -> None:
    await conn.execute(
        """UPDATE asset_group_tags SET name = $2, description = $3, updated_at = $4,
            updated_by = $5 WHERE id = $1""",
        tag_id,
        name,
        description,
        now,
        actor,
    )


async def delete_tag(conn: Connection, tag_id: int, actor: str, now: datetime) -> None:
    """Mark the tag deleted (its name free again) and drop its selectors and members."""
    await conn.execute(
        "UPDATE asset_group_tags SET deleted_at = $2, deleted_by = $3 WHERE id = $1",
        tag_id,
        now,
        actor,
    )
    await conn.execute("DELETE FROM asset_group_tag_selectors WHERE tag_id = $1", tag_id)
    await conn.execute("DELETE FROM tag_members WHERE tag_id = $1", tag_id)
    await move_tags_version(conn)


@dataclass(frozen=True)
class SelectorCounts:
    selectors: int = 0
    custom: int = 0
    default: int = 0
    disabled: int = 0


async def count_selectors(conn: Connection) -> dict[int, SelectorCounts]:
    rows = await conn.fetch(
        """SELECT tag_id, count(*),
            sum(CASE WHEN is_default THEN 0 ELSE 1 END),
            sum(CASE WHEN is_default THEN 1 ELSE 0 END),
            sum(CASE WHEN disabled_at IS NULL THEN 0 ELSE 1 END)
        FROM asset_group_tag_selectors GROUP BY tag_id"""
    )
    return {r[0]: SelectorCounts(int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows}


async def count_members(conn: Connection) -> dict[int, int]:
    rows = await conn.fetch(
        "SELECT tag_id, count(DISTINCT node_id) FROM tag_members GROUP BY tag_id"
    )
    return {r[0]: int(r[1]) for r in rows}


# --- selectors -------------------------------------------------------------------------------


async def read_seeds(conn: Connection, selector_ids: Sequence[int]) -> dict[int, list[Seed]]:
    found: dict[int, list[Seed]] = {s: [] for s in selector_ids}
    if not selector_ids:
        return found
    rows = await conn.fetch(
        f"""SELECT selector_id, type, value FROM asset_group_tag_selector_seeds
        WHERE {in_list(conn.dialect, "selector_id", "$1", "int")}
        ORDER BY selector_id, position""",
        list_param(conn.dialect, selector_ids),
    )
    for r in rows:
        found[r[0]].append(Seed(r[1], r[2]))
    return found


async def with_seeds(conn: Connection, rows: Sequence[Row]) -> list[SelectorRow]:
    seeds = await read_seeds(conn, [r[0] for r in rows])
    return [selector_row(r, seeds[r[0]]) for r in rows]


async def list_selectors(
    conn: Connection,
    tag_id: int,
    filters: Sequence[Filter],
    sort: Sequence[SortKey],
    skip: int,
    limit: int,
) -> tuple[int, list[SelectorRow]]:
    args: list[Any] = [tag_id]
    conditions = [
        "s.tag_id = $1",
        *filter_conditions(conn.dialect, filters, SELECTOR_FILTERS, args),
    ]
    total, rows = await fetch_page(
        conn,
        f"""SELECT {SELECTOR_FIELDS}, count(*) OVER () FROM asset_group_tag_selectors s
        WHERE {" AND ".join(conditions)}
        ORDER BY {order_clause(sort, SELECTOR_SORT_COLUMNS, "s.id")}""",
        args,
        skip,
        limit,
    )
    return total, await with_seeds(conn, rows)


async def list_tag_selectors(conn: Connection, tag_id: int) -> list[SelectorRow]:
    rows = await conn.fetch(
        f"SELECT {SELECTOR_FIELDS} FROM asset_group_tag_selectors s WHERE s.tag_id = $1 "
        "ORDER BY s.id",
        tag_id,
    )
    return await with_seeds(conn, rows)


async def list_enabled_selectors(conn: Connection) -> list[tuple[SelectorRow, int]]:
    """Every enabled selector of a tag not deleted, with its tag's type."""
    rows = await conn.fetch(
        f"""SELECT {SELECTOR_FIELDS}, t.type FROM asset_group_tag_selectors s
        JOIN asset_group_tags t ON t.id = s.tag_id
        WHERE t.deleted_at IS NULL AND s.disabled_at IS NULL ORDER BY s.id"""
    )
    selectors = await with_seeds(conn, rows)
    return [(s, int(r[-1])) for s, r in zip(selectors, rows, strict=True)]


async def find_selector(conn: Connection, selector_id: int) -> SelectorRow | None:
    row = await conn.fetchrow(
        f"SELECT {SELECTOR_FIELDS} FROM asset_group_tag_selectors s WHERE s.id = $1",
        selector_id,
    )
    return None if row is None else (await with_seeds(conn, [row]))[0]


async def selector_name_taken(
    conn: Connection, tag_id: int, name: str, other_than: int = 0
) -> bool:
    found = await conn.fetchval(
        """SELECT 1 FROM asset_group_tag_selectors WHERE tag_id = $1 AND name = $2
        AND id <> $3""",
        tag_id,
        name,
        other_than,
    )
    return found is not None


async def insert_selector(
    conn: Connection,
    tag_id: int,
    name: str,
    description: str,
    auto_certify: int,
    seeds: Sequence[Seed],
    actor: str,
    now: datetime,
) -> int:
    selector_id = int(
        await conn.fetchval(
            """INSERT INTO asset_group_tag_selectors (tag_id, name, description, auto_certify,
                is_default, allow_disable, created_at, created_by, updated_at, updated_by)
            VALUES ($1, $2, $3, $4, false, true, $5, $6, $5, $6) RETURNING id""",
            tag_id,
            name,
            description,
            auto_certify,
            now,
            actor,
        )
    )
    await write_seeds(conn, selector_id, seeds)
    return selector_id


async def write_seeds(conn: Connection, selector_id: int, seeds: Sequence[Seed]) -> None:
    await conn.execute(
        "DELETE FROM asset_group_tag_selector_seeds WHERE selector_id = $1", selector_id
    )
    for position, seed in enumerate(seeds):
        await conn.execute(
            """INSERT INTO asset_group_tag_selector_seeds (selector_id, position, type, value)
            VALUES ($1, $2, $3, $4)""",
            selector_id,
            position,
            seed.type,
            seed.value,
        )


async def update_selector(conn: Connection, selector: SelectorRow) -> None:
    """Write the selector's fields (its seeds too) as given."""
    await conn.execute(
        """UPDATE asset_group_tag_selectors SET name = $2, description = $3, auto_certify = $4,
            updated_at = $5, updated_by = $6, disabled_at = $7, disabled_by = $8
        WHERE id = $1""",
        selector.id,
        selector.name,
        selector.description,
        selector.auto_certify,
        selector.updated_at,
        selector.updated_by,
        selector.disabled_at,
        selector.disabled_by,
    )
    await write_seeds(conn, selector.id, selector.seeds)


async def delete_selector(conn: Connection, selector_id: int) -> None:
    await conn.execute(
        "DELETE FROM asset_group_tag_selector_seeds WHERE selector_id = $1", selector_id
    )
    await conn.execute(
        "DELETE FROM asset_group_tag_selector_nodes WHERE selector_id = $1", selector_id
    )
    await conn.execute("DELETE FROM asset_group_tag_selectors WHERE id = $1", selector_id)


async def delete_custom_selectors(conn: Connection, tag_ids: Sequence[int]) -> None:
    """Every selector of these tags but the defaults, with what they selected."""
    chosen = f"""SELECT id FROM asset_group_tag_selectors
        WHERE NOT is_default AND {in_list(conn.dialect, "tag_id", "$1", "int")}"""
    ids = list_param(conn.dialect, tag_ids)
    for table, column in (
        ("asset_group_tag_selector_seeds", "selector_id"),
        ("asset_group_tag_selector_nodes", "selector_id"),
        ("asset_group_tag_selectors", "id"),
    ):
        await conn.execute(f"DELETE FROM {table} WHERE {column} IN ({chosen})", ids)


async def count_selector_members(conn: Connection, tag_id: int) -> dict[int, int]:
    """selector id -> how many of the tag's members it selected."""
    rows = await conn.fetch(
        """SELECT sn.selector_id, count(DISTINCT sn.node_id)
        FROM asset_group_tag_selector_nodes sn
        JOIN asset_group_tag_selectors s ON s.id = sn.selector_id
        WHERE s.tag_id = $1 AND s.disabled_at IS NULL
            AND EXISTS (SELECT 1 FROM tag_members m WHERE m.tag_id = $1 AND m.node_id = sn.node_id)
        GROUP BY sn.selector_id""",
        tag_id,
    )
    return {r[0]: int(r[1]) for r in rows}


# --- what selectors select, and the members ---------------------------------------------------


@dataclass(frozen=True)
class NodeFacts:
    """What selection reads of a node: its label and kinds, the environment it is in (a
    domain or tenant's own is itself) and whether its access list is protected."""

    label: str
    kinds: tuple[str, ...]
    environment_id: str
    acl_protected: bool | None


ENVIRONMENT = """COALESCE(n.environment_id,
    CASE WHEN n.label IN ('Domain', 'AZTenant') THEN n.object_id END, '')"""


async def read_node_facts(conn: Connection, node_ids: Iterable[int]) -> dict[int, NodeFacts]:
    ids = sorted(set(node_ids))
    if not ids:
        return {}
    protected = json_text(conn.dialect, "n.properties", "isaclprotected")
    rows = await conn.fetch(
        f"""SELECT n.id, n.label, n.kinds, {ENVIRONMENT}, {protected} FROM nodes n
        WHERE {in_list(conn.dialect, "n.id", "$1", "bigint")}""",
        list_param(conn.dialect, ids),
    )
    found = {}
    for r in rows:
        flag = r[4]
        if isinstance(flag, str):  # PostgreSQL's ->> answers text
            flag = {"true": True, "false": False}.get(flag)
        found[r[0]] = NodeFacts(
            r[1], tuple(json.loads(r[2])), r[3], None if flag is None else bool(flag)
        )
    return found


async def find_object_ids(conn: Connection, object_ids: Sequence[str]) -> dict[str, int]:
    """object id -> node id, of those that a node has (as given, then upper-cased)."""
    wanted = sorted({*object_ids, *(o.upper() for o in object_ids)})
    rows = await conn.fetch(
        f"SELECT object_id, id FROM nodes WHERE {in_list(conn.dialect, 'object_id', '$1')}",
        list_param(conn.dialect, wanted),
    )
    return {r[0]: r[1] for r in rows}


async def find_kind_ids(conn: Connection, names: Sequence[str]) -> list[int]:
    rows = await conn.fetch(
        f"SELECT id FROM kinds WHERE {in_list(conn.dialect, 'name', '$1')}",
        list_param(conn.dialect, names),
    )
    return [r[0] for r in rows]


async def read_neighbours(
    conn: Connection, node_ids: Sequence[int], kind_ids: Sequence[int], inbound: bool
) -> list[tuple[int, int]]:
    """(node, neighbour) over the edges of these kinds that end (inbound) or start at the
    nodes."""
    if not node_ids or not kind_ids:
        return []
    near, far = ("end_id", "start_id") if inbound else ("start_id", "end_id")
    rows = await conn.fetch(
        f"""SELECT {near}, {far} FROM edges
        WHERE {in_list(conn.dialect, near, "$1", "bigint")}
            AND {in_list(conn.dialect, "kind_id", "$2", "int")}""",
        list_param(conn.dialect, sorted(set(node_ids))),
        list_param(conn.dialect, sorted(set(kind_ids))),
    )
    return [(r[0], r[1]) for r in rows]


@dataclass(frozen=True)
class Selected:
    node_id: int
    environment_id: str
    source: int  # 1 seed, 2 child, 3 parent


async def replace_selector_nodes(
    conn: Connection, selector: SelectorRow, selected: Iterable[Selected], now: datetime
) -> None:
    """Make the selector's selected nodes these, keeping a manual or revoked certification
    of a node selected before (and when it was first selected)."""
    before = {
        (r[0], r[1]): (r[2], r[3], r[4])
        for r in await conn.fetch(
            """SELECT node_id, environment_id, certified, certified_by, created_at
            FROM asset_group_tag_selector_nodes WHERE selector_id = $1""",
            selector.id,
        )
    }
    await conn.execute(
        "DELETE FROM asset_group_tag_selector_nodes WHERE selector_id = $1", selector.id
    )
    rows = []
    for s in selected:
        certified, certified_by, created = 0, None, now
        earlier = before.get((s.node_id, s.environment_id))
        if earlier is not None:
            created = earlier[2]
            if earlier[0] in (-1, 1):  # revoked or manual: a person's decision
                certified, certified_by = earlier[0], earlier[1]
        if certified == 0 and (
            selector.auto_certify == 1 or (selector.auto_certify == 2 and s.source == 1)
        ):
            certified, certified_by = 2, "BloodHound"
        rows.append((s.node_id, s.environment_id, s.source, certified, certified_by, created))
    await conn.executemany(
        """INSERT INTO asset_group_tag_selector_nodes (selector_id, node_id, environment_id,
            source, certified, certified_by, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8)""",
        [(selector.id, *row, now) for row in rows],
    )


async def delete_selector_nodes(conn: Connection, selector_id: int) -> None:
    await conn.execute(
        "DELETE FROM asset_group_tag_selector_nodes WHERE selector_id = $1", selector_id
    )


async def delete_disabled_selector_nodes(conn: Connection) -> None:
    await conn.execute(
        """DELETE FROM asset_group_tag_selector_nodes WHERE selector_id IN
        (SELECT id FROM asset_group_tag_selectors WHERE disabled_at IS NOT NULL)"""
    )


async def rebuild_members(conn: Connection) -> None:
    """Each tag's members from what its enabled selectors selected (a tag that requires
    certification takes those not revoked), and the version moved."""
    await conn.execute("DELETE FROM tag_members")
    await conn.execute(
        """INSERT INTO tag_members (tag_id, node_id, environment_id)
        SELECT DISTINCT s.tag_id, sn.node_id, sn.environment_id
        FROM asset_group_tag_selector_nodes sn
        JOIN asset_group_tag_selectors s ON s.id = sn.selector_id
        JOIN asset_group_tags t ON t.id = s.tag_id
        WHERE s.disabled_at IS NULL AND t.deleted_at IS NULL
            AND (t.require_certify IS NULL OR NOT t.require_certify OR sn.certified > -1)"""
    )
    await move_tags_version(conn)


async def lock_tags(conn: Connection) -> None:
    """Hold the tags for this transaction (on PostgreSQL; SQLite's writes are one at a time):
    two changes of selectors at once would each rebuild the members, and two new tags pass
    each other's name check."""
    await conn.fetchval(
        f"SELECT version FROM tag_state WHERE id = 1{row_lock(conn.dialect, 'FOR UPDATE')}"
    )


async def move_tags_version(conn: Connection) -> None:
    await conn.execute("UPDATE tag_state SET version = version + 1 WHERE id = 1")


async def read_tags_version(conn: Connection) -> int:
    return int(await conn.fetchval("SELECT version FROM tag_state WHERE id = 1"))


async def read_all_members(conn: Connection) -> list[tuple[int, str, int]]:
    """(tag id, tag name, node id) of every member of every tag."""
    rows = await conn.fetch(
        """SELECT DISTINCT t.id, t.name, m.node_id FROM tag_members m
        JOIN asset_group_tags t ON t.id = m.tag_id ORDER BY m.node_id"""
    )
    return [(r[0], r[1], r[2]) for r in rows]


async def read_tag_labels(conn: Connection, node_ids: Iterable[int]) -> dict[int, list[str]]:
    """node id -> the labels of the tags it is a member of (`Tag_Tier_Zero`...), by tag id:
    what an answer adds to a node's kinds."""
    ids = sorted(set(node_ids))
    if not ids:
        return {}
    rows = await conn.fetch(
        f"""SELECT DISTINCT m.node_id, t.id, t.name FROM tag_members m
        JOIN asset_group_tags t ON t.id = m.tag_id
        WHERE {in_list(conn.dialect, "m.node_id", "$1", "bigint")} ORDER BY m.node_id, t.id""",
        list_param(conn.dialect, ids),
    )
    found: dict[int, list[str]] = {}
    for r in rows:
        found.setdefault(r[0], []).append(tag_kind(r[2]))
    return found


@dataclass(frozen=True)
class MemberRow:
    node_id: int
    object_id: str
    environment_id: str
    primary_kind: str
    name: str
    properties: dict[str, Any]
    source: int | None


def member_scope(
    conn: Connection,
    tag_id: int,
    selector_id: int | None,
    environments: Sequence[str],
    filters: Sequence[Filter],
    args: list[Any],
) -> str:
    """The WHERE of a tag's members (or those of one of its selectors) as nodes n."""
    args.append(tag_id)
    conditions = [
        f"EXISTS (SELECT 1 FROM tag_members m WHERE m.tag_id = ${len(args)} AND m.node_id = n.id)"
    ]
    if selector_id is not None:
        args.append(selector_id)
        conditions.append(
            f"""EXISTS (SELECT 1 FROM asset_group_tag_selector_nodes sn
            WHERE sn.selector_id = ${len(args)} AND sn.node_id = n.id)"""
        )
    if environments:
        args.append(list_param(conn.dialect, environments))
        conditions.append(in_list(conn.dialect, ENVIRONMENT, f"${len(args)}"))
    conditions += filter_conditions(conn.dialect, filters, MEMBER_FILTERS, args)
    return " AND ".join(conditions)


async def list_members(
    conn: Connection,
    tag_id: int,
    selector_id: int | None,
    environments: Sequence[str],
    filters: Sequence[Filter],
    sort: Sequence[SortKey],
    skip: int,
    limit: int,
) -> tuple[int, list[MemberRow]]:
    args: list[Any] = []
    where = member_scope(conn, tag_id, selector_id, environments, filters, args)
    source = "NULL"
    if selector_id is not None:
        source = f"""(SELECT min(sn.source) FROM asset_group_tag_selector_nodes sn
            WHERE sn.selector_id = ${args.index(selector_id) + 1} AND sn.node_id = n.id)"""
    total, rows = await fetch_page(
        conn,
        f"""SELECT n.id, n.object_id, {ENVIRONMENT}, n.label, n.name, {source}, count(*) OVER ()
        FROM nodes n WHERE {where}
        ORDER BY {order_clause(sort, MEMBER_SORT_COLUMNS, "n.id")}""",
        args,
        skip,
        limit,
    )
    return total, [MemberRow(r[0], r[1], r[2], r[3], r[4] or "", {}, r[5]) for r in rows]


async def count_members_by_kind(
    conn: Connection, tag_id: int, selector_id: int | None, environments: Sequence[str]
) -> dict[str, int]:
    args: list[Any] = []
    where = member_scope(conn, tag_id, selector_id, environments, (), args)
    rows = await conn.fetch(
        f"SELECT n.label, count(*) FROM nodes n WHERE {where} GROUP BY n.label ORDER BY n.label",
        *args,
    )
    return {r[0]: int(r[1]) for r in rows}


async def list_member_nodes(conn: Connection, tag_id: int) -> list[tuple[MemberRow, list[str]]]:
    """Every member of the tag, by node id, with its kinds."""
    rows = await conn.fetch(
        f"""SELECT n.id, n.object_id, {ENVIRONMENT}, n.label, n.name, n.kinds FROM nodes n
        WHERE {IN_TAG.format(tag="$1")} ORDER BY n.id""",
        tag_id,
    )
    return [
        (MemberRow(r[0], r[1], r[2], r[3], r[4] or "", {}, None), json.loads(r[5])) for r in rows
    ]


async def read_member_rows(conn: Connection, node_ids: Sequence[int]) -> dict[int, MemberRow]:
    """node id -> the node as a member row (no properties, no source)."""
    if not node_ids:
        return {}
    rows = await conn.fetch(
        f"""SELECT n.id, n.object_id, {ENVIRONMENT}, n.label, n.name FROM nodes n
        WHERE {in_list(conn.dialect, "n.id", "$1", "bigint")}""",
        list_param(conn.dialect, sorted(set(node_ids))),
    )
    return {r[0]: MemberRow(r[0], r[1], r[2], r[3], r[4] or "", {}, None) for r in rows}


async def find_member(conn: Connection, tag_id: int, node_id: int) -> MemberRow | None:
    row = await conn.fetchrow(
        f"""SELECT n.id, n.object_id, {ENVIRONMENT}, n.label, n.name, n.properties FROM nodes n
        WHERE n.id = $2 AND EXISTS (SELECT 1 FROM tag_members m
            WHERE m.tag_id = $1 AND m.node_id = n.id)""",
        tag_id,
        node_id,
    )
    if row is None:
        return None
    return MemberRow(row[0], row[1], row[2], row[3], row[4] or "", json.loads(row[5]), None)


async def list_member_selectors(conn: Connection, tag_id: int, node_id: int) -> list[SelectorRow]:
    rows = await conn.fetch(
        f"""SELECT {SELECTOR_FIELDS} FROM asset_group_tag_selectors s
        WHERE s.tag_id = $1 AND s.disabled_at IS NULL AND EXISTS (
            SELECT 1 FROM asset_group_tag_selector_nodes sn
            WHERE sn.selector_id = s.id AND sn.node_id = $2)
        ORDER BY s.id""",
        tag_id,
        node_id,
    )
    return await with_seeds(conn, rows)


# --- history ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryRow:
    id: int
    created_at: datetime
    actor: str
    email: str | None
    action: str
    target: str
    asset_group_tag_id: int
    environment_id: str | None
    note: str | None


async def insert_history(
    conn: Connection,
    now: datetime,
    actor: str,
    email: str | None,
    action: str,
    target: str,
    tag_id: int,
) -> None:
    await conn.execute(
        """INSERT INTO asset_group_history (created_at, actor, email, action, target,
            asset_group_tag_id) VALUES ($1, $2, $3, $4, $5, $6)""",
        now,
        actor,
        email,
        action,
        target,
        tag_id,
    )


async def list_history(
    conn: Connection,
    filters: Sequence[Filter],
    search: str | None,
    sort: Sequence[SortKey],
    skip: int,
    limit: int,
) -> tuple[int, list[HistoryRow]]:
    args: list[Any] = []
    conditions = ["1 = 1", *filter_conditions(conn.dialect, filters, HISTORY_FILTERS, args)]
    if search is not None:
        args.append("%" + like_pattern(search.upper()) + "%")
        mark, upper = f"${len(args)}", UNICODE_UPPER[conn.dialect]
        conditions.append(
            "("
            + " OR ".join(
                f"{upper}(COALESCE({column}, '')) LIKE {mark} ESCAPE '\\'"
                for column in ("h.actor", "h.email", "h.action", "h.target")
            )
            + ")"
        )
    total, rows = await fetch_page(
        conn,
        f"""SELECT h.id, h.created_at, h.actor, h.email, h.action, h.target,
            h.asset_group_tag_id, h.environment_id, h.note, count(*) OVER ()
        FROM asset_group_history h WHERE {" AND ".join(conditions)}
        ORDER BY {order_clause(sort, HISTORY_SORT_COLUMNS, "h.id DESC")}""",
        args,
        skip,
        limit,
    )
    return total, [HistoryRow(*r[:9]) for r in rows]
