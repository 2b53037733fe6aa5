"""Who am I, API tokens, users and sessions (login, logout): the reference server's shapes."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from graphsvc.wire.common import UUID, Int32, NullString, NullTime, NullUUID

# A name the store keeps: its columns hold 255 characters, and PostgreSQL cannot store a
# NUL byte (SQLite can; refused on both, so both answer alike).
MAX_NAME_LENGTH = 255
NO_NUL = r"^[^\x00]*$"
StoredName = Annotated[str, Meta(max_length=MAX_NAME_LENGTH, pattern=NO_NUL)]


class TokenFields(msgspec.Struct):
    """What every API token shows, a user's or a collection client's; each adds one field."""

    id: UUID
    created_at: datetime
    updated_at: datetime
    deleted_at: NullTime
    user_id: NullUUID
    name: NullString
    key: str
    hmac_method: str
    last_access: datetime


class AuthToken(TokenFields):
    """An API token of a user; `key` holds the key once, in the answer that creates it, and
    the mask everywhere else."""

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

    token_name: StoredName = ""
    user_id: uuid.UUID | None = None
    # With its offset: a time without one names no instant.
    expires_at: Annotated[datetime, Meta(tz=True)] | None = None
    lifetime_seconds: Annotated[int, Meta(ge=60, le=10 * 366 * 86400)] | None = None


class Permission(msgspec.Struct):
    id: int
    authority: str
    name: str


class Role(msgspec.Struct):
    id: int
    name: str
    description: str
    permissions: list[Permission]


class RoleList(msgspec.Struct):
    roles: list[Role]


class RoleListResponse(msgspec.Struct):
    data: RoleList


class PermissionList(msgspec.Struct):
    permissions: list[Permission]


class PermissionListResponse(msgspec.Struct):
    data: PermissionList


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
    first_name: NullString
    last_name: NullString
    email_address: NullString
    last_login: datetime  # 0001-01-01T00:00:00Z before the first login, as the reference
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
    """PATCH /api/v2/bloodhound-users/{user_id}: the reference's fields graphsvc keeps; an
    absent or empty one leaves the user's as it is."""

    is_disabled: bool | None = None
    roles: list[Int32] | None = None
    principal: StoredName | None = None
    first_name: StoredName | None = None
    last_name: StoredName | None = None
    email_address: StoredName | None = None


class CreateUserRequest(msgspec.Struct):
    """POST /api/v2/bloodhound-users: the reference's fields graphsvc keeps (its SSO and
    environment fields are accepted and not kept)."""

    principal: StoredName
    roles: list[Int32]
    first_name: StoredName | None = None
    last_name: StoredName | None = None
    email_address: StoredName | None = None
    secret: str | None = None
    needs_password_reset: bool = False
    is_disabled: bool = False


class UserSecret(msgspec.Struct):
    """PUT /api/v2/bloodhound-users/{user_id}/secret; `current_secret` is asked of a user
    changing its own."""

    secret: str
    needs_password_reset: bool = False
    current_secret: str | None = None


class SelfResponse(msgspec.Struct):
    data: Requester


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


class AuditLogEntry(msgspec.Struct):
    """One audit event, with the reference's fields; `fields` holds graphsvc's event name,
    its message and what it names. `actor_id` is empty for the command line."""

    id: int
    created_at: datetime
    actor_id: str
    actor_name: str
    actor_email: str
    action: str
    fields: dict[str, Any]
    request_id: str
    source_ip_address: str
    status: str
    commit_id: str


class AuditLogs(msgspec.Struct):
    logs: list[AuditLogEntry]


class AuditLogResponse(msgspec.Struct):
    count: int
    limit: int
    skip: int
    data: AuditLogs
