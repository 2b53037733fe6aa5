"""Migration 0018: user names get their key (NFKC, case-folded, trimmed), unique among live
users; a store whose live users already read alike is not upgraded, and says who they are;
the downgrade brings the unique name back, keeping one holder of each. And the unique index
refuses a name a concurrent transaction took. Both stores."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from alembic import command

from graphsvc.accounts import users
from graphsvc.errors import ApiError
from graphsvc.store import accounts
from graphsvc.store.db import Connection, database_errors, run_in_transaction
from graphsvc.store.migrate import alembic_config, upgrade_schema
from tests.conftest import Env
from tests.test_tokens import send

NOW = datetime(2026, 11, 1, tzinfo=UTC)
USERS = "/api/v2/bloodhound-users"


def run_sql(url: str, work: Any) -> Any:
    return asyncio.run(run_in_transaction(url, work))


def seed_users(url: str, *people: tuple[str, bool]) -> list[str]:
    """Users as revision 0017 keeps them, oldest first: (name, deleted); their ids."""
    ids = [str(uuid.uuid4()) for _ in people]

    async def work(conn: Connection) -> None:
        for n, ((name, deleted), user_id) in enumerate(zip(people, ids, strict=True)):
            at = NOW + timedelta(minutes=n)
            await conn.execute(
                """INSERT INTO users (id, name, role_id, is_disabled, created_at, updated_at,
                    deleted_at) VALUES ($1, $2, 1, FALSE, $3, $3, $4)""",
                user_id,
                name,
                at,
                at if deleted else None,
            )

    run_sql(url, work)
    return ids


def stored_users(url: str) -> list[tuple[Any, ...]]:
    async def work(conn: Connection) -> list[Any]:
        return await conn.fetch("SELECT name, name_key FROM users ORDER BY created_at")

    return [tuple(r) for r in run_sql(url, work)]


def test_live_users_that_read_alike_stop_the_upgrade(database_url: str) -> None:
    config = alembic_config(database_url)
    command.downgrade(config, "0017")
    admin, upper, _, _, _ = seed_users(
        database_url,
        ("admin", False),
        ("ADMIN", False),
        ("admin ", True),  # deleted: no longer a name anyone holds
        ("bob", False),
        ("Bob", True),
    )

    async def open_session(conn: Connection) -> None:
        await conn.execute(
            """INSERT INTO user_sessions (id, user_id, created_at, expires_at)
            VALUES ($1, $2, $3, $3)""",
            str(uuid.uuid4()),
            admin,
            NOW,
        )

    async def count_sessions(conn: Connection) -> int:
        return int(await conn.fetchval("SELECT count(*) FROM user_sessions"))

    run_sql(database_url, open_session)
    with pytest.raises(RuntimeError) as stopped:
        upgrade_schema(database_url)
    message = str(stopped.value)
    assert f"'admin' ({admin}); 'ADMIN' ({upper})" in message
    assert "bob" not in message.lower() and "\n" not in message  # the CLI shows one line
    assert message.endswith(
        "rename or delete all but one of each with the graphsvc that made them, then upgrade again"
    )

    async def delete_upper(conn: Connection) -> None:
        await conn.execute("UPDATE users SET deleted_at = $2 WHERE id = $1", upper, NOW)

    run_sql(database_url, delete_upper)
    assert upgrade_schema(database_url)[:1] == ["0018"]  # then any later revision
    # SQLite rebuilds the table: its rows' sessions (ON DELETE CASCADE) stay.
    assert run_sql(database_url, count_sessions) == 1
    assert stored_users(database_url) == [
        ("admin", "admin"),
        ("ADMIN", "admin"),
        ("admin ", "admin"),
        ("bob", "bob"),
        ("Bob", "bob"),
    ]

    async def create(conn: Connection, name: str) -> str:
        return await users.create_user(conn, name, "User", None, False)

    with pytest.raises(ApiError) as refused:
        run_sql(database_url, lambda conn: create(conn, "BOB"))
    assert refused.value.status == 409 and "the existing user 'bob'" in refused.value.message
    run_sql(database_url, lambda conn: create(conn, "carol"))
    assert stored_users(database_url)[-1] == ("carol", "carol")


def test_the_downgrade_keeps_one_holder_of_each_name(database_url: str) -> None:
    """A name given again after its user was deleted stays with the live user (or the
    newest); the deleted rows that shared it are renamed, and the unique name is back."""
    ids: list[str] = []

    async def make_three_olives(conn: Connection) -> None:
        for _ in range(3):
            if ids:
                await users.delete_user(conn, None, ids[-1])
            ids.append(await users.create_user(conn, "olive", "User", None, False))

    run_sql(database_url, make_three_olives)
    config = alembic_config(database_url)
    command.downgrade(config, "0017")

    async def names(conn: Connection) -> list[Any]:
        return await conn.fetch("SELECT CAST(id AS text), name FROM users ORDER BY created_at")

    assert [tuple(r) for r in run_sql(database_url, names)] == [
        (ids[0], f"deleted user {ids[0]}"),
        (ids[1], f"deleted user {ids[1]}"),
        (ids[2], "olive"),
    ]
    with pytest.raises(database_errors()):
        seed_users(database_url, ("olive", True))
    assert upgrade_schema(database_url)[:1] == ["0018"]  # then any later revision


def test_a_name_taken_after_the_check_is_a_409(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL the command line's transaction can add a user between another's check of
    the name and its insert: the insert then adds nothing and the answer is a 409."""
    assert send(env, "POST", USERS, {"principal": "zed", "roles": [1]}).status_code == 200

    async def sees_no_one(conn: Connection, key: str) -> None:
        return None

    monkeypatch.setattr(accounts, "find_user_by_key", sees_no_one)
    refused = send(env, "POST", USERS, {"principal": "Zed", "roles": [1]})
    assert refused.status_code == 409, refused.text
    error = refused.json()["errors"][0]
    assert error == {
        "context": "principal",
        "message": "a user named 'Zed' or alike was created meanwhile",
    }
