"""The five operations' shapes (spec section 2), and login, logout, health and readiness."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from graphsvc.wire.common import (
    UUID,
    ZERO_TIME,
    ZERO_UUID,
    Count,
    Int32,
    NullInt32,
    NullInt64,
    NullString,
    NullTime,
    NullUUID,
    null_int32,
    null_string,
    null_time,
    null_uuid,
)


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


class SamlProvider(msgspec.Struct):
    id: int
    created_at: datetime
    updated_at: datetime
    deleted_at: NullTime
    name: str
    display_name: str
    idp_issuer_uri: str
    idp_sso_uri: str
    principal_attribute_mappings: list[str]
    sp_issuer_uri: str
    sp_sso_uri: str
    sp_metadata_uri: str
    sp_acs_uri: str
    sso_provider_id: NullInt32


class OUReference(msgspec.Struct):
    objectid: str
    name: str
    distinguishedname: str
    type: str
    exists: bool


class DomainReference(msgspec.Struct):
    objectid: str
    name: str
    type: str
    exists: bool


class ClientEvent(msgspec.Struct):
    id: int
    client_id: UUID
    rrule: str
    session_collection: bool
    local_group_collection: bool
    ad_structure_collection: bool
    cert_services_collection: bool
    ca_registry_collection: bool
    dc_registry_collection: bool
    all_trusted_domains: bool
    ous: list[OUReference]
    domains: list[DomainReference]


class ClientToken(msgspec.Struct):
    id: UUID
    created_at: datetime
    updated_at: datetime
    deleted_at: NullTime
    user_id: NullUUID
    name: NullString
    key: str
    hmac_method: str
    last_access: datetime
    created_by: NullUUID


class DomainResult(msgspec.Struct):
    id: int
    created_at: datetime
    updated_at: datetime
    deleted_at: NullTime
    job_id: int
    domain_name: str
    success: bool
    message: str
    user_count: int
    group_count: int
    computer_count: int
    gpo_count: int
    ou_count: int
    container_count: int
    aiaca_count: int
    rootca_count: int
    enterpriseca_count: int
    ntauthstore_count: int
    certtemplate_count: int
    deleted_count: int


class Job(msgspec.Struct):
    id: int
    client_id: UUID
    client_name: str
    event_id: NullInt32
    execution_time: datetime
    start_time: datetime
    end_time: datetime
    status_message: str
    session_collection: bool
    local_group_collection: bool
    ad_structure_collection: bool
    cert_services_collection: bool
    ca_registry_collection: bool
    dc_registry_collection: bool
    all_trusted_domains: bool
    domain_controller: str
    ous: list[OUReference]
    domains: list[DomainReference]
    domain_results: list[DomainResult]


def zero_job() -> Job:
    """What a client without a current job or task shows: every field at its zero value."""
    return Job(
        0,
        ZERO_UUID,
        "",
        null_int32(None),
        ZERO_TIME,
        ZERO_TIME,
        ZERO_TIME,
        "",
        False,
        False,
        False,
        False,
        False,
        False,
        False,
        "",
        [],
        [],
        [],
    )


def zero_token() -> ClientToken:
    return ClientToken(
        ZERO_UUID,
        ZERO_TIME,
        ZERO_TIME,
        null_time(None),
        null_uuid(None),
        null_string(None),
        "",
        "",
        ZERO_TIME,
        null_uuid(None),
    )


class Client(msgspec.Struct):
    id: UUID
    name: str
    ip_address: str
    hostname: str
    configured_user: str
    last_checkin: datetime
    events: list[ClientEvent]
    token: ClientToken
    current_job_id: NullInt64
    current_task_id: NullInt64
    current_job: Job
    current_task: Job
    completed_job_count: int
    completed_task_count: int
    domain_controller: NullString
    version: str
    user_sid: NullString


class NodeListEntry(msgspec.Struct):
    objectID: str
    name: str
    label: str
    kinds: list[str]


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


class PagedNodeList(msgspec.Struct):
    count: Count
    skip: Count
    limit: Count
    data: list[NodeListEntry]


class SamlProviderResponse(msgspec.Struct):
    data: SamlProvider


class ClientResponse(msgspec.Struct):
    data: Client


class LoginRequest(msgspec.Struct, forbid_unknown_fields=False):
    login_method: str
    username: str
    secret: str


class LoginData(msgspec.Struct):
    user_id: UUID
    session_token: str
    auth_expired: bool


class LoginResponse(msgspec.Struct):
    data: LoginData


class LogoutData(msgspec.Struct):
    user_id: UUID
    session_revoked: bool


class LogoutResponse(msgspec.Struct):
    data: LogoutData


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
