"""Finding ids: search results, available domains, the lists, schema extensions."""

from __future__ import annotations

import msgspec

from graphsvc.wire.common import Count
from graphsvc.wire.operations import Client, SamlProvider


class SearchResult(msgspec.Struct):
    objectid: str
    type: str
    name: str
    distinguishedname: str
    system_tags: str


class PagedSearchResults(msgspec.Struct):
    count: Count
    skip: Count
    limit: Count
    data: list[SearchResult]


class DomainSelector(msgspec.Struct):
    """An environment data exists for: `type` is active-directory or azure."""

    type: str
    name: str
    id: str
    collected: bool


class DomainSelectorList(msgspec.Struct):
    data: list[DomainSelector]


class SamlProviderList(msgspec.Struct):
    saml_providers: list[SamlProvider]


class SamlProviderListResponse(msgspec.Struct):
    data: SamlProviderList


class PagedClients(msgspec.Struct):
    count: Count
    skip: Count
    limit: Count
    data: list[Client]


class EnvironmentKindInfo(msgspec.Struct):
    id: int
    name: str
    source_kind: str | None


class ExtensionInfo(msgspec.Struct):
    """A schema extension, with the environment kind ids the aggregations ask for."""

    id: int
    name: str
    display_name: str
    version: str
    is_builtin: bool
    environment_kinds: list[EnvironmentKindInfo]


class ExtensionList(msgspec.Struct):
    data: list[ExtensionInfo]


class EnvironmentKindDefinition(msgspec.Struct):
    kind: str
    source_kind: str | None = None


class ExtensionDefinition(msgspec.Struct, forbid_unknown_fields=True):
    """An OpenGraph schema extension as `graphsvc schema register` reads it."""

    name: str
    display_name: str
    version: str
    node_kinds: list[str]
    relationship_kinds: list[str]
    environment_kinds: list[EnvironmentKindDefinition]
