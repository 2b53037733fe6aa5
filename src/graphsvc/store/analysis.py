"""What the analysis (graphsvc.analysis) reads of the whole graph and the relationships it
writes: marked derived (migration 0020), replaced by the next analysis."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graphsvc.store.db import Connection, Row
from graphsvc.store.dialect import (
    in_list,
    json_property_equals,
    json_text,
    json_value_param,
    like_pattern,
    list_param,
    rows_source,
)
from graphsvc.store.graph import EACH_KIND, ensure_kinds

BATCH_ROWS = 5000  # rows one statement writes, as the ingest writer's batches
# A derived relationship: start and end object ids, kind, the environment it belongs to.
DerivedEdge = tuple[str, str, str, str | None]


# The kinds the analysis copies from raw relationships in SQL (`sync_raw_copies`); every
# other derived relationship is written from Python (`replace_derived_edges`).
RAW_COPIES = {"OwnsRaw": "Owns", "WriteOwnerRaw": "WriteOwner"}


async def replace_derived_edges(
    conn: Connection,
    edges: Sequence[DerivedEdge],
    run_number: int,
    now: datetime,
    later: Sequence[str] = (),
    only: Sequence[str] = (),
) -> None:
    """Make the derived relationships (but the raw copies) exactly `edges`: delete those the
    analysis no longer derives, insert those it derives for the first time, leave the rest
    (with the run and time they were first derived at). Deleting them all and inserting them
    again rewrote every row: at a million objects 12 s of delete and as much of insert.
    Relationships of the `later` kinds are left for a later call, which passes them as
    `only`. Compared kind by kind: the stored ones of every kind at once were three million
    rows in a tenant of 100,000 Azure objects."""
    if only:
        scope = in_list(conn.dialect, "k.name", "$1")
        kinds = sorted(only)
    else:
        scope = f"NOT {in_list(conn.dialect, 'k.name', '$1')}"
        kinds = sorted({*RAW_COPIES.values(), *later})
    # A seek a kind into the index led by kind and whether derived (migration 0026): `derived
    # = true`, since SQLite seeks on an equality, not on a bare truth test, which read every
    # entry of a kind (GenericAll's million on the 1 GB collection: 0.24 s to nothing).
    stored_kinds = await conn.fetch(
        f"""SELECT k.name FROM kinds k WHERE {scope}
            AND EXISTS (SELECT 1 FROM edges x WHERE x.kind_id = k.id AND x.derived = true)""",
        list_param(conn.dialect, kinds),
    )
    by_kind: dict[str, list[DerivedEdge]] = defaultdict(list)
    for edge in edges:
        by_kind[edge[2]].append(edge)
    compared = {r[0] for r in stored_kinds} | set(by_kind)
    if not only:
        # (A raw copy's derived kind is the copies' own, store.analysis.sync_raw_copies.)
        assert compared.isdisjoint(RAW_COPIES.values()), "a raw copy's kind among the edges"
    for kind in sorted(compared):
        await replace_derived_kind(conn, kind, by_kind.pop(kind, []), run_number, now)


async def replace_derived_kind(
    conn: Connection, kind: str, edges: list[DerivedEdge], run_number: int, now: datetime
) -> None:
    """Make the derived relationships of one kind exactly `edges` (all of that kind)."""
    stored = await conn.fetch(
        """SELECT x.id, s.object_id, e.object_id FROM edges x
        JOIN nodes s ON s.id = x.start_id JOIN nodes e ON e.id = x.end_id
        WHERE x.kind_id = (SELECT id FROM kinds WHERE name = $1) AND x.derived = true""",
        kind,
    )
    wanted = {(start, end) for start, end, _, _ in edges}
    gone = [r[0] for r in stored if (r[1], r[2]) not in wanted]
    del wanted
    for low in range(0, len(gone), BATCH_ROWS):
        await conn.execute(
            f"DELETE FROM edges WHERE {in_list(conn.dialect, 'id', '$1', 'bigint')}",
            list_param(conn.dialect, gone[low : low + BATCH_ROWS]),
        )
    kept = {(r[1], r[2]) for r in stored}
    del stored
    await insert_derived_edges(
        conn, [e for e in edges if (e[0], e[1]) not in kept], run_number, now
    )


async def count_derived_edges(conn: Connection) -> int:
    found = await conn.fetchval(f"SELECT count(*) FROM edges WHERE {EACH_KIND} AND derived = true")
    return int(found or 0)


async def list_rights_on(
    conn: Connection, label: str, rights: Sequence[str]
) -> list[tuple[str, str, str, str]]:
    """(object id of the node of `label`, right, holder's object id, holder's label) of every
    relationship of the `rights` kinds ending at a node of `label`."""
    rows = await conn.fetch(
        f"""SELECT t.object_id, k.name, s.object_id, s.label FROM edges x
        JOIN kinds k ON k.id = x.kind_id JOIN nodes t ON t.id = x.end_id
        JOIN nodes s ON s.id = x.start_id
        WHERE {in_list(conn.dialect, "k.name", "$1")} AND t.label = $2
        ORDER BY t.object_id, k.name, s.object_id""",
        list_param(conn.dialect, rights),
        label,
    )
    return [(r[0], r[1], r[2], r[3]) for r in rows]


async def list_members(
    conn: Connection, groups: Iterable[str], kinds: Sequence[str] = ("MemberOf",)
) -> list[tuple[str, str, str]]:
    """(member, group, the member's label) of every membership (`kinds`) into these groups
    (object ids)."""
    # CROSS JOIN keeps SQLite to this order (groups, then their edges by end): joined
    # freely, it read every edge for each call.
    rows = await conn.fetch(
        f"""SELECT s.object_id, e.object_id, s.label FROM nodes e CROSS JOIN edges x
            CROSS JOIN nodes s
        WHERE {in_list(conn.dialect, "e.object_id", "$1")} AND x.end_id = e.id
            AND x.kind_id IN (SELECT id FROM kinds WHERE {in_list(conn.dialect, "name", "$2")})
            AND s.id = x.start_id""",
        list_param(conn.dialect, groups),
        list_param(conn.dialect, kinds),
    )
    return [(r[0], r[1], r[2]) for r in rows]


async def list_local_groups(
    conn: Connection, name_prefix: str
) -> list[tuple[str, bool, str, str | None]]:
    """(group, whether it is an ADLocalGroup whose name starts with `name_prefix` (any
    case), computer, the computer's domain) of every LocalToComputer relationship."""
    # Only the kinds of a group so named are read: a subquery a row testing every group's
    # took 3.4 s of the local groups' 6.8 at a million objects.
    rows = await conn.fetch(
        """SELECT s.object_id, CASE WHEN upper(s.name) LIKE $1 ESCAPE '\\' THEN s.kinds END,
            e.object_id, e.environment_id FROM edges x
        JOIN nodes s ON s.id = x.start_id JOIN nodes e ON e.id = x.end_id
        WHERE x.kind_id = (SELECT id FROM kinds WHERE name = 'LocalToComputer')""",
        like_pattern(name_prefix.upper()) + "%",
    )
    return [
        (r[0], r[1] is not None and "ADLocalGroup" in node_kinds(r[1]), r[2], r[3]) for r in rows
    ]


def node_kinds(value: Any) -> list[str]:
    """A node's kinds as the dialect answers them (JSON text, or a decoded list)."""
    found = json.loads(value) if isinstance(value, str) else value
    return found if isinstance(found, list) else []


async def list_laps_computers(conn: Connection, domain: str) -> list[str]:
    """Object ids of the domain's computers whose `haslaps` is true."""
    condition = json_property_equals(conn.dialect, "properties", "$2", "$3")
    rows = await conn.fetch(
        f"""SELECT object_id FROM nodes WHERE environment_id = $1 AND label = 'Computer'
            AND {condition} ORDER BY object_id""",
        domain,
        "haslaps",
        json_value_param(conn.dialect, True),
    )
    return [r[0] for r in rows]


async def insert_derived_edges(
    conn: Connection, edges: Sequence[DerivedEdge], run_number: int, now: datetime
) -> int:
    """The relationships, marked derived, between nodes that exist (a relationship a
    collector reported between the same nodes stays as it is). How many were written."""
    if not edges:
        return 0
    kind_ids = await ensure_kinds(conn, {kind for _, _, kind, _ in edges})
    ids = {
        object_id: node_id
        for node_id, object_id in await conn.fetch(
            f"SELECT id, object_id FROM nodes WHERE {in_list(conn.dialect, 'object_id', '$1')}",
            list_param(conn.dialect, sorted({o for s, e, _, _ in edges for o in (s, e)})),
        )
    }
    values = [
        (ids[start], ids[end], kind_ids[kind], environment)
        for start, end, kind, environment in edges
        if start in ids and end in ids
    ]
    for low in range(0, len(values), BATCH_ROWS):
        batch = values[low : low + BATCH_ROWS]
        rows, params = rows_source(conn.dialect, ("bigint", "bigint", "int", "text"), batch, 3)
        await conn.execute(
            f"""INSERT INTO edges (start_id, end_id, kind_id, properties, environment_id,
                run_number, updated_at, derived) SELECT c1, c2, c3, '{{}}', c4, $1, $2, true
                FROM {rows} WHERE true
            ON CONFLICT (end_id, kind_id, start_id) DO NOTHING""",
            run_number,
            now,
            *params,
        )
    return len(values)


async def record_analysis(
    conn: Connection, started: datetime, completed: datetime, derived: int
) -> None:
    await conn.execute(
        "INSERT INTO analyses (started_at, completed_at, derived) VALUES ($1, $2, $3)",
        started,
        completed,
        derived,
    )


async def find_last_analysis(conn: Connection) -> tuple[datetime, datetime] | None:
    """When the newest analysis began and ended."""
    row = await conn.fetchrow(
        "SELECT started_at, completed_at FROM analyses ORDER BY id DESC LIMIT 1"
    )
    return None if row is None else (row[0], row[1])


async def find_latest_run_number(conn: Connection) -> int:
    """The newest ingest run's number (0 before any): what an analysis asked for outside a
    run stamps its relationships with."""
    return int(await conn.fetchval("SELECT coalesce(max(number), 0) FROM ingest_runs"))


@dataclass(frozen=True)
class AnalysedNode:
    """A node as the analysis reads it: its kinds, properties, the domain it belongs to (its
    environment, else its `domainsid`) and whether a collection reported it (not a stub)."""

    object_id: str
    kinds: list[str]
    properties: dict[str, Any]
    domain: str | None
    collected: bool


NODE_FIELDS = "n.object_id, n.kinds, n.properties, n.environment_id, n.run_number IS NOT NULL"


def analysed_node(row: Row) -> AnalysedNode:
    kinds = node_kinds(row[1])
    properties = json.loads(row[2]) if isinstance(row[2], str) else dict(row[2] or {})
    properties = properties if isinstance(properties, dict) else {}
    sid = properties.get("domainsid")
    domain = row[3] or (sid.upper() if isinstance(sid, str) and sid else None)
    return AnalysedNode(row[0], kinds, properties, domain, bool(row[4]))


async def list_nodes_of_kinds(conn: Connection, kinds: Sequence[str]) -> list[AnalysedNode]:
    """Every node carrying one of the kinds (the certificate services, the domains: few)."""
    rows = await conn.fetch(
        f"""SELECT {NODE_FIELDS} FROM nodes n WHERE n.id IN (SELECT nk.node_id FROM node_kinds nk
            JOIN kinds k ON k.id = nk.kind_id WHERE {in_list(conn.dialect, "k.name", "$1")})
        ORDER BY n.object_id""",
        list_param(conn.dialect, kinds),
    )
    return [analysed_node(r) for r in rows]


async def list_nodes_with(
    conn: Connection, kinds: Sequence[str], key: str, value: str | float | bool
) -> list[AnalysedNode]:
    """The nodes of the kinds whose property `key` is `value`."""
    condition = json_property_equals(conn.dialect, "n.properties", "$2", "$3")
    # The kinds first: SQLite tests the terms in the order written, and reading the JSON of
    # every node took 0.20 s (a computer's `smbsigning`) and 1.08 s (a user's
    # `samaccountname`) of the 1 GB collection's graph, against 0.04 and 0.24 s.
    rows = await conn.fetch(
        f"""SELECT {NODE_FIELDS} FROM nodes n WHERE n.id IN
            (SELECT nk.node_id FROM node_kinds nk JOIN kinds k ON k.id = nk.kind_id
            WHERE {in_list(conn.dialect, "k.name", "$1")}) AND {condition}
        ORDER BY n.object_id""",
        list_param(conn.dialect, kinds),
        key,
        json_value_param(conn.dialect, value),
    )
    return [analysed_node(r) for r in rows]


async def list_edges_of_kinds(
    conn: Connection, kinds: Sequence[str], collected_only: bool = False
) -> list[tuple[str, str, str]]:
    """(start, kind, end) object ids of every relationship of the kinds (not derived ones,
    if `collected_only`: those of the previous analysis are in the store while the next
    one runs)."""
    collected = "AND NOT x.derived" if collected_only else ""
    rows = await conn.fetch(
        f"""SELECT s.object_id, k.name, e.object_id FROM edges x JOIN kinds k ON k.id = x.kind_id
        JOIN nodes s ON s.id = x.start_id JOIN nodes e ON e.id = x.end_id
        WHERE {in_list(conn.dialect, "k.name", "$1")} {collected}""",
        list_param(conn.dialect, kinds),
    )
    return [(r[0], r[1], r[2]) for r in rows]


async def list_hosts(conn: Connection) -> list[tuple[str, bool, str]]:
    """(computer, whether it is enabled, enterprise CA) of every HostsCAService."""
    enabled = json_property_equals(conn.dialect, "s.properties", "$1", "$2")
    rows = await conn.fetch(
        f"""SELECT s.object_id, {enabled}, e.object_id FROM edges x
        JOIN nodes s ON s.id = x.start_id JOIN nodes e ON e.id = x.end_id
        WHERE x.kind_id = (SELECT id FROM kinds WHERE name = 'HostsCAService')
        ORDER BY s.object_id, e.object_id""",
        "enabled",
        json_value_param(conn.dialect, True),
    )
    return [(r[0], bool(r[1]), r[2]) for r in rows]


async def sync_raw_copies(
    conn: Connection,
    raw_kind: str,
    run_number: int,
    now: datetime,
    blocking_domains: Sequence[str] = (),
    exempt_starts: Sequence[str] = (),
) -> None:
    """Keep a derived copy (`RAW_COPIES[raw_kind]`, with its properties) of each `raw_kind`
    relationship, but of those into a computer, a gMSA or an MSA of a domain in
    `blocking_domains` (by the target's `domainsid`) from a start not in `exempt_starts`
    (object ids): copies whose raw relationship is gone, changed or now blocked are
    deleted, missing ones inserted, the others left as they are."""
    kind = RAW_COPIES[raw_kind]
    kind_id = (await ensure_kinds(conn, [kind]))[kind]
    blocking: list[Any] = []  # the parameters of `blocked(first)`, numbered from `first`
    if blocking_domains:
        blocking = [
            list_param(conn.dialect, blocking_domains),
            list_param(conn.dialect, exempt_starts),
            json_value_param(conn.dialect, True),
        ]

    def blocked(first: int) -> str:
        if not blocking_domains:
            return "false"
        domains, exempt, true = (f"${first + i}" for i in range(3))
        domain = f"upper({json_text(conn.dialect, 't.properties', 'domainsid')})"
        gmsa = json_property_equals(conn.dialect, "t.properties", "'gmsa'", true)
        msa = json_property_equals(conn.dialect, "t.properties", "'msa'", true)
        return f"""({in_list(conn.dialect, domain, domains)}
            AND (EXISTS (SELECT 1 FROM node_kinds nk JOIN kinds nkk ON nkk.id = nk.kind_id
                    WHERE nk.node_id = t.id AND nkk.name = 'Computer') OR {gmsa} OR {msa})
            AND NOT {in_list(conn.dialect, "s.object_id", exempt)})"""

    # The nodes are joined only where a domain blocks: a copy of every raw relationship
    # needs neither end.
    ends = "JOIN nodes t ON t.id = x.end_id JOIN nodes s ON s.id = x.start_id"
    ends = ends if blocking_domains else ""
    # IS TRUE: a property a node lacks tests as NULL, which must not block.
    await conn.execute(
        f"""DELETE FROM edges WHERE id IN (SELECT x.id FROM edges x {ends}
        WHERE x.derived = true AND x.kind_id = {kind_id} AND (
            NOT EXISTS (SELECT 1 FROM edges r WHERE r.end_id = x.end_id
                AND r.kind_id = (SELECT id FROM kinds WHERE name = $1)
                AND r.start_id = x.start_id AND r.properties = x.properties)
            OR ({blocked(2)}) IS TRUE))""",
        raw_kind,
        *blocking,
    )
    await conn.execute(
        f"""INSERT INTO edges (start_id, end_id, kind_id, properties, environment_id,
            run_number, updated_at, derived)
        SELECT x.start_id, x.end_id, {kind_id}, x.properties, x.environment_id, $2, $3, true
        FROM edges x {ends}
        WHERE x.kind_id = (SELECT id FROM kinds WHERE name = $1) AND ({blocked(4)}) IS NOT TRUE
        ON CONFLICT (end_id, kind_id, start_id) DO NOTHING""",
        raw_kind,
        run_number,
        now,
        *blocking,
    )


async def list_ids_ending_with(conn: Connection, suffixes: Sequence[str]) -> list[str]:
    """Object ids of the groups whose id ends with one of the suffixes."""
    condition = " OR ".join(f"object_id LIKE ${i + 1}" for i in range(len(suffixes)))
    rows = await conn.fetch(
        f"SELECT object_id FROM nodes WHERE label = 'Group' AND ({condition})",
        *(f"%{suffix}" for suffix in suffixes),
    )
    return [r[0] for r in rows]


async def find_analysed_nodes(conn: Connection, object_ids: Iterable[str]) -> list[AnalysedNode]:
    rows = await conn.fetch(
        f"SELECT {NODE_FIELDS} FROM nodes n WHERE {in_list(conn.dialect, 'n.object_id', '$1')}",
        list_param(conn.dialect, sorted(set(object_ids))),
    )
    return [analysed_node(r) for r in rows]


async def list_rights_into(
    conn: Connection, object_ids: Iterable[str], rights: Sequence[str]
) -> list[tuple[str, str, str, str]]:
    """(holder, holder's label, right, target) of every relationship of the `rights` kinds
    into the nodes (object ids)."""
    rows = await conn.fetch(
        f"""SELECT s.object_id, s.label, k.name, t.object_id FROM nodes t CROSS JOIN edges x
            CROSS JOIN nodes s CROSS JOIN kinds k
        WHERE {in_list(conn.dialect, "t.object_id", "$1")} AND x.end_id = t.id
            AND k.id = x.kind_id AND {in_list(conn.dialect, "k.name", "$2")}
            AND s.id = x.start_id""",
        list_param(conn.dialect, sorted(set(object_ids))),
        list_param(conn.dialect, rights),
    )
    return [(r[0], r[1], r[2], r[3]) for r in rows]
