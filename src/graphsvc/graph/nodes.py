"""Nodes: found by name or object id, and the AD domains and Azure tenants data exists for."""

from __future__ import annotations

from graphsvc import wire
from graphsvc.errors import bad_request
from graphsvc.store import nodes
from graphsvc.store.db import Connection
from graphsvc.store.paging import Page
from graphsvc.store.tags import system_tags

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
            system_tags=system_tags(n.is_tier_zero, n.is_owned),
            kinds=n.kinds,
            isTierZero=n.is_tier_zero,
            isOwnedObject=n.is_owned,
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
