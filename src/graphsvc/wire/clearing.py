"""Clearing the database (`POST /api/v2/clear-database`) and the source kinds it names."""

from __future__ import annotations

import msgspec


class ClearDatabaseRequest(msgspec.Struct, forbid_unknown_fields=True):
    """What to delete, as the reference names it; at least one part."""

    deleteCollectedGraphData: bool = False
    deleteSourceKinds: list[int] = msgspec.field(default_factory=list)
    deleteRelationships: list[str] = msgspec.field(default_factory=list)
    deleteFileIngestHistory: bool = False
    deleteDataQualityHistory: bool = False
    deleteAssetGroupSelectors: list[int] = msgspec.field(default_factory=list)


class SourceKind(msgspec.Struct):
    id: int
    name: str


class SourceKindList(msgspec.Struct):
    kinds: list[SourceKind]


class SourceKindListResponse(msgspec.Struct):
    data: SourceKindList
