"""Data-quality statistics: the aggregations per environment kind, and an Azure tenant's and
an AD domain's counts per run."""

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


class ADDomainStats(msgspec.Struct):
    """The reference's AD data-quality record (its `sites*` counts are not collected here)."""

    id: int
    created_at: datetime
    updated_at: datetime
    deleted_at: NullTime
    domain_sid: str
    users: int
    groups: int
    computers: int
    ous: int
    containers: int
    gpos: int
    aiacas: int
    rootcas: int
    enterprisecas: int
    ntauthstores: int
    certtemplates: int
    issuancepolicies: int
    acls: int
    sessions: int
    relationships: int
    session_completeness: float
    local_group_completeness: float
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


class PagedDomainStats(msgspec.Struct):
    count: Count
    skip: Count
    limit: Count
    start: datetime
    end: datetime
    data: list[ADDomainStats]
