"""Data-quality statistics: the aggregations per environment kind, an Azure tenant's and an
AD domain's records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graphsvc import wire
from graphsvc.errors import not_found
from graphsvc.store import data_quality
from graphsvc.store.db import Connection
from graphsvc.store.paging import Page, SortKey, Window


async def list_aggregations(
    conn: Connection,
    environment_kind_id: int,
    extension_id: int | None,
    window: Window,
    sort: Sequence[SortKey],
    page: Page,
) -> wire.PagedAggregations:
    found = await data_quality.list_aggregations(
        conn,
        environment_kind_id,
        extension_id,
        window.start,
        window.end,
        sort,
        page.skip,
        page.limit,
    )
    if found is None:
        raise not_found(f"schema extension {extension_id} does not exist", "schema_extension_id")
    count, rows = found
    if window.ends_now:
        window.note_records(
            *await data_quality.aggregation_times(
                conn, environment_kind_id, extension_id, window.start, window.end
            )
        )
    return wire.PagedAggregations(count, page.skip, page.limit, window.start, window.end, rows)


async def list_tenant_stats(
    conn: Connection, tenant_id: str, window: Window, sort: Sequence[SortKey], page: Page
) -> wire.PagedTenantStats:
    count, rows = await list_records(
        conn,
        data_quality.TENANT_STATS,
        ("Azure tenant", "tenant_id", tenant_id),
        window,
        sort,
        page,
    )
    return wire.PagedTenantStats(count, page.skip, page.limit, window.start, window.end, rows)


async def list_domain_stats(
    conn: Connection, domain_sid: str, window: Window, sort: Sequence[SortKey], page: Page
) -> wire.PagedDomainStats:
    count, rows = await list_records(
        conn, data_quality.DOMAIN_STATS, ("AD domain", "domain_id", domain_sid), window, sort, page
    )
    return wire.PagedDomainStats(count, page.skip, page.limit, window.start, window.end, rows)


async def list_records(
    conn: Connection,
    stats: data_quality.StatsTable,
    asked: tuple[str, str, str],
    window: Window,
    sort: Sequence[SortKey],
    page: Page,
) -> tuple[int, list[Any]]:
    """One page of an environment's records; a tenant or domain never seen is a 404 (one
    with no record in the window answers an empty page). `asked`: the environment's noun,
    the path parameter and its value."""
    noun, parameter, environment_id = asked
    count, rows = await data_quality.list_stats_records(
        conn, stats, environment_id, window.start, window.end, sort, page.skip, page.limit
    )
    if count == 0 and not await data_quality.environment_known(conn, stats, environment_id):
        raise not_found(f"no {noun} {environment_id} is known", parameter)
    if window.ends_now:
        window.note_records(
            *await data_quality.stats_record_times(
                conn, stats, environment_id, window.start, window.end
            )
        )
    return count, rows
