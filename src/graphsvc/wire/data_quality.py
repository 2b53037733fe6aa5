"""Data-quality statistics: the aggregations per environment kind and an Azure tenant's
daily counts."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from graphsvc.wire.common import UUID, Count, Int32, NullTime


class DataQualityAggregation(msgspec.Struct):
    id: Int32
    created_at: datetime
    updated_at: datetime
    deleted_at: NullTime
    run_id: str
    extension_id: Int32
    environment_kind_id: Int32
    metric_type: Literal["node", "relationship"]
    metric_name: str
    metric_value: float
    kind_id: Int32 | None


class AzureTenantStats(msgspec.Struct):
    id: int
    created_at: datetime
    updated_at: datetime
    deleted_at: NullTime
    tenantid: UUID
    users: int
    groups: int
    apps: int
    service_principals: int
    devices: int
    management_groups: int
    subscriptions: int
    resource_groups: int
    vms: int
    key_vaults: int
    relationships: int
    run_id: UUID


class PagedAggregations(msgspec.Struct):
    count: Count
    skip: Count
    limit: Count
    start: datetime
    end: datetime
    data: list[DataQualityAggregation]


class PagedTenantStats(msgspec.Struct):
    count: Count
    skip: Count
    limit: Count
    start: datetime
    end: datetime
    data: list[AzureTenantStats]
