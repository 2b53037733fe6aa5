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


class Holding(msgspec.Struct):
    """A relationship by which a listed node is in the list: its kind, and the group it
    comes through (null: the node itself holds it, or the entity itself for a list of what
    the entity holds)."""

    kind: str
    through: NodeListEntry | None


class RelatedNode(NodeListEntry):
    """A node of an entity's list, with how it is in it: `holds` lists the rights a principal
    holds on the entity (or the entity on it) and the groups they come through, for the
    lists of rights and of one hop; it is empty for memberships, chains and a domain's
    objects."""

    holds: list[Holding]


class PagedRelatedNodeList(Paged[RelatedNode]):
    pass


class SearchResult(msgspec.Struct):
    objectid: str
    type: str
    name: str
    distinguishedname: str
    system_tags: str  # admin_tier_0 and owned, space-separated, as it is in each
    kinds: list[str]  # its kinds, then its tags' labels (Tag_Tier_Zero, Tag_Owned...)
    isTierZero: bool
    isOwnedObject: bool


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
