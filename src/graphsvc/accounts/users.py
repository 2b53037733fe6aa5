"""Users: created (CLI and demo), listed, given a role, disabled, deleted, given a secret.

Managing users takes `auth/ManageUsers`; an Administrator cannot lock itself out over HTTP
(the CLI can undo anything), nor can two lock each other out (see `confirm_manager`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from graphsvc import wire
from graphsvc.accounts.names import check_user_name, look_alike_forms, name_key
from graphsvc.accounts.permissions import (
    MANAGE_SELF,
    MANAGE_USERS,
    Caller,
    CredentialCache,
    actor,
    confirm_caller,
)
from graphsvc.accounts.roles import read_role
from graphsvc.crypto import hash_secret
from graphsvc.errors import bad_request, conflict, forbidden, not_found, unauthorized
from graphsvc.logs import audit
from graphsvc.store import accounts
from graphsvc.store.db import Connection
from graphsvc.store.filters import Filter
from graphsvc.store.paging import SortKey
from graphsvc.wire.accounts import MAX_NAME_LENGTH

# The reference's last_login of a user who never logged in (Go's zero time).
NEVER = datetime(1, 1, 1, tzinfo=UTC)
MIN_SECRET_LENGTH = 12  # NIST SP 800-63B asks for at least 8; a shared service, a little more


def validate_name(name: str, field: str) -> None:
    """A name the store can keep alike on both stores (the HTTP bodies refuse the same)."""
    if len(name) > MAX_NAME_LENGTH:
        raise bad_request(f"{field} must be at most {MAX_NAME_LENGTH} characters", field)
    if "\x00" in name:
        raise bad_request(f"{field} must not contain a NUL byte", field)


def validate_secret(secret: str) -> None:
    if len(secret) < MIN_SECRET_LENGTH:
        raise bad_request(
            f"a user's secret needs at least {MIN_SECRET_LENGTH} characters", "secret"
        )


async def create_user(
    conn: Connection, name: str, role: str, secret: str | None, disabled: bool
) -> str:
    """A user with a role named (the command line and the demo); its id."""
    role_id = await accounts.find_role_id(conn, role)
    if role_id is None:
        roles = ", ".join(await accounts.list_role_names(conn))
        raise bad_request(f"unknown role {role!r}; roles: {roles}", "role")
    user_id = await store_new_user(conn, name, "name", role_id, secret, disabled)
    audit(
        "user.created",
        f"user {name} created with role {role} by {actor(None)}",
        user=name,
        actor=actor(None),
    )
    return user_id


async def store_new_user(
    conn: Connection,
    name: str,
    field: str,
    role_id: int,
    secret: str | None,
    disabled: bool,
    profile: tuple[str | None, str | None, str | None] = (None, None, None),
) -> str:
    """`field` names the name where the caller took it from (`name`, `principal`). A deleted
    user's name may be given again: the audit log names users by id as well, and the
    reference server, which removes a deleted user's row, frees the name too."""
    validate_name(name, field)
    key = check_user_name(name, field)
    await refuse_taken_name(conn, name, key, field)
    if secret is not None:
        validate_secret(secret)
    user_id = str(uuid.uuid4())
    digest = hash_secret(secret) if secret else None
    now = datetime.now(UTC)
    if not await accounts.insert_user(
        conn, user_id, name, key, role_id, digest, disabled, now, profile
    ):
        raise conflict(f"a user named {name!r} or alike was created meanwhile", field)
    return user_id


async def refuse_taken_name(
    conn: Connection, name: str, key: str, field: str, user_id: str | None = None
) -> None:
    """A 409 when a live user other than `user_id` has a name of this key, or a name this
    one could pass for."""
    found = await accounts.find_user_by_key(conn, key)
    if found is not None and found[0] != user_id:
        if found[1] == name:
            raise conflict(f"user {name!r} already exists", field)
        raise conflict(
            f"user name {name!r} reads as the existing user {found[1]!r}: names are compared "
            "ignoring case, width and surrounding spaces",
            field,
        )
    await refuse_look_alike(conn, name, key, field, user_id)


async def refuse_look_alike(
    conn: Connection, name: str, key: str, field: str, user_id: str | None = None
) -> None:
    """A 409 when the name could pass for a live user's other than `user_id` (UTS #39's
    confusable skeleton, `look_alike_forms`): `admin` with a Latin alpha (U+0251) beside
    `admin`, `ace` in Cyrillic letters beside a Latin `ace`. Every live user's name is
    compared, at creation and rename only: users are few (tens), and a form costs some
    microseconds (the confusables table, 20-40 ms, loads on a process's first new name)."""
    forms = look_alike_forms(name)
    for user in await accounts.list_users(conn):
        if user.id == user_id or name_key(user.name) == key:
            continue
        if forms & look_alike_forms(user.name):
            raise conflict(
                f"user name {name!r} could pass for the existing user {user.name!r}: names "
                "are compared as they look (Unicode's confusables, UTS #39)",
                field,
            )


async def create_user_account(
    conn: Connection, caller: Caller | None, body: wire.CreateUserRequest
) -> wire.UserResponse:
    """POST /api/v2/bloodhound-users: a user with one role (by id), and optionally a login
    secret and the reference's profile fields."""
    caller = await confirm_manager(conn, caller)
    role_id = await check_role(conn, body.roles)
    user_id = await store_new_user(
        conn,
        body.principal,
        "principal",
        role_id,
        body.secret or None,
        body.is_disabled,
        (body.first_name or None, body.last_name or None, body.email_address or None),
    )
    if body.secret and body.needs_password_reset:
        await accounts.expire_user_secret(conn, user_id)
    audit(
        "user.created",
        f"user {body.principal} created with role {role_id} by {actor(caller)}",
        user=body.principal,
        actor=actor(caller),
    )
    return await get_user(conn, user_id)


async def check_role(conn: Connection, roles: list[int]) -> int:
    """The one role id of a request's `roles`."""
    if len(roles) != 1:
        raise bad_request("a user has exactly one role: give roles as [ROLE_ID]", "roles")
    if not await accounts.role_exists(conn, roles[0]):
        raise bad_request(f"no role {roles[0]}; GET /api/v2/roles lists them", "roles")
    return roles[0]


async def store_user_secret(conn: Connection, user_id: str, secret: str) -> None:
    """Keep a new secret's hash; its sessions stay (the demo, which resets its own secret)."""
    validate_secret(secret)
    await accounts.set_user_secret(conn, user_id, hash_secret(secret), False, datetime.now(UTC))


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


async def confirm_manager(conn: Connection, caller: Caller | None) -> Caller | None:
    """The caller of a change to users, checked in the change's transaction (the command
    line, None, needs no check). The enabled managers of users (Administrators) are locked
    first, in one order, then the caller must be one of them, and `refuse_self` keeps it from
    changing itself: so one enabled Administrator always remains. Two Administrators who
    delete, disable or demote each other at once are thus served one after the other, and the
    second is refused, its own account gone (401) or no longer fit to manage users (403)."""
    if caller is None:
        return None
    await accounts.lock_enabled_holders(conn, MANAGE_USERS)
    return await confirm_caller(conn, caller, MANAGE_USERS)


def refuse_self(caller: Caller | None, user_id: str, what: str) -> None:
    """An Administrator cannot lock itself out over HTTP (the CLI can undo anything)."""
    if caller is not None and caller.principal.user_id == user_id:
        raise bad_request(f"you cannot {what} yourself", "user_id")


async def build_user(conn: Connection, user: accounts.UserRow) -> wire.User:
    return wire.User(
        id=user.id,
        principal_name=user.name,
        first_name=wire.null_string(user.first_name),
        last_name=wire.null_string(user.last_name),
        email_address=wire.null_string(user.email_address),
        last_login=user.last_login or NEVER,
        is_disabled=user.disabled,
        roles=[await read_role(conn, user.role_id)],
        created_at=user.created_at,
    )


async def list_users(
    conn: Connection, filters: Sequence[Filter], sort: Sequence[SortKey]
) -> wire.UserListResponse:
    users = [await build_user(conn, u) for u in await accounts.list_users(conn, filters, sort)]
    return wire.UserListResponse(wire.UserList(users))


async def get_user(conn: Connection, user_id: str) -> wire.UserResponse:
    return wire.UserResponse(await build_user(conn, await get_user_row(conn, user_id)))


async def update_user(
    conn: Connection,
    caller: Caller | None,
    user_id: str,
    body: wire.UserUpdate,
    cache: CredentialCache | None = None,
) -> wire.UserResponse:
    """Disable or enable a user, give it another role (one role per user), rename it or
    change its profile. Disabled, its sessions end at once; its tokens are refused at once
    by the process that made the change (`cache`) and within the token cache time by the
    others. As in the reference, an Administrator may send its own account's current role
    and `is_disabled: false` (nothing changes); changing its own role or disabling itself
    is refused."""
    caller = await confirm_manager(conn, caller)
    user = await get_user_row(conn, user_id)
    now = datetime.now(UTC)
    narrowed = False
    if body.roles is not None:
        role_id = await check_role(conn, body.roles)
        if role_id != user.role_id:
            refuse_self(caller, user_id, "change the role of")
            await accounts.set_user_role(conn, user_id, role_id, now)
            narrowed = True
            audit(
                "user.role_changed",
                f"user {user.name} given role {role_id} by {actor(caller)}",
                user=user.name,
                actor=actor(caller),
            )
    if body.is_disabled is not None and body.is_disabled != user.disabled:
        if body.is_disabled:
            refuse_self(caller, user_id, "disable")
        await accounts.set_user_disabled(conn, user_id, body.is_disabled, now)
        if body.is_disabled:
            await accounts.delete_user_sessions(conn, user_id)
        narrowed = True
        state = "disabled" if body.is_disabled else "enabled"
        audit(f"user.{state}", f"user {user.name} {state} by {actor(caller)}", user=user.name)
    await update_profile(conn, caller, user, body, now)
    if cache is not None and narrowed:
        cache.forget_user(user_id)
    return await get_user(conn, user_id)


async def update_profile(
    conn: Connection,
    caller: Caller | None,
    user: accounts.UserRow,
    body: wire.UserUpdate,
    now: datetime,
) -> None:
    """The name and the profile fields the body sets (an empty one is left as it is)."""
    name = body.principal or user.name
    profile = (
        body.first_name or user.first_name,
        body.last_name or user.last_name,
        body.email_address or user.email_address,
    )
    if (name, *profile) == (user.name, user.first_name, user.last_name, user.email_address):
        return
    if name == user.name:
        key = name_key(name)  # kept as it is: a name given before the rules stays
    else:
        validate_name(name, "principal")
        key = check_user_name(name, "principal")
        await refuse_taken_name(conn, name, key, "principal", user.id)
    await accounts.set_user_profile(conn, user.id, name, key, *profile, now)
    audit(
        "user.profile_changed",
        f"user {user.name} profile changed by {actor(caller)}"
        + (f"; now named {name}" if name != user.name else ""),
        user=user.name,
        actor=actor(caller),
    )


async def delete_user(
    conn: Connection, caller: Caller | None, user_id: str, cache: CredentialCache | None = None
) -> wire.UserResponse:
    """The user's sessions end and its tokens are revoked (refused at once by the process
    that made the change, `cache`, and within the token cache time by the others)."""
    caller = await confirm_manager(conn, caller)
    user = await get_user(conn, user_id)
    refuse_self(caller, user_id, "delete")
    await accounts.delete_user(conn, user_id, datetime.now(UTC))
    if cache is not None:
        cache.forget_user(user_id)
    name = user.data.principal_name
    audit("user.deleted", f"user {name} deleted by {actor(caller)}", user=name)
    return user


@dataclass(frozen=True)
class NewSecret:
    """A secret change's password work, done before its transaction (`prepare_secret_change`
    in api/login.py, the command line): each check or hash costs about 0.2 s of CPU, which
    in the transaction held SQLite's one write lock and on the event loop stalled every
    request. `verified`: for one's own change, the digest `current_secret` was checked
    against."""

    digest: str
    verified: str | None = None


def changes_own_secret(caller: Caller | None, user_id: str) -> bool:
    """Whether a secret change is the caller's own; refused (403) before any password work
    when the caller, as the request authenticated it, lacks the permission it takes. The
    change's transaction checks the caller again (`confirm_caller`)."""
    own = caller is not None and caller.principal.user_id == user_id
    needed = MANAGE_SELF if own else MANAGE_USERS
    if caller is not None and needed not in caller.permissions:
        raise forbidden(f"permission {needed} is required", "permission_missing")
    return own


async def read_own_secret(conn: Connection, user_id: str) -> tuple[str, str | None]:
    """The caller's name and secret digest, for checking its `current_secret`."""
    found = await accounts.read_user_secret(conn, user_id)
    if found is None:
        raise unauthorized(f"the calling user {user_id} no longer exists", "deleted_user")
    return found


async def set_user_secret(
    conn: Connection,
    caller: Caller | None,
    user_id: str,
    body: wire.UserSecret,
    prepared: NewSecret,
) -> wire.UserResponse:
    """A new login secret, hashed beforehand (`prepared`); the user's sessions end (its
    tokens, which the secret does not sign, stay). One's own takes auth/ManageSelf and the
    current secret, verified beforehand; another user's takes auth/ManageUsers (as the
    reference)."""
    if caller is not None and caller.principal.user_id == user_id:
        stored = await accounts.lock_secret_digest(conn, user_id)
        caller = await confirm_caller(conn, caller, MANAGE_SELF)
        # Verified against the digest stored then: a change that landed since (another
        # session's, an administrator's) is not overwritten on the strength of the old secret.
        if prepared.verified is None or stored != prepared.verified:
            raise conflict(
                "the secret changed while current_secret was being checked: send the current one",
                "current_secret",
            )
        expired = False  # the user has just chosen it
    else:
        caller = await confirm_manager(conn, caller)
        expired = body.needs_password_reset
    user = await get_user_row(conn, user_id)
    await accounts.set_user_secret(conn, user_id, prepared.digest, expired, datetime.now(UTC))
    await accounts.delete_user_sessions(conn, user_id)
    audit(
        "user.secret_changed",
        f"user {user.name} given a new secret by {actor(caller)}",
        user=user.name,
    )
    return await get_user(conn, user_id)
