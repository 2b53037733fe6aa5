"""Collection clients (Enterprise edition): their scheduled events, jobs and token."""

from __future__ import annotations

from datetime import datetime

import msgspec

from graphsvc.wire.accounts import TokenFields
from graphsvc.wire.common import (
    UUID,
    ZERO_TIME,
    ZERO_UUID,
    NullInt32,
    NullInt64,
    NullString,
    NullTime,
    NullUUID,
    Paged,
    null_int32,
    null_string,
    null_time,
    null_uuid,
)

# What a scheduled event or a job collects: the same seven flags in both (a test holds
# ClientEvent and Job to this list), and the columns the store keeps them in.
COLLECTION_FLAGS = (
    "session_collection",
    "local_group_collection",
    "ad_structure_collection",
    "cert_services_collection",
    "ca_registry_collection",
    "dc_registry_collection",
    "all_trusted_domains",
)


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


class ClientToken(TokenFields):  # a collection client's token, its key masked
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
        id=0,
        client_id=ZERO_UUID,
        client_name="",
        event_id=null_int32(None),
        execution_time=ZERO_TIME,
        start_time=ZERO_TIME,
        end_time=ZERO_TIME,
        status_message="",
        domain_controller="",
        ous=[],
        domains=[],
        domain_results=[],
        **dict.fromkeys(COLLECTION_FLAGS, False),
    )


def zero_token() -> ClientToken:
    return ClientToken(
        id=ZERO_UUID,
        created_at=ZERO_TIME,
        updated_at=ZERO_TIME,
        deleted_at=null_time(None),
        user_id=null_uuid(None),
        name=null_string(None),
        key="",
        hmac_method="",
        last_access=ZERO_TIME,
        created_by=null_uuid(None),
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


class ClientResponse(msgspec.Struct):
    data: Client


class PagedClients(Paged[Client]):
    pass
