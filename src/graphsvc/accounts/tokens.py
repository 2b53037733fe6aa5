"""API tokens: created, listed, revoked and expired.

A caller acts on its own tokens with `auth/CreateToken`; on anyone's with `auth/ManageUsers`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from graphsvc import wire
from graphsvc.accounts.permissions import (
    CREATE_TOKEN,
    MANAGE_USERS,
    Caller,
    CredentialCache,
    actor,
    confirm_caller,
)
from graphsvc.accounts.users import validate_name
from graphsvc.crypto import KeyBox, new_token_key
from graphsvc.errors import bad_request, forbidden, not_found
from graphsvc.logs import audit, token_hash
from graphsvc.signatures import HMAC_METHOD
from graphsvc.store import accounts
from graphsvc.store.db import Connection
from graphsvc.store.filters import Filter
from graphsvc.store.paging import SortKey


@dataclass
class CreatedToken:
    id: str
    key: str
    user_id: str | None


async def create_token(
    conn: Connection,
    keys: KeyBox,
    user_id: str | None = None,
    client_id: str | None = None,
    name: str | None = None,
    expires_at: datetime | None = None,
) -> CreatedToken:
    """A new API token of a user or a collection client; the key is returned here once and
    stored only encrypted."""
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


async def create_user_token(
    conn: Connection,
    keys: KeyBox,
    user_name: str,
    token_name: str | None = None,
    expires_at: datetime | None = None,
) -> CreatedToken:
    """A token for the user of that name (the CLI and the demo)."""
    user_id = await accounts.find_user_id(conn, user_name)
    if user_id is None:
        raise not_found(f"no user named {user_name!r}", "user")
    return await create_token(conn, keys, user_id=user_id, name=token_name, expires_at=expires_at)


def never_used(token: wire.AuthToken) -> bool:
    """Whether no request has been signed with the token yet: its `last_access` is its
    creation time until the first (as `create_token` writes it, and the API shows it), and
    the time of a use after."""
    return token.last_access == token.created_at


def token_owner(caller: Caller | None, user_id: str | None) -> str | None:
    """The user whose tokens the caller may act on: its own, or (with auth/ManageUsers, or
    on the command line) anyone's; None for every user's."""
    if caller is None:
        return user_id
    if user_id is not None and user_id == caller.principal.user_id:
        return user_id
    if MANAGE_USERS not in caller.permissions:
        if user_id is None:
            return caller.principal.user_id
        raise forbidden(
            f"permission {MANAGE_USERS} is required to act on another user's tokens",
            "permission_missing",
        )
    return user_id


def may_act_on(caller: Caller, user_id: str | None) -> bool:
    return user_id == caller.principal.user_id or MANAGE_USERS in caller.permissions


def resolve_expiry(body: wire.CreateTokenRequest, now: datetime) -> datetime | None:
    if body.expires_at is not None and body.lifetime_seconds is not None:
        raise bad_request("give expires_at or lifetime_seconds, not both", "expires_at")
    if body.lifetime_seconds is not None:
        return now + timedelta(seconds=body.lifetime_seconds)
    if body.expires_at is None:
        return None
    try:
        expires_at = body.expires_at.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00:00-02:00 is in year 10000 in UTC
        raise bad_request("expires_at is out of range", "expires_at") from None
    if expires_at <= now:
        raise bad_request("expires_at must be in the future", "expires_at")
    return expires_at


async def create_api_token(
    conn: Connection, keys: KeyBox, caller: Caller | None, body: wire.CreateTokenRequest
) -> wire.AuthTokenResponse:
    """A new token for the caller (or, when allowed, another user); the answer carries the
    key, once."""
    if caller is not None:
        caller = await confirm_caller(conn, caller, CREATE_TOKEN)
    # Over HTTP the body's struct refused these already; the command line builds it unchecked.
    validate_name(body.token_name, "token_name")
    now = datetime.now(UTC)
    wanted = caller.principal.user_id if caller else None
    if body.user_id is not None:
        wanted = str(body.user_id)
    user_id = token_owner(caller, wanted)
    if user_id is None or await accounts.find_user(conn, user_id) is None:
        raise not_found(f"no user {body.user_id}", "user_id")
    expires_at = resolve_expiry(body, now)
    created = await create_token(
        conn, keys, user_id=user_id, name=body.token_name or None, expires_at=expires_at
    )
    token = await accounts.find_user_token(conn, created.id)
    assert token is not None
    audit(
        "token.created",
        f"token {token_hash(created.id)} created for user {user_id} by {actor(caller)}",
        token_id=created.id,
        user_id=user_id,
        actor=actor(caller),
    )
    token.key = created.key
    return wire.AuthTokenResponse(token)


async def list_api_tokens(
    conn: Connection, caller: Caller | None, filters: Sequence[Filter], sort: Sequence[SortKey]
) -> wire.AuthTokenListResponse:
    """The tokens the filters let through: of anyone with auth/ManageUsers (or on the
    command line), else the caller's own, with the reference's two refusals of a user_id
    filter."""
    if caller is not None and MANAGE_USERS not in caller.permissions:
        mine = caller.principal.user_id
        for f in filters:
            if f.column != "user_id":
                continue
            if f.operator != "eq":
                raise forbidden(
                    "non-admin users may only apply the eq operator when filtering by user_id",
                    "permission_missing",
                )
            if f.value != mine:
                raise forbidden(
                    "filtering tokens by another user's user_id requires admin privileges "
                    f"(permission {MANAGE_USERS})",
                    "permission_missing",
                )
        filters = [*filters, Filter("user_id", "eq", mine)]
    return wire.AuthTokenListResponse(
        wire.AuthTokenList(await accounts.list_user_tokens(conn, filters, sort))
    )


async def revoke_api_token(
    conn: Connection, caller: Caller | None, token_id: str, cache: CredentialCache | None = None
) -> wire.AuthTokenResponse:
    """Revoke a token: refused at once by the process that revokes it (`cache`), within the
    token cache time by the others."""
    if caller is not None:
        caller = await confirm_caller(conn, caller, CREATE_TOKEN)
    token = await accounts.find_user_token(conn, token_id)
    owner = token.user_id.uuid if token is not None else None
    if token is None or (caller is not None and not may_act_on(caller, owner)):
        raise not_found(f"no token {token_id} of yours", "token_id")
    now = datetime.now(UTC)
    await accounts.revoke_token(conn, token_id, now)
    if cache is not None:
        cache.forget_token(token_id)
    audit(
        "token.revoked",
        f"token {token_hash(token_id)} of user {owner} revoked by {actor(caller)}",
        token_id=token_id,
        user_id=owner,
        actor=actor(caller),
    )
    token.deleted_at = wire.null_time(now)
    return wire.AuthTokenResponse(token)
