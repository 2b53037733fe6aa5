"""Data-quality statistics: aggregation rows per environment kind, Azure tenant and AD
domain records, and the per-run counts they are computed from."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graphsvc import wire
from graphsvc.store.db import Connection, Row
from graphsvc.store.dialect import (
    computed_time,
    in_list,
    json_number,
    json_property_equals,
    json_text,
    json_value_param,
    list_param,
)
from graphsvc.store.graph import EACH_KIND
from graphsvc.store.paging import SortKey, fetch_page, order_clause

AGGREGATION_COLUMNS = """id, created_at, updated_at, deleted_at, run_id, extension_id,
    environment_kind_id, metric_type, metric_name, metric_value, kind_id"""
TIME_SORT_COLUMNS = {"created_at": "created_at", "updated_at": "updated_at"}


def aggregation_from_row(row: Row) -> wire.DataQualityAggregation:
    (
        aggregation_id,
        created_at,
        updated_at,
        deleted_at,
        run_id,
        extension_id,
        environment_kind_id,
        metric_type,
        metric_name,
        metric_value,
        kind_id,
    ) = row
    return wire.DataQualityAggregation(
        aggregation_id,
        created_at,
        updated_at,
        wire.null_time(deleted_at),
        run_id,
        extension_id,
        environment_kind_id,
        metric_type,
        metric_name,
        float(metric_value),
        kind_id,
    )


async def list_aggregations(
    conn: Connection,
    environment_kind_id: int,
    extension_id: int | None,
    start: datetime,
    end: datetime,
    sort: Sequence[SortKey],
    skip: int,
    limit: int,
) -> tuple[int, list[wire.DataQualityAggregation]] | None:
    """One page and the window's total; None when `extension_id` names no (live) schema
    extension."""
    args: list[Any] = [environment_kind_id, start, end]
    extension_filter = ""
    extension_known = "1"
    if extension_id is not None:
        args.append(extension_id)
        extension_filter = "AND extension_id = $4"
        # Asked with the total: one round trip fewer than a statement of its own.
        extension_known = "(SELECT 1 FROM schema_extensions WHERE id = $4 AND deleted_at IS NULL)"
    window = f"""WHERE environment_kind_id = $1 AND created_at >= $2 AND created_at <= $3
        {extension_filter}"""
    # The total adds the count each run's batch was stored with: counting the rows of a
    # long window visited every index entry (57,600 rows: 100 req/s on SQLite).
    ((total, known),) = await conn.fetch(
        f"""SELECT (SELECT coalesce(sum(row_count), 0) FROM aggregation_batches {window}),
            {extension_known}""",
        *args,
    )
    if known is None:
        return None
    n = len(args)
    rows = await conn.fetch(
        f"""SELECT {AGGREGATION_COLUMNS} FROM data_quality_aggregations {window}
            AND deleted_at IS NULL
        ORDER BY {order_clause(sort, TIME_SORT_COLUMNS, "id DESC")}
        LIMIT ${n + 1} OFFSET ${n + 2}""",
        *args,
        limit,
        skip,
    )
    return int(total), [aggregation_from_row(r) for r in rows]


async def aggregation_times(
    conn: Connection,
    environment_kind_id: int,
    extension_id: int | None,
    start: datetime,
    end: datetime,
) -> tuple[datetime | None, datetime | None]:
    """The earliest creation time of the aggregations `list_aggregations` reads in the
    window, and the earliest after it."""
    args: list[Any] = [environment_kind_id, start, end]
    rows = "environment_kind_id = $1 AND deleted_at IS NULL"
    if extension_id is not None:
        args.append(extension_id)
        rows += " AND extension_id = $4"
    return await first_times(conn, "data_quality_aggregations", rows, args)


async def first_times(
    conn: Connection, table: str, rows: str, args: Sequence[Any]
) -> tuple[datetime | None, datetime | None]:
    """The earliest creation time among `rows` of `table` from $2 to $3, and the earliest
    after $3; each read from the window's index (two index probes, no scan)."""
    found = await conn.fetchrow(
        f"""SELECT
            (SELECT min(created_at) FROM {table}
                WHERE {rows} AND created_at >= $2 AND created_at <= $3),
            (SELECT min(created_at) FROM {table} WHERE {rows} AND created_at > $3)""",
        *args,
    )
    assert found is not None
    return computed_time(found[0]), computed_time(found[1])


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
    conn: Connection, rows: Sequence[AggregationRow], created_at: datetime
) -> None:
    """Store a run's aggregation rows, and the count of each (kind, extension) batch."""
    batches = Counter((r.run_id, r.environment_kind_id, r.extension_id) for r in rows)
    await insert_batch_counts(conn, batches, created_at)
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


async def insert_batch_counts(
    conn: Connection, batches: Counter[tuple[str, int, int]], created_at: datetime
) -> None:
    await conn.executemany(
        """INSERT INTO aggregation_batches
            (run_id, environment_kind_id, extension_id, created_at, row_count)
        VALUES ($1, $2, $3, $4, $5)""",
        [(run, kind, extension, created_at, n) for (run, kind, extension), n in batches.items()],
    )


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
DOMAIN_COUNT_FIELDS = (
    "users",
    "groups",
    "computers",
    "ous",
    "containers",
    "gpos",
    "aiacas",
    "rootcas",
    "enterprisecas",
    "ntauthstores",
    "certtemplates",
    "issuancepolicies",
    "acls",
    "sessions",
    "relationships",
)
DOMAIN_RATIO_FIELDS = ("session_completeness", "local_group_completeness")


@dataclass(frozen=True)
class StatsTable:
    """One environment kind's record per run: its table, its id column, its node label and
    its value columns in the wire struct's order."""

    table: str
    id_column: str
    label: str
    values: tuple[str, ...]
    record: Callable[..., Any]


TENANT_STATS = StatsTable(
    "azure_tenant_stats", "tenant_id", "AZTenant", TENANT_COUNT_FIELDS, wire.AzureTenantStats
)
DOMAIN_STATS = StatsTable(
    "ad_domain_stats",
    "domain_sid",
    "Domain",
    DOMAIN_COUNT_FIELDS + DOMAIN_RATIO_FIELDS,
    wire.ADDomainStats,
)


async def environment_known(conn: Connection, stats: StatsTable, environment_id: str) -> bool:
    """An environment is known when it has its node or any stats row, deleted or not."""
    found = await conn.fetchval(
        f"""SELECT 1 FROM {stats.table} WHERE {stats.id_column} = $1
        UNION ALL
        SELECT 1 FROM nodes WHERE object_id = $1 AND label = $2
        LIMIT 1""",
        environment_id.upper(),
        stats.label,
    )
    return found is not None


async def list_stats_records(
    conn: Connection,
    stats: StatsTable,
    environment_id: str,
    start: datetime,
    end: datetime,
    sort: Sequence[SortKey],
    skip: int,
    limit: int,
) -> tuple[int, list[Any]]:
    window = f"""FROM {stats.table} WHERE {stats.id_column} = $1 AND created_at >= $2
        AND created_at <= $3 AND deleted_at IS NULL"""
    # As for the aggregations: a scalar count, not count(*) OVER (), which reads every row
    # of the window before the page.
    sql = f"""SELECT id, created_at, updated_at, deleted_at, {stats.id_column},
            {", ".join(stats.values)}, run_id, (SELECT count(*) {window}) {window}
        ORDER BY {order_clause(sort, TIME_SORT_COLUMNS, "id DESC")}"""
    total, rows = await fetch_page(conn, sql, [environment_id.upper(), start, end], skip, limit)
    # Positional: the columns are selected in the struct's field order (a keyword dict per
    # row was a quarter of the request's time in the profile).
    return total, [
        stats.record(
            stats_id, created, updated, wire.null_time(deleted), environment, *values_and_run_id
        )
        for stats_id, created, updated, deleted, environment, *values_and_run_id, _total in rows
    ]


async def stats_record_times(
    conn: Connection, stats: StatsTable, environment_id: str, start: datetime, end: datetime
) -> tuple[datetime | None, datetime | None]:
    """The earliest creation time of the records `list_stats_records` reads in the window,
    and the earliest after it."""
    rows = f"{stats.id_column} = $1 AND deleted_at IS NULL"
    return await first_times(conn, stats.table, rows, [environment_id.upper(), start, end])


async def insert_stats_record(
    conn: Connection,
    stats: StatsTable,
    environment_id: str,
    values: Mapping[str, float],
    run_id: str,
    created_at: datetime,
) -> None:
    columns = ", ".join(stats.values)
    placeholders = ", ".join(f"${i}" for i in range(4, 4 + len(stats.values)))
    await conn.execute(
        f"""INSERT INTO {stats.table} ({stats.id_column}, run_id, created_at, updated_at,
            {columns}) VALUES ($1, $2, $3, $3, {placeholders})""",
        environment_id.upper(),
        run_id,
        created_at,
        *(values[v] for v in stats.values),
    )


# A user or computer counts towards completeness if it is enabled and logged on within this
# long of the domain's latest logon (the reference's window, in seconds).
COMPLETENESS_WINDOW_SECONDS = 14 * 24 * 3600


async def measure_completeness(
    conn: Connection, run_number: int, domain_sid: str, label: str, kinds: Sequence[str]
) -> float:
    """The share of the enabled users (or Windows computers) a run collected in a domain,
    logged on within COMPLETENESS_WINDOW_SECONDS of the latest of them, that the graph shows
    with at least one inbound edge of these kinds (sessions; local group rights); 0 when
    none qualifies."""
    dialect = conn.dialect
    enabled = json_property_equals(dialect, "n.properties", "$3", "$4")
    logon = json_number(dialect, "n.properties", "lastlogontimestamp")
    windows = (
        f"AND lower({json_text(dialect, 'n.properties', 'operatingsystem')}) LIKE '%windows%'"
        if label == "Computer"
        else ""
    )
    ((qualified, reached),) = await conn.fetch(
        f"""WITH candidates AS (
            SELECT n.id, {logon} AS logon FROM nodes n
            WHERE n.run_number = $1 AND n.environment_id = $2 AND n.label = $5 AND {enabled}
                {windows}),
        latest AS (SELECT max(logon) AS logon FROM candidates)
        SELECT count(*), coalesce(sum(CASE WHEN EXISTS (
                SELECT 1 FROM edges x JOIN kinds k ON k.id = x.kind_id
                WHERE x.end_id = c.id AND {in_list(dialect, "k.name", "$6")}) THEN 1 ELSE 0 END),
            0)
        FROM candidates c CROSS JOIN latest l
        WHERE c.logon IS NOT NULL AND c.logon >= l.logon - {COMPLETENESS_WINDOW_SECONDS}""",
        run_number,
        domain_sid,
        "enabled",
        json_value_param(dialect, True),
        label,
        list_param(dialect, kinds),
    )
    return int(reached) / int(qualified) if qualified else 0.0


async def fill_edge_environments(conn: Connection, run_number: int) -> None:
    """Edges whose record named no environment take their end node's, else their start's."""
    await conn.execute(
        f"""UPDATE edges SET environment_id = COALESCE(
            (SELECT n.environment_id FROM nodes n WHERE n.id = edges.end_id),
            (SELECT n.environment_id FROM nodes n WHERE n.id = edges.start_id))
        WHERE {EACH_KIND} AND derived IN (false, true) AND run_number = $1
            AND environment_id IS NULL""",
        run_number,
    )


@dataclass
class RunCount:
    environment_id: str
    kind_id: int
    kind_name: str
    count: int


async def run_counts(conn: Connection, run_number: int) -> tuple[list[RunCount], list[RunCount]]:
    """Per environment and kind: the nodes a run collected, and the edges it produced."""
    nodes = await conn.fetch(
        """SELECT n.environment_id, k.id, k.name, count(*) FROM nodes n
        JOIN node_kinds nk ON nk.node_id = n.id JOIN kinds k ON k.id = nk.kind_id
        WHERE n.run_number = $1 AND n.environment_id IS NOT NULL
        GROUP BY n.environment_id, k.id, k.name""",
        run_number,
    )
    edges = await conn.fetch(
        # Counted on the edges alone, then named: 0.25 s on a 96 MB ingest (SQLite), where
        # grouping after the join took 0.33 s; the index by kind, flag, run and environment
        # (EACH_KIND) holds all it counts.
        # The derived ones count in every run, whichever first derived them: each run's
        # analysis derives them again from the whole graph, and keeps those it finds
        # stored (store/analysis.replace_derived_edges).
        f"""SELECT c.environment_id, k.id, k.name, c.count FROM (
            SELECT environment_id, kind_id, count(*) AS count FROM edges
            WHERE {EACH_KIND} AND derived = false AND run_number = $1
                AND environment_id IS NOT NULL
            GROUP BY environment_id, kind_id
          UNION ALL
            SELECT environment_id, kind_id, count(*) AS count FROM edges
            WHERE {EACH_KIND} AND derived = true AND environment_id IS NOT NULL
            GROUP BY environment_id, kind_id) AS c
        JOIN kinds k ON k.id = c.kind_id""",
        run_number,
    )
    return (
        [RunCount(a, b, c, int(count)) for a, b, c, count in nodes],
        [RunCount(a, b, c, int(count)) for a, b, c, count in edges],
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
        [
            (
                r.run_id,
                r.extension_id,
                r.environment_kind_id,
                env,
                r.metric_type,
                r.metric_name,
                r.metric_value,
                r.kind_id,
                created_at,
            )
            for r, env in rows
        ],
    )
