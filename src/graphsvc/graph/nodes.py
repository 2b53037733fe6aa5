"""Nodes: found by name or object id, the AD domains and Azure tenants data exists for, and
the principals with DCOM rights on a computer."""

from __future__ import annotations

from collections.abc import Sequence

from graphsvc import wire
from graphsvc.errors import bad_request, not_found
from graphsvc.store import nodes
from graphsvc.store.db import Connection
from graphsvc.store.paging import Page, SortKey

ENVIRONMENT_TYPES = {"Domain": "active-directory", "AZTenant": "azure"}


async def search(conn: Connection, q: str, kind: str | None, page: Page) -> wire.PagedSearchResults:
    text = q.strip()
    if not text:
        raise bad_request("query parameter q must name something to find", "q")
    if "\x00" in text:
        raise bad_request("query parameter q must not contain a NUL byte", "q")
    total, found = await nodes.search_nodes(conn, text, kind, page.skip, page.limit)
    results = [
        wire.SearchResult(
            objectid=n.object_id,
            type=n.label,
            name=n.name,
            distinguishedname=str(n.properties.get("distinguishedname", "")),
            system_tags="",
        )
        for n in found
    ]
    return wire.PagedSearchResults(total, page.skip, page.limit, results)


async def list_available_domains(conn: Connection) -> wire.DomainSelectorList:
    return wire.DomainSelectorList(
        [
            wire.DomainSelector(ENVIRONMENT_TYPES[e.label], e.name, e.object_id, e.collected)
            for e in await nodes.list_environment_nodes(conn)
        ]
    )


async def list_dcom_rights(
    conn: Connection, object_id: str, sort: Sequence[SortKey], page: Page
) -> wire.PagedNodeList:
    target = await nodes.find_dcom_target(conn, object_id)
    if target is None:
        raise not_found(
            f"no computer with object id {object_id!r}; object ids are SIDs (S-1-5-21-...): "
            f"find one by name with GET /api/v2/search?q=NAME&type=Computer "
            f"or `graphsvc find NAME --kind Computer`",
            "object_id",
        )
    count, rows = await nodes.list_dcom_holders(conn, target, sort, page.skip, page.limit)
    return wire.PagedNodeList(count, page.skip, page.limit, rows)
