"""Saved queries (the reference's `saved-queries` routes): a query with its owner and its
scope to the caller, who it is shared with, and what an import kept and refused."""

from __future__ import annotations

from datetime import datetime

import msgspec

from graphsvc.wire.common import UUID, Int64, NullTime, Paged


class SavedQuery(msgspec.Struct):
    id: Int64
    user_id: UUID  # its owner
    name: str
    query: str
    description: str
    scope: str  # to the caller: owned, shared (with the caller) or public
    created_at: datetime
    updated_at: datetime
    deleted_at: NullTime


class SavedQueryResponse(msgspec.Struct):
    data: SavedQuery


class PagedSavedQueries(Paged[SavedQuery]):
    pass


class SavedQueryRequest(msgspec.Struct, forbid_unknown_fields=True):
    """A query to save, or (an update) the fields to change: an empty field is kept."""

    name: str = ""
    query: str = ""
    description: str = ""


class SavedQueryPermissions(msgspec.Struct):
    query_id: Int64
    public: bool
    shared_to_user_ids: list[UUID]


class SavedQueryPermissionsResponse(msgspec.Struct):
    data: SavedQueryPermissions


class ShareRequest(msgspec.Struct, forbid_unknown_fields=True):
    """Make a query public, private (public false and no users), or share it with users."""

    user_ids: list[UUID] = msgspec.field(default_factory=list)
    public: bool = False


class UnshareRequest(msgspec.Struct, forbid_unknown_fields=True):
    user_ids: list[UUID]


class TransferableQuery(msgspec.Struct):
    """A query as the reference exports and imports it."""

    name: str
    query: str
    description: str


class ImportRefusal(msgspec.Struct):
    source: str  # the zip entry, or "body", with the entry's place in it ("queries.json #3")
    name: str  # the entry's name, "" when it has none
    reason: str


class SavedQueryImport(msgspec.Struct):
    imported: list[SavedQuery]
    refused: list[ImportRefusal]


class SavedQueryImportResponse(msgspec.Struct):
    data: SavedQueryImport
