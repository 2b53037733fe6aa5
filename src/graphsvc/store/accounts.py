"""Roles and permissions, users, API tokens and login sessions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from graphsvc.store.db import (
    Connection,
)


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


async def list_role_names(conn: Connection) -> list[str]:
    return [r[0] for r in await conn.fetch("SELECT name FROM roles ORDER BY id")]


@dataclass
class Principal:
    """The user a request acts for."""

    user_id: str
    role_id: int
    disabled: bool


@dataclass
class UserLogin:
    id: str
    secret_digest: str | None
    principal: Principal


async def find_user_login(conn: Connection, name: str) -> UserLogin | None:
    r = await conn.fetchrow(
        """SELECT id, secret_digest, role_id, is_disabled FROM users
        WHERE name = $1 AND deleted_at IS NULL""",
        name,
    )
    return None if r is None else UserLogin(r[0], r[1], Principal(r[0], r[2], r[3]))


async def find_user_id(conn: Connection, name: str) -> str | None:
    found = await conn.fetchval("SELECT id FROM users WHERE name = $1 AND deleted_at IS NULL", name)
    return None if found is None else str(found)


async def insert_user(
    conn: Connection,
    user_id: str,
    name: str,
    role_id: int,
    secret_digest: str | None,
    disabled: bool,
    now: datetime,
) -> None:
    await conn.execute(
        """INSERT INTO users (id, name, role_id, secret_digest, is_disabled, created_at,
            updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)""",
        user_id,
        name,
        role_id,
        secret_digest,
        disabled,
        now,
    )


@dataclass
class TokenCredentials:
    key_ciphertext: str
    principal: Principal | None  # None for a token that belongs to a collection client


async def find_token_credentials(conn: Connection, token_id: str) -> TokenCredentials | None:
    r = await conn.fetchrow(
        """SELECT t.key_ciphertext, u.id, u.role_id, u.is_disabled
        FROM auth_tokens t LEFT JOIN users u ON u.id = t.user_id AND u.deleted_at IS NULL
        WHERE t.id = $1 AND t.deleted_at IS NULL
          AND (t.user_id IS NULL OR u.id IS NOT NULL)""",
        token_id,
    )
    if r is None:
        return None
    return TokenCredentials(r[0], None if r[1] is None else Principal(r[1], r[2], r[3]))


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
) -> None:
    await conn.execute(
        """INSERT INTO auth_tokens (id, user_id, client_id, name, key_ciphertext, hmac_method,
            last_access, created_by, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $7, $7)""",
        token_id,
        user_id,
        client_id,
        name,
        key_ciphertext,
        hmac_method,
        now,
        created_by,
    )


async def touch_token(conn: Connection, token_id: str, now: datetime) -> None:
    await conn.execute("UPDATE auth_tokens SET last_access = $2 WHERE id = $1", token_id, now)


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
        """SELECT u.id, u.role_id, u.is_disabled FROM user_sessions s
        JOIN users u ON u.id = s.user_id AND u.deleted_at IS NULL
        WHERE s.id = $1 AND s.user_id = $2 AND s.expires_at > $3""",
        session_id,
        user_id,
        now,
    )
    return None if r is None else Principal(r[0], r[1], r[2])


async def delete_session(conn: Connection, session_id: str) -> None:
    await conn.execute("DELETE FROM user_sessions WHERE id = $1", session_id)


async def set_user_secret(
    conn: Connection, user_id: str, secret_digest: str, now: datetime
) -> None:
    await conn.execute(
        "UPDATE users SET secret_digest = $2, updated_at = $3 WHERE id = $1",
        user_id,
        secret_digest,
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
