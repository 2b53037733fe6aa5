"""The analysis's routes: the pipeline's status (`GET /api/v2/datapipe/status`)."""

from __future__ import annotations

from datetime import datetime

import msgspec


class DatapipeStatus(msgspec.Struct):
    """What the pipeline does (idle or ingesting) and when the analysis last ran; a time
    never reached is 0001-01-01T00:00:00Z, as the reference writes it."""

    status: str
    updated_at: datetime
    last_complete_analysis_at: datetime
    last_analysis_run_at: datetime


class DatapipeStatusResponse(msgspec.Struct):
    data: DatapipeStatus
