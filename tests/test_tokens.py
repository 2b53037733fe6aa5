"""Who am I, API tokens over HTTP (create, list, revoke, expire) and on the command line, and
users an Administrator disables, enables, deletes or changes: every answer validated
against the OpenAPI document, on both stores."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx2 as httpx
import pytest

from graphsvc.accounts import tokens, users
from graphsvc.store import accounts
from graphsvc.store.db import asyncpg_dsn, run_in_transaction
from tests.conftest import TEST_FERNET_KEY, Env, served, server_environment, signed_headers

AGG = "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"


def send(env: Env, method: str, uri: str, body: Any = None, token: Any = None) -> httpx.Response:
    content = b"" if body is None else json.dumps(body).encode()
    headers = env.signed_headers(method, uri, token, body=content)
    return env.request(method, uri, headers, content=content or None)


def test_self_names_the_caller_its_role_and_token(env: Env) -> None:
    signed = env.get("/api/v2/self").json()["data"]
    assert signed["principal_name"] == "admin" and signed["token"]["id"] == env.token.id
    assert signed["token"]["key"] == "********"
    role = signed["roles"][0]
    assert role["name"] == "Administrator"
    assert ("auth", "ManageUsers") in {(p["authority"], p["name"]) for p in role["permissions"]}
    jwt = env.login()
    session = env.request("GET", "/api/v2/self", {"Authorization": f"Bearer {jwt}"}).json()
    assert session["data"]["token"] is None


def test_upload_only_may_ask_who_it_is(env: Env) -> None:
    uploader = env.user_with_token("uploader", "Upload-Only")
    me = env.get("/api/v2/self", token=uploader).json()["data"]
    names = {f"{p['authority']}/{p['name']}" for p in me["roles"][0]["permissions"]}
    assert me["principal_name"] == "uploader" and "graphdb/Read" not in names
    assert env.get(AGG, token=uploader).status_code == 403


def test_create_list_use_and_revoke_an_own_token(env: Env) -> None:
    reader = env.user_with_token("reader", "Read-Only")
    made = send(env, "POST", "/api/v2/tokens", {"token_name": "ci"}, reader)
    assert made.status_code == 200, made.text
    created = made.json()["data"]
    assert created["name"] == {"string": "ci", "valid": True} and len(created["key"]) > 20
    assert created["expires_at"]["valid"] is False
    fresh = tokens.CreatedToken(created["id"], created["key"], None)
    assert env.get(AGG, token=fresh).status_code == 200
    listed = send(env, "GET", "/api/v2/tokens", token=reader).json()["data"]["tokens"]
    assert {t["id"] for t in listed} == {reader.id, fresh.id}
    assert all(t["key"] == "********" for t in listed)
    gone = send(env, "DELETE", f"/api/v2/tokens/{fresh.id}", token=reader)
    assert gone.status_code == 200 and gone.json()["data"]["deleted_at"]["valid"] is True
    refused = env.get(AGG, token=fresh)
    assert refused.status_code == 401


def test_only_an_administrator_acts_on_other_users_tokens(env: Env) -> None:
    reader = env.user_with_token("reader", "Read-Only")
    admin_id = env.get("/api/v2/self").json()["data"]["id"]
    others = send(env, "GET", f"/api/v2/tokens?user_id={admin_id}", token=reader)
    assert others.status_code == 403
    made = send(env, "POST", "/api/v2/tokens", {"user_id": admin_id}, reader)
    assert made.status_code == 403
    assert send(env, "DELETE", f"/api/v2/tokens/{env.token.id}", token=reader).status_code == 404
    everyone = send(env, "GET", "/api/v2/tokens").json()["data"]["tokens"]
    assert {env.token.id, reader.id} <= {t["id"] for t in everyone}
    assert send(env, "DELETE", f"/api/v2/tokens/{reader.id}").status_code == 200
    assert env.get(AGG, token=reader).status_code == 401


@pytest.mark.parametrize(
    ("body", "context"),
    [
        ({"expires_at": "2000-01-01T00:00:00Z"}, "expires_at"),
        ({"lifetime_seconds": 5}, "body"),
        ({"lifetime_seconds": 600, "expires_at": "2999-01-01T00:00:00Z"}, "expires_at"),
        ({"token_name": 7}, "body"),
        ({"surprise": True}, "body"),
    ],
)
def test_bad_token_requests_are_400(env: Env, body: dict[str, Any], context: str) -> None:
    response = send(env, "POST", "/api/v2/tokens", body)
    assert response.status_code == 400 and response.json()["errors"][0]["context"] == context


def test_an_expired_token_is_refused_saying_so(env: Env) -> None:
    made = send(env, "POST", "/api/v2/tokens", {"lifetime_seconds": 600}).json()["data"]
    assert made["expires_at"]["valid"] is True
    past = datetime.now(UTC) - timedelta(minutes=1)

    async def expired(conn):  # type: ignore[no-untyped-def]
        user_id = await accounts.find_user_id(conn, "admin")
        return await tokens.create_token(conn, env.keys, user_id=user_id, expires_at=past)

    old = env.run_in_transaction(expired)
    refused = env.get(AGG, token=old)
    assert refused.status_code == 401 and "expired at" in refused.json()["errors"][0]["message"]


def test_users_disabled_enabled_changed_and_deleted_on_the_command_line(env: Env) -> None:
    worker = env.user_with_token("worker", "User", secret="worker-secret-1")
    session = env.login("worker", "worker-secret-1")
    bearer = {"Authorization": f"Bearer {session}"}
    assert env.cli("user", "disable", "worker").exit_code == 0
    assert env.get(AGG, token=worker).json()["errors"][0]["message"] == "user is disabled"
    assert env.request("GET", AGG, bearer).status_code == 401  # its sessions ended
    assert env.cli("user", "enable", "worker").exit_code == 0
    assert env.get(AGG, token=worker).status_code == 200
    assert env.cli("user", "set-role", "worker", "Upload-Only").exit_code == 0
    assert env.get(AGG, token=worker).status_code == 403
    changed = env.cli("user", "set-secret", "worker", stdin="another-secret-2\n")
    assert changed.exit_code == 0, changed.output
    env.login("worker", "another-secret-2")
    listed = json.loads(env.cli("user", "list", "--json").output)
    assert {u["name"]: u["role"] for u in listed}["worker"] == "Upload-Only"
    assert env.cli("user", "delete", "worker").exit_code == 0
    assert env.get(AGG, token=worker).status_code == 401
    assert "worker" not in env.cli("user", "list").output


def test_tokens_on_the_command_line(env: Env) -> None:
    made = env.cli("token", "create", "--user", "admin", "--name", "ci", "--expires-in", "2h")
    assert made.exit_code == 0, made.output
    token_id = made.output.split("token id:")[1].split()[0]
    listed = env.cli("token", "list", "--user", "admin")
    assert token_id in listed.output and "expires" in listed.output
    assert env.cli("token", "revoke", token_id).exit_code == 0
    assert token_id not in env.cli("token", "list").output
    bad = env.cli("token", "create", "--user", "admin", "--expires-in", "soon")
    assert bad.exit_code == 1 and "--expires-in" in bad.stderr


def test_a_token_never_used_is_listed_as_such(env: Env) -> None:
    """`token list` says `last used never` until the token signs a request, then when it
    last did; its --json shows `last_access` as GET /api/v2/tokens does (the creation time,
    until the first use)."""
    made = env.cli("token", "create", "--user", "admin", "--name", "fresh", "--json")
    assert made.exit_code == 0, made.output
    created = json.loads(made.stdout)

    def listed() -> tuple[str, dict[str, Any], dict[str, Any]]:
        text = env.cli("token", "list", "--user", "admin").stdout
        line = next(line for line in text.splitlines() if line.startswith(created["id"]))
        mine = json.loads(env.cli("token", "list", "--user", "admin", "--json").stdout)
        uri = f"/api/v2/tokens?id={created['id']}"
        (over_http,) = send(env, "GET", uri).json()["data"]["tokens"]
        return line, next(t for t in mine if t["id"] == created["id"]), over_http

    line, on_the_command_line, over_http = listed()
    assert line.endswith("last used never"), line
    assert on_the_command_line == over_http
    assert over_http["last_access"] == over_http["created_at"] == created["last_access"]

    fresh = tokens.CreatedToken(created["id"], created["key"], None)
    assert env.get(AGG, token=fresh).status_code == 200
    deadline = time.monotonic() + 10
    while (found := listed())[0].endswith("last used never"):  # written after the answer
        assert time.monotonic() < deadline, "last_access was not written"
        time.sleep(0.05)
    line, on_the_command_line, over_http = found
    used = datetime.fromisoformat(over_http["last_access"])
    assert line.endswith(f"last used {used:%Y-%m-%d %H:%M}"), line
    assert on_the_command_line == over_http and over_http["last_access"] != created["created_at"]


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_a_token_revoked_on_one_replica_is_refused_by_another(
    database_url: str, tmp_path: Path
) -> None:
    async def admin(conn):  # type: ignore[no-untyped-def]
        from graphsvc.crypto import KeyBox

        await users.create_user(conn, "admin", "Administrator", "admin-secret-1", False)
        return await tokens.create_user_token(conn, KeyBox(TEST_FERNET_KEY.encode()), "admin")

    token = asyncio.run(run_in_transaction(database_url, admin))
    with contextlib.ExitStack() as stack:
        bases = [
            stack.enter_context(
                served(
                    server_environment(database_url, tmp_path / f"r{i}", token_cache_seconds="1")
                )
            )[0]
            for i in range(2)
        ]

        def get(base: str, method: str, uri: str) -> int:
            headers = signed_headers(token, method, uri)
            return httpx.request(method, base + uri, headers=headers, timeout=10).status_code

        assert get(bases[1], "GET", AGG) == 200  # replica 1 now holds the record in its cache
        assert get(bases[0], "DELETE", f"/api/v2/tokens/{token.id}") == 200
        # Not an event: the cache time passing is what is tested; refused within it and a
        # margin.
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline and get(bases[1], "GET", AGG) == 200:
            time.sleep(0.1)
        assert get(bases[1], "GET", AGG) == 401


def test_an_administrator_manages_users_over_http(env: Env) -> None:
    worker = env.user_with_token("worker", "User", secret="worker-secret-1")
    users = send(env, "GET", "/api/v2/bloodhound-users").json()["data"]["users"]
    by_name = {u["principal_name"]: u for u in users}
    worker_id, admin_id = by_name["worker"]["id"], by_name["admin"]["id"]
    assert by_name["worker"]["roles"][0]["name"] == "User"
    path = f"/api/v2/bloodhound-users/{worker_id}"
    assert send(env, "GET", path).json()["data"]["principal_name"] == "worker"
    disabled = send(env, "PATCH", path, {"is_disabled": True})
    assert disabled.status_code == 200 and disabled.json()["data"]["is_disabled"] is True
    assert env.get(AGG, token=worker).status_code == 403
    upload_only = 2  # the migration's second role
    changed = send(env, "PATCH", path, {"is_disabled": False, "roles": [upload_only]})
    assert changed.json()["data"]["roles"][0]["name"] == "Upload-Only"
    secret = send(env, "PUT", f"{path}/secret", {"secret": "brand-new-secret-3"})
    assert secret.status_code == 200
    env.login("worker", "brand-new-secret-3")
    short = send(env, "PUT", f"{path}/secret", {"secret": "short"})
    assert short.status_code == 400
    assert send(env, "PATCH", path, {"roles": [1, 2]}).status_code == 400
    assert send(env, "PATCH", path, {"roles": [999]}).status_code == 400
    myself = f"/api/v2/bloodhound-users/{admin_id}"
    assert send(env, "PATCH", myself, {"is_disabled": True}).status_code == 400
    assert send(env, "DELETE", myself).status_code == 400
    assert send(env, "DELETE", path).status_code == 200
    assert env.get(AGG, token=worker).status_code == 401
    assert send(env, "GET", path).status_code == 404
    reader = env.user_with_token("reader", "Read-Only")
    assert send(env, "GET", "/api/v2/bloodhound-users", token=reader).status_code == 403


def user_id_of(env: Env, token: tokens.CreatedToken) -> str:
    user_id: str = env.get("/api/v2/self", token=token).json()["data"]["id"]
    return user_id


USERS = "/api/v2/bloodhound-users"
READ_ONLY = 1  # the migration's first role


@pytest.mark.parametrize(
    ("change", "refused"),
    [("revoke", 401), ("delete", 401), ("disable", 403), ("demote", 403)],
)
def test_a_change_to_a_cached_token_takes_effect_at_once(
    make_env: Callable[..., Env], change: str, refused: int
) -> None:
    """The process that revokes a token, or deletes, disables or demotes its user, refuses
    it from its next request, however long it may otherwise reuse the token's record."""
    env = make_env(token_cache_seconds=600)
    env.create_admin()
    other = env.user_with_token("other", "Administrator")
    other_id = user_id_of(env, other)
    assert send(env, "GET", USERS, token=other).status_code == 200  # its record now cached
    if change == "revoke":
        done = send(env, "DELETE", f"/api/v2/tokens/{other.id}")
    elif change == "delete":
        done = send(env, "DELETE", f"{USERS}/{other_id}")
    elif change == "disable":
        done = send(env, "PATCH", f"{USERS}/{other_id}", {"is_disabled": True})
    else:
        done = send(env, "PATCH", f"{USERS}/{other_id}", {"roles": [READ_ONLY]})
    assert done.status_code == 200, done.text
    assert send(env, "GET", USERS, token=other).status_code == refused


def test_a_deleted_administrator_cannot_delete_the_other(make_env: Callable[..., Env]) -> None:
    env = make_env(token_cache_seconds=600)
    env.create_admin()
    other = env.user_with_token("other", "Administrator")
    admin_id, other_id = user_id_of(env, env.token), user_id_of(env, other)
    assert send(env, "DELETE", f"{USERS}/{other_id}").status_code == 200
    assert send(env, "DELETE", f"{USERS}/{admin_id}", token=other).status_code == 401
    assert send(env, "GET", f"{USERS}/{admin_id}").status_code == 200


@pytest.mark.parametrize(
    ("change", "refused"), [("delete", 401), ("disable", 403), ("demote", 403)]
)
def test_another_process_refuses_account_changes_by_a_removed_administrator(
    make_env: Callable[..., Env], change: str, refused: int
) -> None:
    """A second process may accept the removed Administrator's token for reads until its
    cache time passes, but every change to accounts checks the caller again in its own
    transaction."""
    first, second = make_env(token_cache_seconds=600), make_env(token_cache_seconds=600)
    first.create_admin()
    other = first.user_with_token("other", "Administrator")
    worker = first.user_with_token("worker", "User")
    admin_id, other_id = user_id_of(first, first.token), user_id_of(first, other)
    worker_id = user_id_of(first, worker)
    assert send(second, "GET", USERS, token=other).status_code == 200  # cached by the second
    path = f"{USERS}/{other_id}"
    if change == "delete":
        done = send(first, "DELETE", path)
    elif change == "disable":
        done = send(first, "PATCH", path, {"is_disabled": True})
    else:
        done = send(first, "PATCH", path, {"roles": [READ_ONLY]})
    assert done.status_code == 200, done.text
    attempts = [
        send(second, "DELETE", f"{USERS}/{admin_id}", token=other),
        send(second, "PATCH", f"{USERS}/{worker_id}", {"is_disabled": True}, other),
        send(second, "PUT", f"{USERS}/{worker_id}/secret", {"secret": "x" * 12}, other),
        send(second, "DELETE", f"/api/v2/tokens/{worker.id}", token=other),
    ]
    made = send(second, "POST", "/api/v2/tokens", {"token_name": "late"}, other)
    # Demoted to Read-Only, it may still act on its own tokens, on no one else's.
    expected = [refused] * 3 + ([404, 200] if change == "demote" else [refused] * 2)
    assert [a.status_code for a in [*attempts, made]] == expected
    assert send(first, "GET", f"{USERS}/{worker_id}").json()["data"]["is_disabled"] is False


async def lock_waiters(conn: asyncpg.Connection) -> int:
    """Sessions of this database waiting for a lock."""
    count: int = await conn.fetchval(
        """SELECT count(*) FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock'"""
    )
    return count


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_two_administrators_deleting_each_other_at_once_leave_one(
    make_env: Callable[..., Env], database_url: str
) -> None:
    """Two processes (two apps, each with its own pool) delete each other's Administrator
    while both transactions are open: the first is held just before its commit by a row lock
    taken here, the second is sent meanwhile, then the lock is let go."""
    first, second = make_env(), make_env()
    first.create_admin()
    other = first.user_with_token("other", "Administrator")
    admin_id, other_id = user_id_of(first, first.token), user_id_of(first, other)

    async def race() -> list[int]:
        conn = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            async with conn.transaction():
                # The first deletion revokes the user's tokens last: it waits on this lock.
                await conn.execute(
                    "SELECT 1 FROM auth_tokens WHERE user_id = $1 FOR UPDATE", other_id
                )
                one = asyncio.create_task(
                    asyncio.to_thread(send, first, "DELETE", f"{USERS}/{other_id}")
                )
                while await lock_waiters(conn) < 1:
                    await asyncio.sleep(0.01)
                two = asyncio.create_task(
                    asyncio.to_thread(send, second, "DELETE", f"{USERS}/{admin_id}", None, other)
                )
                async with asyncio.timeout(10):  # the second answers, or waits on the first
                    while not two.done() and await lock_waiters(conn) < 2:
                        await asyncio.sleep(0.01)
        finally:
            await conn.close()
        return [(await one).status_code, (await two).status_code]

    assert asyncio.run(race()) == [200, 401]
    remaining = send(first, "GET", USERS).json()["data"]["users"]
    assert [u["principal_name"] for u in remaining] == ["admin"]


def test_names_the_store_cannot_keep_are_refused_on_the_command_line(env: Env) -> None:
    long = "x" * 256
    made = env.cli("user", "create", long, "--role", "User")
    assert made.exit_code == 1 and "name: name must be at most 255 characters" in made.stderr
    made = env.cli("token", "create", "--user", "admin", "--name", long)
    assert made.exit_code == 1 and "token_name: token_name must be at most 255" in made.stderr
    assert env.cli("token", "create", "--user", "admin", "--name", "x" * 255).exit_code == 0
