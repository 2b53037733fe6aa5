"""GET /api/v2/audit: the events of changes made over HTTP and on the command line, stored in
the change's own transaction (a refused change leaves none), with the reference's fields,
window, paging, filters and sort; the retention. Both stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from graphsvc.store.db import Connection
from tests.conftest import Env
from tests.test_tokens import send, user_id_of

AUDIT = "/api/v2/audit"


def logs(env: Env, query: str = "") -> list[dict[str, Any]]:
    response = env.get(f"{AUDIT}?{query}" if query else AUDIT)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["data"]["logs"]
    assert response.json()["count"] >= len(found)
    return found


def test_changes_over_http_are_kept_with_who_made_them(env: Env) -> None:
    made = send(env, "POST", "/api/v2/bloodhound-users", {"principal": "lena", "roles": [1]})
    assert made.status_code == 200
    token = send(env, "POST", "/api/v2/tokens", {"token_name": "ci"})
    revoked = send(env, "DELETE", f"/api/v2/tokens/{token.json()['data']['id']}")
    assert revoked.status_code == 200
    events = logs(env)
    assert [e["action"] for e in events] == ["DeleteAuthToken", "CreateAuthToken", "CreateUser"]
    admin = user_id_of(env, env.token)
    assert {(e["actor_id"], e["actor_name"], e["status"]) for e in events} == {
        (admin, "admin", "success")
    }
    assert events[2]["request_id"] == made.headers["requestid"]
    assert events[2]["fields"]["event"] == "user.created" and events[2]["fields"]["user"] == "lena"
    assert len({e["commit_id"] for e in events}) == 3  # one change each
    assert all(e["source_ip_address"] for e in events)


def test_a_refused_change_leaves_no_event(env: Env) -> None:
    assert (
        send(env, "POST", "/api/v2/bloodhound-users", {"principal": "mo", "roles": [1]}).status_code
        == 200
    )
    again = send(env, "POST", "/api/v2/bloodhound-users", {"principal": "mo", "roles": [1]})
    assert again.status_code == 409
    assert [e["action"] for e in logs(env)] == ["CreateUser"]


def test_command_line_changes_are_kept_too(env: Env) -> None:
    done = env.cli("user", "create", "nora", "--role", "Read-Only")
    assert done.exit_code == 0, done.output
    (event,) = logs(env)
    assert event["action"] == "CreateUser" and event["fields"]["user"] == "nora"
    assert event["actor_id"] == "" and event["actor_name"].startswith("command line (")


def test_login_attempts_are_kept_as_the_reference_keeps_them(env: Env) -> None:
    assert env.send_login("admin", "wrong").status_code == 401
    assert env.send_login("nobody", "admin-secret").status_code == 401
    succeeded = env.send_login("admin", "admin-secret")
    assert succeeded.status_code == 200
    newest, unknown, wrong = logs(env, "action=eq:LoginAttempt")
    admin = user_id_of(env, env.token)
    assert (newest["actor_id"], newest["actor_name"], newest["status"]) == (
        admin,
        "admin",
        "success",
    )
    assert newest["request_id"] == succeeded.headers["requestid"]
    assert (wrong["actor_id"], wrong["actor_name"], wrong["status"]) == (admin, "admin", "failure")
    assert wrong["fields"]["reason"] == "invalid username or secret"
    assert (unknown["actor_id"], unknown["actor_name"], unknown["status"]) == (
        "",
        "nobody",
        "failure",
    )
    assert "admin-secret" not in str(logs(env)) and "wrong" not in str(wrong["fields"])
    assert len(logs(env, "status=eq:failure")) == 2


def test_window_paging_filters_and_sort(env: Env) -> None:
    for name in ("olga", "paul", "quin"):
        body = {"principal": name, "roles": [1]}
        assert send(env, "POST", "/api/v2/bloodhound-users", body).status_code == 200
    every = logs(env)
    assert [e["fields"]["user"] for e in every] == ["quin", "paul", "olga"]  # newest first
    oldest_first = logs(env, "sort_by=id")
    assert [e["id"] for e in oldest_first] == sorted(e["id"] for e in every)
    assert [e["fields"]["user"] for e in logs(env, "offset=1&limit=1")] == ["paul"]
    assert logs(env, "skip=1&limit=1") == logs(env, "offset=1&limit=1")
    middle = every[1]
    assert logs(env, f"id=eq:{middle['id']}") == [middle]
    assert len(logs(env, f"id=gte:{middle['id']}")) == 2
    assert logs(env, "action=eq:DeleteUser") == []
    assert len(logs(env, "actor_name=eq:admin&action=eq:CreateUser")) == 3
    later = quote((datetime.now(UTC) + timedelta(minutes=1)).isoformat())
    assert logs(env, f"after={later}&before={later}") == []
    earlier = quote((datetime.now(UTC) - timedelta(minutes=5)).isoformat())
    assert len(logs(env, f"after={earlier}")) == 3
    refused = env.get(f"{AUDIT}?commit_id=eq:x")
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["message"].startswith(
        "the column 'commit_id' cannot be filtered"
    )
    assert env.get(f"{AUDIT}?offset=1&skip=1").status_code == 400


def test_only_user_managers_read_it(env: Env) -> None:
    reader = env.user_with_token("reader", "Read-Only")
    assert env.get(AUDIT, token=reader).status_code == 403


def test_events_past_the_retention_are_dropped(make_env: Any) -> None:
    env = make_env(audit_retention_days=30)
    env.create_admin()

    async def old_event(conn: Connection) -> None:
        await conn.execute(
            """INSERT INTO audit_events (created_at, actor_id, actor_name, actor_email, action,
                fields, request_id, source_ip_address, status, commit_id)
            VALUES ($1, NULL, 'someone', NULL, 'CreateUser', '{}', '', '', 'success', 'c')""",
            datetime.now(UTC) - timedelta(days=31),
        )

    env.run_in_transaction(old_event)
    long_ago = quote((datetime.now(UTC) - timedelta(days=400)).isoformat())
    assert len(logs(env, f"after={long_ago}")) == 1
    assert (
        send(
            env, "POST", "/api/v2/bloodhound-users", {"principal": "rita", "roles": [1]}
        ).status_code
        == 200
    )
    assert [e["fields"].get("user") for e in logs(env, f"after={long_ago}")] == ["rita"]
