"""Health and readiness answers."""

from __future__ import annotations

from typing import Literal

import msgspec


class HealthData(msgspec.Struct):
    status: str
    database: str


class HealthResponse(msgspec.Struct):
    data: HealthData


class ReadyData(msgspec.Struct):
    status: str
    database: str
    redis: Literal["ok", "unreachable", "none"]


class ReadyResponse(msgspec.Struct):
    data: ReadyData
