"""Clearing the database (`POST /api/v2/clear-database`) and the source kinds it names; the
pipeline's status (`GET /api/v2/datapipe/status`)."""

from __future__ import annotations

from datetime import datetime

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


class DatapipeStatus(msgspec.Struct):
    """What the pipeline does (idle or ingesting) and when the analysis last ran; a time
    never reached is 0001-01-01T00:00:00Z, as the reference writes it."""

    status: str
    updated_at: datetime
    last_complete_analysis_at: datetime
    last_analysis_run_at: datetime


class DatapipeStatusResponse(msgspec.Struct):
    data: DatapipeStatus
