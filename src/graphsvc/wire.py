"""Wire shapes of spec section 2: msgspec structs that the store fills and the app encodes.

The OpenAPI document's component schemas are generated from these same structs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

UUID = Annotated[str, Meta(extra_json_schema={"format": "uuid"})]
Int32 = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1, extra_json_schema={"format": "int32"})]
Int64 = Annotated[int, Meta(extra_json_schema={"format": "int64"})]
Count = Annotated[int, Meta(ge=0)]

ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
ZERO_UUID = "00000000-0000-0000-0000-000000000000"
MASKED_KEY = "********"  # where a token's key would be: it is shown once, at creation


class NullTime(msgspec.Struct):
    time: datetime
    valid: bool


class NullInt32(msgspec.Struct):
    int32: Int32
    valid: bool


class NullInt64(msgspec.Struct):
    int64: Int64
    valid: bool


class NullUUID(msgspec.Struct):
    uuid: UUID
    valid: bool


class NullString(msgspec.Struct):
    string: str
    valid: bool


def null_time(value: datetime | None) -> NullTime:
    return NullTime(ZERO_TIME, False) if value is None else NullTime(value, True)


def null_int32(value: int | None) -> NullInt32:
    return NullInt32(0, False) if value is None else NullInt32(value, True)


def null_int64(value: int | None) -> NullInt64:
    return NullInt64(0, False) if value is None else NullInt64(value, True)


def null_uuid(value: str | None) -> NullUUID:
    return NullUUID(ZERO_UUID, False) if value is None else NullUUID(value, True)


def null_string(value: str | None) -> NullString:
    return NullString("", False) if value is None else NullString(value, True)


class ErrorDetail(msgspec.Struct):
    context: str
    message: str


class ErrorBody(msgspec.Struct):
    http_status: Annotated[int, Meta(ge=100, le=600)]
    timestamp: datetime
    request_id: UUID
    errors: list[ErrorDetail]


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


class AuthToken(msgspec.Struct):
    """An API token of a user; `key` holds the key once, in the answer that creates it, and
    the mask everywhere else."""

    id: UUID
    created_at: datetime
    updated_at: datetime
    deleted_at: NullTime
    user_id: NullUUID
    name: NullString
    key: str
    hmac_method: str
    last_access: datetime
    expires_at: NullTime


class AuthTokenResponse(msgspec.Struct):
    data: AuthToken


class AuthTokenList(msgspec.Struct):
    tokens: list[AuthToken]


class AuthTokenListResponse(msgspec.Struct):
    data: AuthTokenList


class CreateTokenRequest(msgspec.Struct, forbid_unknown_fields=True):
    """POST /api/v2/tokens; both fields as the reference server names them, plus an expiry:
    a time, or a lifetime in seconds."""

    token_name: str = ""
    user_id: UUID | None = None
    expires_at: datetime | None = None
    lifetime_seconds: Annotated[int, Meta(ge=60, le=10 * 366 * 86400)] | None = None


class Permission(msgspec.Struct):
    authority: str
    name: str


class Role(msgspec.Struct):
    id: int
    name: str
    permissions: list[Permission]


class Requester(msgspec.Struct):
    """Who is calling: the user, its role and permissions, and for a signed request the
    token (None for a session)."""

    id: UUID
    principal_name: str
    is_disabled: bool
    roles: list[Role]
    created_at: datetime
    token: AuthToken | None


class User(msgspec.Struct):
    id: UUID
    principal_name: str
    is_disabled: bool
    roles: list[Role]
    created_at: datetime


class UserResponse(msgspec.Struct):
    data: User


class UserList(msgspec.Struct):
    users: list[User]


class UserListResponse(msgspec.Struct):
    data: UserList


class UserUpdate(msgspec.Struct):
    """PATCH /api/v2/bloodhound-users/{user_id}: the reference's fields; graphsvc acts on
    these two (its users have a name, a role and a secret, nothing else)."""

    is_disabled: bool | None = None
    roles: list[int] | None = None


class UserSecret(msgspec.Struct):
    secret: str
    needs_password_reset: bool = False


class SelfResponse(msgspec.Struct):
    data: Requester


class SearchResult(msgspec.Struct):
    objectid: str
    type: str
    name: str
    distinguishedname: str
    system_tags: str


class PagedSearchResults(msgspec.Struct):
    count: Count
    skip: Count
    limit: Count
    data: list[SearchResult]


class DomainSelector(msgspec.Struct):
    """An environment data exists for: `type` is active-directory or azure."""

    type: str
    name: str
    id: str
    collected: bool


class DomainSelectorList(msgspec.Struct):
    data: list[DomainSelector]


class SamlProviderList(msgspec.Struct):
    saml_providers: list[SamlProvider]


class SamlProviderListResponse(msgspec.Struct):
    data: SamlProviderList


class PagedClients(msgspec.Struct):
    count: Count
    skip: Count
    limit: Count
    data: list[Client]


class EnvironmentKindInfo(msgspec.Struct):
    id: int
    name: str
    source_kind: str | None


class ExtensionInfo(msgspec.Struct):
    """A schema extension, with the environment kind ids the aggregations ask for."""

    id: int
    name: str
    display_name: str
    version: str
    is_builtin: bool
    environment_kinds: list[EnvironmentKindInfo]


class ExtensionList(msgspec.Struct):
    data: list[ExtensionInfo]


class EnvironmentKindDefinition(msgspec.Struct):
    kind: str
    source_kind: str | None = None


class ExtensionDefinition(msgspec.Struct, forbid_unknown_fields=True):
    """An OpenGraph schema extension as `graphsvc schema register` reads it."""

    name: str
    display_name: str
    version: str
    node_kinds: list[str]
    relationship_kinds: list[str]
    environment_kinds: list[EnvironmentKindDefinition]
