"""What each operation does, between the HTTP routes (or the CLI) and the store."""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from graphsvc import wire
from graphsvc.crypto import (
    HMAC_METHOD,
    KeyBox,
    hash_secret,
    issue_jwt,
    new_token_key,
    verify_secret,
)
from graphsvc.errors import bad_request, conflict, forbidden, not_found, unauthorized
from graphsvc.store import accounts, clients, data_quality, extensions, graph, saml
from graphsvc.store.db import Connection
from graphsvc.store.paging import SortKey

MIN_SECRET_LENGTH = 12  # NIST SP 800-63B asks for at least 8; a shared service, a little more


@dataclass(frozen=True)
class Page:
    skip: int
    limit: int


@dataclass(frozen=True)
class Window:
    """An inclusive range of creation times."""

    start: datetime
    end: datetime


async def list_aggregations(
    conn: Connection,
    environment_kind_id: int,
    extension_id: int | None,
    window: Window,
    sort: Sequence[SortKey],
    page: Page,
) -> wire.PagedAggregations:
    found = await data_quality.list_aggregations(
        conn,
        environment_kind_id,
        extension_id,
        window.start,
        window.end,
        sort,
        page.skip,
        page.limit,
    )
    if found is None:
        raise not_found(f"schema extension {extension_id} does not exist", "schema_extension_id")
    count, rows = found
    return wire.PagedAggregations(count, page.skip, page.limit, window.start, window.end, rows)


async def list_tenant_stats(
    conn: Connection, tenant_id: str, window: Window, sort: Sequence[SortKey], page: Page
) -> wire.PagedTenantStats:
    count, rows = await data_quality.list_tenant_stats(
        conn, tenant_id, window.start, window.end, sort, page.skip, page.limit
    )
    if count == 0 and not await data_quality.tenant_known(conn, tenant_id):
        raise not_found(f"no Azure tenant {tenant_id} is known", "tenant_id")
    return wire.PagedTenantStats(count, page.skip, page.limit, window.start, window.end, rows)


async def get_saml_provider(
    conn: Connection, provider_id: int, base_url: str
) -> wire.SamlProviderResponse:
    row = await saml.find_saml_provider(conn, provider_id)
    if row is None:
        raise not_found(f"SAML provider {provider_id} does not exist", "saml_provider_id")
    sp = f"{base_url.rstrip('/')}/api/v2/sso/{row.name}"
    return wire.SamlProviderResponse(
        wire.SamlProvider(
            row.id,
            row.created_at,
            row.updated_at,
            wire.null_time(row.deleted_at),
            row.name,
            row.display_name,
            row.idp_issuer_uri,
            row.idp_sso_uri,
            row.principal_attribute_mappings,
            sp,
            f"{sp}/login",
            f"{sp}/metadata",
            f"{sp}/callback",
            wire.null_int32(row.sso_provider_id),
        )
    )


async def get_client(conn: Connection, client_id: str) -> wire.ClientResponse:
    client = await clients.find_client(conn, client_id)
    if client is None:
        raise not_found(f"client {client_id} does not exist", "client_id")
    return wire.ClientResponse(client)


async def list_dcom_rights(
    conn: Connection, object_id: str, sort: Sequence[SortKey], page: Page
) -> wire.PagedNodeList:
    target = await graph.find_dcom_target(conn, object_id)
    if target is None:
        raise not_found(
            f"no computer with object id {object_id!r}; object ids are SIDs (S-1-5-21-...): "
            f"find one by name with GET /api/v2/search?q=NAME&type=Computer "
            f"or `graphsvc find NAME --kind Computer`",
            "object_id",
        )
    count, rows = await graph.list_dcom_holders(conn, target, sort, page.skip, page.limit)
    return wire.PagedNodeList(count, page.skip, page.limit, rows)


# --- sessions ---------------------------------------------------------------------------


async def find_login(conn: Connection, request: wire.LoginRequest) -> accounts.UserLogin | None:
    """The user a login names, once the request is well formed; None if there is none."""
    if request.login_method != "secret":
        raise bad_request(
            f"unsupported login_method {request.login_method!r}: use 'secret'", "login_method"
        )
    if "\x00" in request.username:
        raise bad_request("username must not contain a NUL byte", "username")
    return await accounts.find_user_login(conn, request.username)


def check_login(user: accounts.UserLogin | None, secret: str) -> accounts.UserLogin:
    """Verify the secret (about 0.2 s of CPU: run it off the event loop); an unknown user
    costs the same, so timing tells nothing."""
    if not verify_secret(user.secret_digest if user else None, secret) or user is None:
        raise unauthorized("invalid username or secret")
    if user.principal.disabled:
        raise forbidden("user is disabled")
    return user


async def open_session(
    conn: Connection, user: accounts.UserLogin, jwt_key: bytes, lifetime: timedelta
) -> wire.LoginResponse:
    now = datetime.now(UTC)
    session_id = str(uuid.uuid4())
    expires_at = now + lifetime
    await accounts.insert_session(conn, session_id, user.id, now, expires_at)
    token = issue_jwt(jwt_key, user.id, session_id, expires_at)
    return wire.LoginResponse(wire.LoginData(user.id, token, auth_expired=False))


# --- administration (CLI and demo) --------------------------------------------------------


@dataclass
class CreatedToken:
    id: str
    key: str
    user_id: str | None


async def create_user(
    conn: Connection, name: str, role: str, secret: str | None, disabled: bool
) -> str:
    if not name.strip():
        raise bad_request("user name must not be empty", "name")
    role_id = await accounts.find_role_id(conn, role)
    if role_id is None:
        roles = ", ".join(await accounts.list_role_names(conn))
        raise bad_request(f"unknown role {role!r}; roles: {roles}", "role")
    if await accounts.find_user_id(conn, name) is not None:
        raise conflict(f"user {name!r} already exists", "name")
    if secret is not None:
        check_secret(secret)
    user_id = str(uuid.uuid4())
    digest = hash_secret(secret) if secret else None
    await accounts.insert_user(conn, user_id, name, role_id, digest, disabled, datetime.now(UTC))
    return user_id


async def set_user_secret(conn: Connection, user_id: str, secret: str) -> None:
    check_secret(secret)
    await accounts.set_user_secret(conn, user_id, hash_secret(secret), datetime.now(UTC))


def check_secret(secret: str) -> None:
    if len(secret) < MIN_SECRET_LENGTH:
        raise bad_request(
            f"a user's secret needs at least {MIN_SECRET_LENGTH} characters", "secret"
        )


async def create_user_token(
    conn: Connection,
    keys: KeyBox,
    user_name: str,
    token_name: str | None = None,
    expires_at: datetime | None = None,
) -> CreatedToken:
    user_id = await accounts.find_user_id(conn, user_name)
    if user_id is None:
        raise not_found(f"no user named {user_name!r}", "user")
    return await create_token(conn, keys, user_id=user_id, name=token_name, expires_at=expires_at)


async def create_token(
    conn: Connection,
    keys: KeyBox,
    user_id: str | None = None,
    client_id: str | None = None,
    name: str | None = None,
    expires_at: datetime | None = None,
) -> CreatedToken:
    """A new API token; the key is returned here once and stored only encrypted."""
    token_id, key = str(uuid.uuid4()), new_token_key()
    await accounts.insert_token(
        conn,
        token_id,
        keys.seal(key),
        HMAC_METHOD,
        datetime.now(UTC),
        user_id=user_id,
        client_id=client_id,
        name=name,
        created_by=user_id,
        expires_at=expires_at,
    )
    return CreatedToken(token_id, key, user_id)


async def create_saml_provider(
    conn: Connection,
    name: str,
    display_name: str,
    idp_issuer_uri: str,
    idp_sso_uri: str,
    mappings: Sequence[str],
) -> int:
    if not name or "/" in name or name != name.strip():
        raise bad_request(f"SAML provider name {name!r} must be non-empty, without '/'", "name")
    if await saml.saml_provider_name_taken(conn, name):
        raise conflict(f"a SAML provider named {name!r} already exists", "name")
    return await saml.insert_saml_provider(
        conn, name, display_name, idp_issuer_uri, idp_sso_uri, mappings, datetime.now(UTC)
    )


async def create_client(
    conn: Connection,
    keys: KeyBox,
    name: str,
    ip_address: str = "",
    hostname: str = "",
    created_by: str | None = None,
) -> tuple[str, CreatedToken]:
    """A collection client with its token (the token key is shown once, here)."""
    if not name.strip():
        raise bad_request("client name must not be empty", "name")
    if ip_address:
        try:
            ipaddress.ip_address(ip_address)
        except ValueError:
            raise bad_request(f"{ip_address!r} is not an IP address", "ip_address") from None
    if await clients.client_name_taken(conn, name):
        raise conflict(f"a client named {name!r} already exists", "name")
    client_id = str(uuid.uuid4())
    await clients.insert_client(conn, client_id, name, ip_address, hostname, datetime.now(UTC))
    token = await create_token(conn, keys, client_id=client_id, name=f"{name} token")
    return client_id, token


async def register_extension(conn: Connection, definition: wire.ExtensionDefinition) -> int:
    """An OpenGraph schema extension: its kinds, and the environment kinds its statistics
    are counted for (each must be one of its node kinds)."""
    environments = [(e.kind, e.source_kind) for e in definition.environment_kinds]
    if not environments or not definition.node_kinds:
        raise bad_request(
            "an extension needs node kinds and at least one environment kind", "environment_kinds"
        )
    missing = [kind for kind, _ in environments if kind not in definition.node_kinds]
    if missing:
        raise bad_request(
            f"environment kinds must be node kinds too: {', '.join(missing)}", "environment_kinds"
        )
    if any(x.name == definition.name for x in await extensions.list_extensions(conn)):
        raise conflict(f"an extension named {definition.name!r} already exists", "name")
    return await extensions.create_extension(
        conn,
        definition.name,
        definition.display_name,
        definition.version,
        definition.node_kinds,
        definition.relationship_kinds,
        environments,
        datetime.now(UTC),
    )
