"""Users over HTTP as the reference has them: create (POST), the profile fields and the
last login, the self-edit rules (one's own role may be sent unchanged, one may enable but
not disable oneself), one's own secret under auth/ManageSelf with the current one, and
the list's filters. Both stores, answers validated against the OpenAPI document."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.conftest import Env
from tests.test_tokens import send, user_id_of

USERS = "/api/v2/bloodhound-users"
READ_ONLY, ADMINISTRATOR = 1, 5  # the migration's role ids
NEVER = "0001-01-01T00:00:00Z"


def text(field: dict[str, Any]) -> str | None:
    """A NullString's value (the reference's shape for the profile fields)."""
    return field["string"] if field["valid"] else None


def create(env: Env, **fields: Any) -> Any:
    return send(env, "POST", USERS, {"roles": [READ_ONLY], **fields})


def test_create_a_user_who_then_logs_in(env: Env) -> None:
    made = create(
        env,
        principal="alice",
        first_name="Alice",
        last_name="Liddell",
        email_address="alice@example.test",
        secret="a-long-enough-secret",
    )
    assert made.status_code == 200, made.text
    alice = made.json()["data"]
    assert (alice["principal_name"], text(alice["first_name"]), text(alice["last_name"])) == (
        "alice",
        "Alice",
        "Liddell",
    )
    assert text(alice["email_address"]) == "alice@example.test" and alice["is_disabled"] is False
    assert alice["last_login"] == NEVER
    assert [r["name"] for r in alice["roles"]] == ["Read-Only"]
    before = datetime.now(UTC)
    env.login("alice", "a-long-enough-secret")
    seen = send(env, "GET", f"{USERS}/{alice['id']}").json()["data"]
    assert datetime.fromisoformat(seen["last_login"]) >= before.replace(microsecond=0)
    bare = create(env, principal="bob").json()["data"]
    assert [text(bare[f]) for f in ("first_name", "last_name", "email_address")] == [None] * 3


def test_create_refuses_what_it_must(env: Env) -> None:
    assert create(env, principal="carol").status_code == 200
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"principal": "carol"}, 409, "user 'carol' already exists"),
        ({"principal": "dave", "roles": []}, 400, "a user has exactly one role"),
        ({"principal": "dave", "roles": [1, 2]}, 400, "a user has exactly one role"),
        ({"principal": "dave", "roles": [999]}, 400, "no role 999; GET /api/v2/roles"),
        ({"principal": "  "}, 400, "user name must not be empty"),
        ({"principal": "dave", "secret": "short"}, 400, "a user's secret needs at least 12"),
    ]
    for fields, status, message in cases:
        response = create(env, **fields)
        assert response.status_code == status, (fields, response.text)
        assert response.json()["errors"][0]["message"].startswith(message), response.text
    reader = env.user_with_token("reader", "Read-Only")
    refused = send(env, "POST", USERS, {"principal": "eve", "roles": [1]}, reader)
    assert refused.status_code == 403


def test_the_self_edit_rules(env: Env) -> None:
    me = f"{USERS}/{user_id_of(env, env.token)}"
    # The reference's client sends the whole user back: the same role and enabled are fine.
    same = send(env, "PATCH", me, {"roles": [ADMINISTRATOR], "is_disabled": False})
    assert same.status_code == 200, same.text
    changed = send(env, "PATCH", me, {"roles": [READ_ONLY]})
    assert changed.status_code == 400
    assert changed.json()["errors"][0]["message"] == "you cannot change the role of yourself"
    disabled = send(env, "PATCH", me, {"is_disabled": True})
    assert disabled.json()["errors"][0]["message"] == "you cannot disable yourself"
    renamed = send(env, "PATCH", me, {"first_name": "Ada", "email_address": "ada@x.test"})
    assert renamed.status_code == 200
    after = renamed.json()["data"]
    assert (text(after["first_name"]), text(after["last_name"])) == (
        "Ada",
        None,
    )
    assert send(env, "GET", me).json()["data"]["roles"][0]["name"] == "Administrator"


def test_rename_and_profile_of_another_user(env: Env) -> None:
    frank = create(env, principal="frank", last_name="Zappa").json()["data"]
    create(env, principal="grace")
    path = f"{USERS}/{frank['id']}"
    taken = send(env, "PATCH", path, {"principal": "grace"})
    assert taken.status_code == 409
    done = send(env, "PATCH", path, {"principal": "francis", "first_name": "Francis"})
    assert done.status_code == 200, done.text
    body = done.json()["data"]
    assert (body["principal_name"], text(body["first_name"]), text(body["last_name"])) == (
        "francis",
        "Francis",
        "Zappa",  # an absent field is left as it was
    )


def test_ones_own_secret_under_manage_self(env: Env) -> None:
    made = create(env, principal="henry", secret="henrys-first-secret")
    henry_id = made.json()["data"]["id"]
    assert made.status_code == 200
    stranger = env.user_with_token("stranger", "Read-Only")  # auth/ManageSelf, not ManageUsers
    own = env.run_in_transaction(lambda conn: _token_for(env, conn, "henry"))
    path = f"{USERS}/{henry_id}/secret"
    missing = send(env, "PUT", path, {"secret": "henrys-second-secret"}, own)
    assert missing.status_code == 400
    assert missing.json()["errors"][0]["message"].startswith("current_secret is required")
    wrong = send(
        env, "PUT", path, {"secret": "henrys-second-secret", "current_secret": "nope"}, own
    )
    assert wrong.status_code == 403
    right = send(
        env,
        "PUT",
        path,
        {"secret": "henrys-second-secret", "current_secret": "henrys-first-secret"},
        own,
    )
    assert right.status_code == 200, right.text
    env.login("henry", "henrys-second-secret")
    # Another user's secret takes auth/ManageUsers.
    other = send(env, "PUT", path, {"secret": "not-henrys-choice"}, stranger)
    assert other.status_code == 403
    assert send(env, "PUT", path, {"secret": "set-by-the-admin"}).status_code == 200
    env.login("henry", "set-by-the-admin")


def test_an_expired_secret_must_be_changed_first(env: Env) -> None:
    ivy_id = create(
        env, principal="ivy", secret="ivys-first-secret", needs_password_reset=True
    ).json()["data"]["id"]
    login = env.send_login("ivy", "ivys-first-secret").json()["data"]
    assert login["auth_expired"] is True
    session = {"Authorization": f"Bearer {login['session_token']}"}
    assert env.request("GET", "/api/v2/self", session).status_code == 200
    refused = env.request("GET", "/api/v2/roles", session)
    assert refused.status_code == 403
    assert refused.json()["errors"][0]["message"].startswith("the secret of this user has expired")
    someone_else = f"{USERS}/{user_id_of(env, env.token)}/secret"
    body = b'{"secret": "set-by-ivy-for-admin"}'
    assert env.request("PUT", someone_else, session, content=body).status_code == 403
    changed = env.request(
        "PUT",
        f"{USERS}/{ivy_id}/secret",
        session,
        content=b'{"secret": "ivys-own-secret", "current_secret": "ivys-first-secret"}',
    )
    assert changed.status_code == 200, changed.text
    again = env.send_login("ivy", "ivys-own-secret").json()["data"]
    assert again["auth_expired"] is False
    fresh = {"Authorization": f"Bearer {again['session_token']}"}
    assert env.request("GET", "/api/v2/roles", fresh).status_code == 200
    # An administrator can expire it again; without the flag a secret it sets is not expired.
    reset = {"secret": "ivys-next-secret", "needs_password_reset": True}
    assert send(env, "PUT", f"{USERS}/{ivy_id}/secret", reset).status_code == 200
    assert env.send_login("ivy", "ivys-next-secret").json()["data"]["auth_expired"] is True
    assert (
        send(env, "PUT", f"{USERS}/{ivy_id}/secret", {"secret": "ivys-last-secret"}).status_code
        == 200
    )
    assert env.send_login("ivy", "ivys-last-secret").json()["data"]["auth_expired"] is False


async def _token_for(env: Env, conn: Any, name: str) -> Any:
    from graphsvc.accounts import tokens

    return await tokens.create_user_token(conn, env.keys, name)


def test_user_list_filters(env: Env) -> None:
    for name, first in (("ivan", "Ivan"), ("judy", None), ("karl", "Karl")):
        assert create(env, principal=name, first_name=first).status_code == 200

    def names(query: str) -> list[str]:
        response = send(env, "GET", f"{USERS}?{query}")
        assert response.status_code == 200, response.text
        return [u["principal_name"] for u in response.json()["data"]["users"]]

    assert names("principal_name=eq:judy") == ["judy"]
    assert names("first_name=eq:null&principal_name=neq:admin") == ["judy"]
    assert names("first_name=neq:null&sort_by=-principal_name") == ["karl", "ivan"]
    assert names("last_login=eq:null&sort_by=principal_name") == ["admin", "ivan", "judy", "karl"]
    refused = send(env, "GET", f"{USERS}?role=eq:1")
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["message"].startswith("the column 'role' cannot be")
