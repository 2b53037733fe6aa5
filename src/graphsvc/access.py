"""Who may do what, shared by the HTTP API and the CLI: the caller's own view (/self), API
tokens (create, list, revoke, expire) and the users an Administrator manages.

A caller acts on its own tokens with `auth/CreateToken`; on anyone's with `auth/ManageUsers`.
The CLI runs on the server's host with the store's credentials, and so acts with every right
(`caller` None). Every change is logged on `graphsvc.audit`, naming who did it.
"""

from __future__ import annotations

import getpass
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from graphsvc import service, wire
from graphsvc.crypto import KeyBox
from graphsvc.errors import bad_request, forbidden, not_found
from graphsvc.logs import audit
from graphsvc.store import accounts
from graphsvc.store.db import Connection
from graphsvc.store.paging import SortKey

OWN_TOKENS = "auth/CreateToken"
ANY_USER = "auth/ManageUsers"


@dataclass(frozen=True)
class Caller:
    """An authenticated user, as a request carries it."""

    principal: accounts.Principal
    token_id: str | None  # the token of a signed request; None for a session
    permissions: frozenset[str]

    def describe(self) -> str:
        return f"user {self.principal.user_id}"


def actor(caller: Caller | None) -> str:
    return caller.describe() if caller else f"the command line ({getpass.getuser()})"


def token_owner(caller: Caller | None, user_id: str | None) -> str | None:
    """The user whose tokens the caller may act on: its own, or (with auth/ManageUsers, or
    on the command line) anyone's; None for every user's."""
    if caller is None:
        return user_id
    if user_id is not None and user_id == caller.principal.user_id:
        return user_id
    if ANY_USER not in caller.permissions:
        if user_id is None:
            return caller.principal.user_id
        raise forbidden(f"permission {ANY_USER} is required to act on another user's tokens")
    return user_id


async def get_self(conn: Connection, caller: Caller) -> wire.SelfResponse:
    user = await accounts.find_user(conn, caller.principal.user_id)
    if user is None:
        raise not_found("the calling user no longer exists", "auth")
    role_name, permissions = await accounts.role_permission_names(conn, caller.principal.role_id)
    token = None
    if caller.token_id is not None:
        token = await accounts.find_user_token(conn, caller.token_id)
    authorities = [wire.Permission(*p.split("/", 1)) for p in permissions]
    return wire.SelfResponse(
        wire.Requester(
            id=user.id,
            principal_name=user.name,
            is_disabled=user.disabled,
            roles=[wire.Role(caller.principal.role_id, role_name, authorities)],
            created_at=user.created_at,
            token=token,
        )
    )


def expiry(body: wire.CreateTokenRequest, now: datetime) -> datetime | None:
    if body.expires_at is not None and body.lifetime_seconds is not None:
        raise bad_request("give expires_at or lifetime_seconds, not both", "expires_at")
    if body.lifetime_seconds is not None:
        return now + timedelta(seconds=body.lifetime_seconds)
    if body.expires_at is not None and body.expires_at <= now:
        raise bad_request("expires_at must be in the future", "expires_at")
    return body.expires_at


async def create_api_token(
    conn: Connection, keys: KeyBox, caller: Caller | None, body: wire.CreateTokenRequest
) -> wire.AuthTokenResponse:
    """A new token for the caller (or, when allowed, another user); the answer carries the
    key, once."""
    now = datetime.now(UTC)
    wanted = body.user_id or (caller.principal.user_id if caller else None)
    user_id = token_owner(caller, wanted)
    if user_id is None or await accounts.find_user(conn, user_id) is None:
        raise not_found(f"no user {body.user_id}", "user_id")
    expires_at = expiry(body, now)
    created = await service.create_token(
        conn, keys, user_id=user_id, name=body.token_name or None, expires_at=expires_at
    )
    token = await accounts.find_user_token(conn, created.id)
    assert token is not None
    audit(
        "token.created",
        f"token {created.id} created for user {user_id} by {actor(caller)}",
        token_id=created.id,
        user_id=user_id,
        actor=actor(caller),
    )
    token.key = created.key
    return wire.AuthTokenResponse(token)


async def list_api_tokens(
    conn: Connection, caller: Caller | None, user_id: str | None, sort: Sequence[SortKey]
) -> wire.AuthTokenListResponse:
    owner = token_owner(caller, user_id)
    return wire.AuthTokenListResponse(
        wire.AuthTokenList(await accounts.list_user_tokens(conn, owner, sort))
    )


async def revoke_api_token(
    conn: Connection, caller: Caller | None, token_id: str
) -> wire.AuthTokenResponse:
    token = await accounts.find_user_token(conn, token_id)
    owner = token.user_id.uuid if token is not None else None
    if token is None or (caller is not None and not may_act_on(caller, owner)):
        raise not_found(f"no token {token_id} of yours", "token_id")
    now = datetime.now(UTC)
    await accounts.revoke_token(conn, token_id, now)
    audit(
        "token.revoked",
        f"token {token_id} of user {owner} revoked by {actor(caller)}",
        token_id=token_id,
        user_id=owner,
        actor=actor(caller),
    )
    token.deleted_at = wire.null_time(now)
    return wire.AuthTokenResponse(token)


def may_act_on(caller: Caller, user_id: str | None) -> bool:
    return user_id == caller.principal.user_id or ANY_USER in caller.permissions


# --- users ------------------------------------------------------------------------------------


async def find_user_by_name(conn: Connection, name: str) -> accounts.UserRow:
    user_id = await accounts.find_user_id(conn, name)
    user = None if user_id is None else await accounts.find_user(conn, user_id)
    if user is None:
        raise not_found(f"no user named {name!r}", "user")
    return user


async def get_user_row(conn: Connection, user_id: str) -> accounts.UserRow:
    user = await accounts.find_user(conn, user_id)
    if user is None:
        raise not_found(f"no user {user_id}", "user_id")
    return user


def not_oneself(caller: Caller | None, user_id: str, what: str) -> None:
    """An Administrator cannot lock itself out over HTTP (the CLI can undo anything)."""
    if caller is not None and caller.principal.user_id == user_id:
        raise bad_request(f"you cannot {what} yourself", "user_id")


async def describe_user(conn: Connection, user: accounts.UserRow) -> wire.User:
    _, permissions = await accounts.role_permission_names(conn, user.role_id)
    authorities = [wire.Permission(*p.split("/", 1)) for p in permissions]
    return wire.User(
        id=user.id,
        principal_name=user.name,
        is_disabled=user.disabled,
        roles=[wire.Role(user.role_id, user.role, authorities)],
        created_at=user.created_at,
    )


async def list_users(conn: Connection) -> wire.UserListResponse:
    users = [await describe_user(conn, u) for u in await accounts.list_users(conn)]
    return wire.UserListResponse(wire.UserList(users))


async def get_user(conn: Connection, user_id: str) -> wire.UserResponse:
    return wire.UserResponse(await describe_user(conn, await get_user_row(conn, user_id)))


async def update_user(
    conn: Connection, caller: Caller | None, user_id: str, body: wire.UserUpdate
) -> wire.UserResponse:
    """Disable or enable a user, or give it another role (one role per user). Disabled, its
    sessions end at once and its tokens are refused within the token cache time."""
    user = await get_user_row(conn, user_id)
    now = datetime.now(UTC)
    if body.roles is not None:
        if len(body.roles) != 1:
            raise bad_request("a user has exactly one role: give roles as [ROLE_ID]", "roles")
        if not await accounts.role_exists(conn, body.roles[0]):
            raise bad_request(f"no role {body.roles[0]}", "roles")
        not_oneself(caller, user_id, "change the role of")
        await accounts.set_user_role(conn, user_id, body.roles[0], now)
        audit(
            "user.role_changed",
            f"user {user.name} given role {body.roles[0]} by {actor(caller)}",
            user=user.name,
            actor=actor(caller),
        )
    if body.is_disabled is not None:
        not_oneself(caller, user_id, "disable")
        await accounts.set_user_disabled(conn, user_id, body.is_disabled, now)
        if body.is_disabled:
            await accounts.delete_user_sessions(conn, user_id)
        state = "disabled" if body.is_disabled else "enabled"
        audit(f"user.{state}", f"user {user.name} {state} by {actor(caller)}", user=user.name)
    return await get_user(conn, user_id)


async def delete_user(conn: Connection, caller: Caller | None, user_id: str) -> wire.UserResponse:
    """The user's sessions end and its tokens are revoked."""
    user = await get_user(conn, user_id)
    not_oneself(caller, user_id, "delete")
    await accounts.delete_user(conn, user_id, datetime.now(UTC))
    name = user.data.principal_name
    audit("user.deleted", f"user {name} deleted by {actor(caller)}", user=name)
    return user


async def set_user_secret(
    conn: Connection, caller: Caller | None, user_id: str, body: wire.UserSecret
) -> wire.UserResponse:
    """A new login secret; the user's sessions end."""
    user = await get_user_row(conn, user_id)
    await service.set_user_secret(conn, user_id, body.secret)
    await accounts.delete_user_sessions(conn, user_id)
    audit(
        "user.secret_changed",
        f"user {user.name} given a new secret by {actor(caller)}",
        user=user.name,
    )
    return await get_user(conn, user_id)
