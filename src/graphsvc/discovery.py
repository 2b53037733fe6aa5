"""Finding the ids the operations ask for, shared by the HTTP API and the CLI: nodes by name
or object id, the AD domains and Azure tenants data exists for, the SAML providers, the
collection clients and the schema extensions with their environment kinds."""

from __future__ import annotations

from graphsvc import service, wire
from graphsvc.errors import bad_request
from graphsvc.service import Page
from graphsvc.store import clients, extensions, graph, saml
from graphsvc.store.db import Connection

ENVIRONMENT_TYPES = {"Domain": "active-directory", "AZTenant": "azure"}


async def search(conn: Connection, q: str, kind: str | None, page: Page) -> wire.PagedSearchResults:
    text = q.strip()
    if not text:
        raise bad_request("query parameter q must name something to find", "q")
    if "\x00" in text:
        raise bad_request("query parameter q must not contain a NUL byte", "q")
    total, nodes = await graph.search_nodes(conn, text, kind, page.skip, page.limit)
    found = [
        wire.SearchResult(
            objectid=n.object_id,
            type=n.label,
            name=n.name,
            distinguishedname=str(n.properties.get("distinguishedname", "")),
            system_tags="",
        )
        for n in nodes
    ]
    return wire.PagedSearchResults(total, page.skip, page.limit, found)


async def list_available_domains(conn: Connection) -> wire.DomainSelectorList:
    return wire.DomainSelectorList(
        [
            wire.DomainSelector(ENVIRONMENT_TYPES[e.label], e.name, e.object_id, e.collected)
            for e in await graph.list_environment_nodes(conn)
        ]
    )


async def list_saml_providers(conn: Connection, base_url: str) -> wire.SamlProviderListResponse:
    providers = [
        (await service.get_saml_provider(conn, provider_id, base_url)).data
        for provider_id in await saml.list_provider_ids(conn)
    ]
    return wire.SamlProviderListResponse(wire.SamlProviderList(providers))


async def list_clients(conn: Connection, page: Page) -> wire.PagedClients:
    total, ids = await clients.list_client_ids(conn, page.skip, page.limit)
    found = [(await service.get_client(conn, client_id)).data for client_id in ids]
    return wire.PagedClients(total, page.skip, page.limit, found)


async def list_extensions(conn: Connection) -> wire.ExtensionList:
    return wire.ExtensionList(
        [
            wire.ExtensionInfo(
                x.id,
                x.name,
                x.display_name,
                x.version,
                x.is_builtin,
                [wire.EnvironmentKindInfo(*env) for env in x.environments],
            )
            for x in await extensions.list_extensions(conn)
        ]
    )
