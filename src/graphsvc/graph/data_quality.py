"""Data-quality statistics: the aggregations per environment kind, an Azure tenant's days."""

from __future__ import annotations

from collections.abc import Sequence

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
    return wire.PagedAggregations(count, page.skip, page.limit, window.start, window.end, rows)


async def list_tenant_stats(
    conn: Connection, tenant_id: str, window: Window, sort: Sequence[SortKey], page: Page
) -> wire.PagedTenantStats:
    count, rows = await data_quality.list_tenant_stats(
        conn, tenant_id, window.start, window.end, sort, page.skip, page.limit
    )
    if count == 0 and not await data_quality.tenant_known(conn, tenant_id):
        raise not_found(f"no Azure tenant {tenant_id} is known", "tenant_id")
    return wire.PagedTenantStats(count, page.skip, page.limit, window.start, window.end, rows)
