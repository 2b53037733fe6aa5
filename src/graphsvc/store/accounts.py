"""Roles and permissions, users, API tokens and login sessions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graphsvc import wire
from graphsvc.store.db import Connection, Row
from graphsvc.store.dialect import row_lock
from graphsvc.store.filters import EQUALITY, RANGE, Filter, FilterColumn, filter_conditions
from graphsvc.store.paging import SortKey, order_clause


async def role_permissions(conn: Connection) -> dict[int, frozenset[str]]:
    rows = await conn.fetch(
        """SELECT rp.role_id, p.authority, p.name FROM roles_permissions rp
        JOIN permissions p ON p.id = rp.permission_id"""
    )
    grouped: dict[int, set[str]] = {}
    for role_id, authority, name in rows:
        grouped.setdefault(role_id, set()).add(f"{authority}/{name}")
    return {role: frozenset(perms) for role, perms in grouped.items()}


async def find_role_id(conn: Connection, role_name: str) -> int | None:
    found = await conn.fetchval("SELECT id FROM roles WHERE lower(name) = lower($1)", role_name)
    return None if found is None else int(found)


async def role_exists(conn: Connection, role_id: int) -> bool:
    return await conn.fetchval("SELECT 1 FROM roles WHERE id = $1", role_id) is not None


async def list_role_names(conn: Connection) -> list[str]:
    return [r[0] for r in await conn.fetch("SELECT name FROM roles ORDER BY id")]


@dataclass
class Principal:
    """The user a request acts for."""

    user_id: str
    role_id: int
    disabled: bool
    # Known for a session's user only: its secret must be changed before anything else.
    secret_expired: bool = False


@dataclass
class UserLogin:
    id: str
    secret_digest: str | None
    principal: Principal
    secret_expired: bool


async def find_user_login(conn: Connection, name: str) -> UserLogin | None:
    r = await conn.fetchrow(
        """SELECT id, secret_digest, role_id, is_disabled, secret_expired FROM users
        WHERE name = $1 AND deleted_at IS NULL""",
        name,
    )
    if r is None:
        return None
    user_id, secret_digest, role_id, disabled, expired = r
    return UserLogin(user_id, secret_digest, Principal(user_id, role_id, disabled), bool(expired))


async def lock_principal(conn: Connection, user_id: str) -> Principal | None:
    """A live user as a request acts for it, its row share-locked on PostgreSQL: a change to
    the user made by another transaction waits for this one, or this one sees it. (SQLite's
    write transaction holds the whole store already.)"""
    lock = row_lock(conn.dialect, "FOR SHARE")
    r = await conn.fetchrow(
        f"SELECT id, role_id, is_disabled FROM users WHERE id = $1 AND deleted_at IS NULL{lock}",
        user_id,
    )
    return None if r is None else Principal(r[0], r[1], r[2])


async def lock_enabled_holders(conn: Connection, permission: str) -> None:
    """Lock the rows of the live, enabled users whose role grants `permission`
    (authority/name) against any other change until the transaction ends. Taken in id
    order, so two transactions that both take them never deadlock; and under PostgreSQL's
    read committed, one that waited sees the rows as the other left them (a user it
    deleted is gone). Foreign-key checks stay free: a token may still be created for a
    locked user. On SQLite the write transaction holds the whole store already."""
    lock = row_lock(conn.dialect, "FOR NO KEY UPDATE")
    if not lock:
        return
    authority, name = permission.split("/", 1)
    await conn.execute(
        f"""SELECT u.id FROM users u
        WHERE u.deleted_at IS NULL AND NOT u.is_disabled AND u.role_id IN (
            SELECT rp.role_id FROM roles_permissions rp
            JOIN permissions p ON p.id = rp.permission_id
            WHERE p.authority = $1 AND p.name = $2)
        ORDER BY u.id{lock}""",
        authority,
        name,
    )


async def find_user_id(conn: Connection, name: str) -> str | None:
    found = await conn.fetchval("SELECT id FROM users WHERE name = $1 AND deleted_at IS NULL", name)
    return None if found is None else str(found)


async def find_user_by_key(conn: Connection, name_key: str) -> tuple[str, str] | None:
    """The id and name of the live user whose name has this key (accounts.names.name_key):
    there is one at most."""
    r = await conn.fetchrow(
        "SELECT id, name FROM users WHERE name_key = $1 AND deleted_at IS NULL", name_key
    )
    return None if r is None else (str(r[0]), str(r[1]))


async def insert_user(
    conn: Connection,
    user_id: str,
    name: str,
    name_key: str,
    role_id: int,
    secret_digest: str | None,
    disabled: bool,
    now: datetime,
    profile: tuple[str | None, str | None, str | None] = (None, None, None),
) -> bool:
    """`profile`: first name, last name, e-mail address. False when a live user already has
    the name's key: on PostgreSQL a transaction that does not lock the managers of users
    first (the command line's) may have added one since the caller looked; the unique index
    makes this one wait for it, then insert nothing."""
    inserted = await conn.fetchval(
        """INSERT INTO users (id, name, name_key, role_id, secret_digest, is_disabled,
            created_at, updated_at, first_name, last_name, email_address)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9, $10)
        ON CONFLICT (name_key) WHERE deleted_at IS NULL DO NOTHING RETURNING id""",
        user_id,
        name,
        name_key,
        role_id,
        secret_digest,
        disabled,
        now,
        *profile,
    )
    return inserted is not None


async def read_user_secret(conn: Connection, user_id: str) -> tuple[str, str | None] | None:
    """A live user's name and secret digest (None: it has no secret)."""
    r = await conn.fetchrow(
        "SELECT name, secret_digest FROM users WHERE id = $1 AND deleted_at IS NULL", user_id
    )
    return None if r is None else (str(r[0]), r[1])


async def lock_secret_digest(conn: Connection, user_id: str) -> str | None:
    """A user's secret digest, its row locked against any other change until the transaction
    ends (PostgreSQL; SQLite's write transaction holds the whole store already). Taken before
    `lock_principal` share-locks the same row: two transactions that both held the share lock
    and then both updated the row would deadlock."""
    lock = row_lock(conn.dialect, "FOR NO KEY UPDATE")
    found = await conn.fetchval(f"SELECT secret_digest FROM users WHERE id = $1{lock}", user_id)
    return None if found is None else str(found)


@dataclass
class TokenCredentials:
    key_ciphertext: str
    principal: Principal | None  # None for a token that belongs to a collection client
    expires_at: datetime | None


# Why a token id has no credentials that sign: for the audit log only (the caller of an API
# is told the same for both, so that no one can find out which token ids exist).
UNKNOWN_TOKEN, REVOKED_TOKEN = "unknown_token", "revoked_token"


@dataclass(frozen=True)
class TokenLookup:
    credentials: TokenCredentials | None  # None: the token may not sign
    refusal: str | None  # then why: UNKNOWN_TOKEN or REVOKED_TOKEN


async def look_up_token(conn: Connection, token_id: str) -> TokenLookup:
    """A token's credentials, if it may sign; else whether it never existed or was revoked
    (by itself, or with its user). One query, whichever it is."""
    r = await conn.fetchrow(
        """SELECT CASE WHEN t.deleted_at IS NULL AND (t.user_id IS NULL OR u.id IS NOT NULL)
                THEN t.key_ciphertext END,
            u.id, u.role_id, u.is_disabled, t.expires_at
        FROM auth_tokens t LEFT JOIN users u ON u.id = t.user_id AND u.deleted_at IS NULL
        WHERE t.id = $1""",
        token_id,
    )
    if r is None:
        return TokenLookup(None, UNKNOWN_TOKEN)
    key_ciphertext, user_id, role_id, disabled, expires_at = r
    if key_ciphertext is None:  # revoked, or its user removed (which revokes it too)
        return TokenLookup(None, REVOKED_TOKEN)
    principal = None if user_id is None else Principal(user_id, role_id, disabled)
    return TokenLookup(TokenCredentials(key_ciphertext, principal, expires_at), None)


async def find_token_credentials(conn: Connection, token_id: str) -> TokenCredentials | None:
    """The credentials of a token that may sign: not revoked, its user (if any) not removed."""
    return (await look_up_token(conn, token_id)).credentials


async def insert_token(
    conn: Connection,
    token_id: str,
    key_ciphertext: str,
    hmac_method: str,
    now: datetime,
    user_id: str | None = None,
    client_id: str | None = None,
    name: str | None = None,
    created_by: str | None = None,
    expires_at: datetime | None = None,
) -> None:
    await conn.execute(
        """INSERT INTO auth_tokens (id, user_id, client_id, name, key_ciphertext, hmac_method,
            last_access, created_by, created_at, updated_at, expires_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $7, $7, $9)""",
        token_id,
        user_id,
        client_id,
        name,
        key_ciphertext,
        hmac_method,
        now,
        created_by,
        expires_at,
    )


# What every token shows, in wire.TokenFields' order (its key only masked, never read):
# a user's token adds expires_at, a client's created_by.
TOKEN_FIELDS = (
    "id",
    "created_at",
    "updated_at",
    "deleted_at",
    "user_id",
    "name",
    "hmac_method",
    "last_access",
)
TOKEN_COLUMNS = ", ".join([*TOKEN_FIELDS, "expires_at"])
TOKEN_SORT_COLUMNS = {
    "created_at": "created_at",
    "updated_at": "updated_at",
    "deleted_at": "deleted_at",
    "name": "name",
    "last_access": "last_access",
}
# The reference's token filters but `key` (graphsvc keeps keys sealed; no filter on them).
TOKEN_FILTERS = {
    "id": FilterColumn("id", "uuid", EQUALITY),
    "user_id": FilterColumn("user_id", "uuid", EQUALITY),
    "name": FilterColumn("name", "text", EQUALITY, nullable=True),
    "hmac_method": FilterColumn("hmac_method", "text", EQUALITY),
    "last_access": FilterColumn("last_access", "time", RANGE),
    "created_at": FilterColumn("created_at", "time", RANGE),
    "updated_at": FilterColumn("updated_at", "time", RANGE),
    "deleted_at": FilterColumn("deleted_at", "time", RANGE, nullable=True),
}


def token_fields(row: Row) -> dict[str, Any]:
    """The TOKEN_FIELDS columns of a row as wire.TokenFields' keywords."""
    token_id, created_at, updated_at, deleted_at, user_id, name, hmac_method, last_access = row
    return {
        "id": token_id,
        "created_at": created_at,
        "updated_at": updated_at,
        "deleted_at": wire.null_time(deleted_at),
        "user_id": wire.null_uuid(user_id),
        "name": wire.null_string(name),
        "key": wire.MASKED_KEY,
        "hmac_method": hmac_method,
        "last_access": last_access,
    }


def token_from_row(row: Row) -> wire.AuthToken:
    """A user's token as the API shows it: never its key."""
    *shared, expires_at = row
    return wire.AuthToken(**token_fields(shared), expires_at=wire.null_time(expires_at))


async def list_user_tokens(
    conn: Connection, filters: Sequence[Filter], sort: Sequence[SortKey]
) -> list[wire.AuthToken]:
    """Live user tokens (not clients'), those the filters let through."""
    args: list[Any] = []
    conditions = ["deleted_at IS NULL", "user_id IS NOT NULL"]
    conditions += filter_conditions(conn.dialect, filters, TOKEN_FILTERS, args)
    rows = await conn.fetch(
        f"""SELECT {TOKEN_COLUMNS} FROM auth_tokens WHERE {" AND ".join(conditions)}
        ORDER BY {order_clause(sort, TOKEN_SORT_COLUMNS, "id")}""",
        *args,
    )
    return [token_from_row(r) for r in rows]


async def find_user_token(conn: Connection, token_id: str) -> wire.AuthToken | None:
    """A live token of a user (not of a client)."""
    r = await conn.fetchrow(
        f"""SELECT {TOKEN_COLUMNS} FROM auth_tokens
        WHERE id = $1 AND deleted_at IS NULL AND user_id IS NOT NULL""",
        token_id,
    )
    return None if r is None else token_from_row(r)


async def revoke_token(conn: Connection, token_id: str, now: datetime) -> None:
    await conn.execute(
        "UPDATE auth_tokens SET deleted_at = $2, updated_at = $2 WHERE id = $1", token_id, now
    )


async def revoke_user_tokens(conn: Connection, user_id: str, now: datetime) -> None:
    await conn.execute(
        """UPDATE auth_tokens SET deleted_at = $2, updated_at = $2
        WHERE user_id = $1 AND deleted_at IS NULL""",
        user_id,
        now,
    )


@dataclass
class UserRow:
    id: str
    name: str  # the reference's principal_name
    role: str
    disabled: bool
    created_at: datetime
    role_id: int
    first_name: str | None
    last_name: str | None
    email_address: str | None
    last_login: datetime | None


USER_COLUMNS = """u.id, u.name, r.name, u.is_disabled, u.created_at, r.id, u.first_name,
    u.last_name, u.email_address, u.last_login"""
# The reference's user filters and sort columns.
USER_FILTERS = {
    "id": FilterColumn("u.id", "uuid", EQUALITY),
    "principal_name": FilterColumn("u.name", "text", EQUALITY),
    "first_name": FilterColumn("u.first_name", "text", EQUALITY, nullable=True),
    "last_name": FilterColumn("u.last_name", "text", EQUALITY, nullable=True),
    "email_address": FilterColumn("u.email_address", "text", EQUALITY, nullable=True),
    "last_login": FilterColumn("u.last_login", "time", RANGE, nullable=True),
    "created_at": FilterColumn("u.created_at", "time", RANGE),
    "updated_at": FilterColumn("u.updated_at", "time", RANGE),
    "deleted_at": FilterColumn("u.deleted_at", "time", RANGE, nullable=True),
}
USER_SORT_COLUMNS = {
    "principal_name": "u.name",
    "first_name": "u.first_name",
    "last_name": "u.last_name",
    "email_address": "u.email_address",
    "last_login": "u.last_login",
    "created_at": "u.created_at",
    "updated_at": "u.updated_at",
    "deleted_at": "u.deleted_at",
}


async def list_users(
    conn: Connection, filters: Sequence[Filter] = (), sort: Sequence[SortKey] = ()
) -> list[UserRow]:
    """The users the filters let through (not deleted ones), by name unless sorted."""
    args: list[Any] = []
    conditions = [
        "u.deleted_at IS NULL",
        *filter_conditions(conn.dialect, filters, USER_FILTERS, args),
    ]
    rows = await conn.fetch(
        f"""SELECT {USER_COLUMNS} FROM users u JOIN roles r ON r.id = u.role_id
        WHERE {" AND ".join(conditions)}
        ORDER BY {order_clause(sort, USER_SORT_COLUMNS, "u.name")}""",
        *args,
    )
    return [UserRow(*r) for r in rows]


async def find_user(conn: Connection, user_id: str) -> UserRow | None:
    r = await conn.fetchrow(
        f"""SELECT {USER_COLUMNS} FROM users u
        JOIN roles r ON r.id = u.role_id WHERE u.id = $1 AND u.deleted_at IS NULL""",
        user_id,
    )
    return None if r is None else UserRow(*r)


async def set_user_profile(
    conn: Connection,
    user_id: str,
    name: str,
    name_key: str,
    first_name: str | None,
    last_name: str | None,
    email_address: str | None,
    now: datetime,
) -> None:
    await conn.execute(
        """UPDATE users SET name = $2, name_key = $3, first_name = $4, last_name = $5,
            email_address = $6, updated_at = $7 WHERE id = $1""",
        user_id,
        name,
        name_key,
        first_name,
        last_name,
        email_address,
        now,
    )


async def set_last_login(conn: Connection, user_id: str, now: datetime) -> None:
    await conn.execute("UPDATE users SET last_login = $2 WHERE id = $1", user_id, now)


async def set_user_disabled(conn: Connection, user_id: str, disabled: bool, now: datetime) -> None:
    await conn.execute(
        "UPDATE users SET is_disabled = $2, updated_at = $3 WHERE id = $1", user_id, disabled, now
    )


async def set_user_role(conn: Connection, user_id: str, role_id: int, now: datetime) -> None:
    await conn.execute(
        "UPDATE users SET role_id = $2, updated_at = $3 WHERE id = $1", user_id, role_id, now
    )


async def delete_user(conn: Connection, user_id: str, now: datetime) -> None:
    """Soft-delete: the row stays for the record; its sessions go, its tokens are revoked."""
    await conn.execute(
        "UPDATE users SET deleted_at = $2, updated_at = $2 WHERE id = $1", user_id, now
    )
    await delete_user_sessions(conn, user_id)
    await revoke_user_tokens(conn, user_id, now)


async def delete_user_sessions(conn: Connection, user_id: str) -> None:
    await conn.execute("DELETE FROM user_sessions WHERE user_id = $1", user_id)


@dataclass
class PermissionRow:
    id: int
    authority: str
    name: str


@dataclass
class RoleRow:
    id: int
    name: str
    description: str
    permissions: list[PermissionRow]  # by authority, then name


# The reference's role and permission filters and sort columns (graphsvc keeps no times
# for either: they are fixed by the schema).
ROLE_FILTERS = {
    "id": FilterColumn("r.id", "int", RANGE, bits=32),
    "name": FilterColumn("r.name", "text", EQUALITY),
}
ROLE_SORT_COLUMNS = {"id": "r.id", "name": "r.name", "description": "r.description"}
PERMISSION_FILTERS = {
    "id": FilterColumn("p.id", "int", RANGE, bits=32),
    "authority": FilterColumn("p.authority", "text", EQUALITY),
    "name": FilterColumn("p.name", "text", EQUALITY),
}
PERMISSION_SORT_COLUMNS = {"id": "p.id", "authority": "p.authority", "name": "p.name"}


async def list_permissions(
    conn: Connection, filters: Sequence[Filter], sort: Sequence[SortKey]
) -> list[PermissionRow]:
    args: list[Any] = []
    conditions = ["TRUE", *filter_conditions(conn.dialect, filters, PERMISSION_FILTERS, args)]
    rows = await conn.fetch(
        f"""SELECT p.id, p.authority, p.name FROM permissions p
        WHERE {" AND ".join(conditions)}
        ORDER BY {order_clause(sort, PERMISSION_SORT_COLUMNS, "p.id")}""",
        *args,
    )
    return [PermissionRow(*r) for r in rows]


async def list_roles(
    conn: Connection, filters: Sequence[Filter], sort: Sequence[SortKey]
) -> list[RoleRow]:
    """The roles the filters let through, each with its permissions."""
    args: list[Any] = []
    conditions = ["TRUE", *filter_conditions(conn.dialect, filters, ROLE_FILTERS, args)]
    rows = await conn.fetch(
        f"""SELECT r.id, r.name, r.description FROM roles r WHERE {" AND ".join(conditions)}
        ORDER BY {order_clause(sort, ROLE_SORT_COLUMNS, "r.id")}""",
        *args,
    )
    roles = {r[0]: RoleRow(r[0], r[1], r[2], []) for r in rows}
    links = await conn.fetch(
        """SELECT rp.role_id, p.id, p.authority, p.name FROM roles_permissions rp
        JOIN permissions p ON p.id = rp.permission_id ORDER BY p.authority, p.name"""
    )
    for role_id, *permission in links:
        if role_id in roles:
            roles[role_id].permissions.append(PermissionRow(*permission))
    return list(roles.values())


async def read_role(conn: Connection, role_id: int) -> RoleRow | None:
    found = await list_roles(conn, [Filter("id", "eq", role_id)], [])
    return found[0] if found else None


async def role_permission_names(conn: Connection, role_id: int) -> tuple[str, list[str]]:
    """A role's name and its permissions (authority/name), sorted."""
    rows = await conn.fetch(
        """SELECT r.name, p.authority, p.name FROM roles r
        LEFT JOIN roles_permissions rp ON rp.role_id = r.id
        LEFT JOIN permissions p ON p.id = rp.permission_id WHERE r.id = $1""",
        role_id,
    )
    names = sorted(f"{a}/{n}" for _, a, n in rows if a is not None)
    return (rows[0][0] if rows else ""), names


async def touch_token(conn: Connection, token_id: str, now: datetime) -> None:
    """Note a verified use; never moved back (a use noted late, after a later one written at
    once, as a job's start writes it)."""
    await conn.execute(
        """UPDATE auth_tokens SET last_access = $2
        WHERE id = $1 AND (last_access IS NULL OR last_access < $2)""",
        token_id,
        now,
    )


async def insert_session(
    conn: Connection, session_id: str, user_id: str, now: datetime, expires_at: datetime
) -> None:
    await conn.execute(
        """INSERT INTO user_sessions (id, user_id, created_at, expires_at)
        VALUES ($1, $2, $3, $4)""",
        session_id,
        user_id,
        now,
        expires_at,
    )


async def find_session_principal(
    conn: Connection, session_id: str, user_id: str, now: datetime
) -> Principal | None:
    r = await conn.fetchrow(
        """SELECT u.id, u.role_id, u.is_disabled, u.secret_expired FROM user_sessions s
        JOIN users u ON u.id = s.user_id AND u.deleted_at IS NULL
        WHERE s.id = $1 AND s.user_id = $2 AND s.expires_at > $3""",
        session_id,
        user_id,
        now,
    )
    return None if r is None else Principal(r[0], r[1], r[2], bool(r[3]))


async def delete_session(conn: Connection, session_id: str) -> None:
    await conn.execute("DELETE FROM user_sessions WHERE id = $1", session_id)


async def expire_user_secret(conn: Connection, user_id: str) -> None:
    await conn.execute("UPDATE users SET secret_expired = TRUE WHERE id = $1", user_id)


async def set_user_secret(
    conn: Connection, user_id: str, secret_digest: str, expired: bool, now: datetime
) -> None:
    await conn.execute(
        """UPDATE users SET secret_digest = $2, secret_expired = $3, updated_at = $4
        WHERE id = $1""",
        user_id,
        secret_digest,
        expired,
        now,
    )


async def find_user_token_id(conn: Connection, user_id: str, name: str) -> str | None:
    """The user's live token of this name (the newest, if several)."""
    found = await conn.fetchval(
        """SELECT id FROM auth_tokens WHERE user_id = $1 AND name = $2 AND deleted_at IS NULL
        ORDER BY created_at DESC LIMIT 1""",
        user_id,
        name,
    )
    return None if found is None else str(found)
