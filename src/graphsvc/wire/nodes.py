"""Nodes of the graph as lists show them: search results, the AD domains and Azure tenants,
and the principals of an entity's list (DCOM rights)."""

from __future__ import annotations

import msgspec

from graphsvc.wire.common import Paged


class NodeListEntry(msgspec.Struct):
    objectID: str
    name: str
    label: str
    kinds: list[str]


class PagedNodeList(Paged[NodeListEntry]):
    pass


class SearchResult(msgspec.Struct):
    objectid: str
    type: str
    name: str
    distinguishedname: str
    system_tags: str


class PagedSearchResults(Paged[SearchResult]):
    pass


class DomainSelector(msgspec.Struct):
    """An environment data exists for: `type` is active-directory or azure."""

    type: str
    name: str
    id: str
    collected: bool


class DomainSelectorList(msgspec.Struct):
    data: list[DomainSelector]
