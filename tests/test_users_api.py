"""Users over HTTP as the reference has them: create (POST), the profile fields and the
last login, the self-edit rules (one's own role may be sent unchanged, one may enable but
not disable oneself), one's own secret under auth/ManageSelf with the current one, and
the list's filters; names that read alike refused, and a deleted user's name given again.
Both stores, answers validated against the OpenAPI document."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import argon2
import pytest

from graphsvc import crypto
from graphsvc.accounts import users
from graphsvc.store.db import Connection, run_in_transaction
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


def test_a_secret_changed_while_the_current_one_is_checked_is_kept(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One's own new secret is hashed before the change's transaction: a change that lands
    meanwhile (an administrator's here) is not overwritten on the strength of the current
    secret checked before it, and the answer says so (409)."""
    henry_id = create(env, principal="henry", secret="henrys-first-secret").json()["data"]["id"]
    own = env.run_in_transaction(lambda conn: _token_for(env, conn, "henry"))

    async def set_by_the_admin(conn: Connection) -> None:
        await users.store_user_secret(conn, henry_id, "set-by-the-admin")

    class Meanwhile(argon2.PasswordHasher):
        def hash(self, password: str | bytes, *, salt: bytes | None = None) -> str:
            if password == "henrys-second-secret":  # the change under way: another lands
                asyncio.run(run_in_transaction(env.url, set_by_the_admin))
            return super().hash(password, salt=salt)

    cheapest = argon2.profiles.CHEAPEST
    hasher = Meanwhile(cheapest.time_cost, cheapest.memory_cost, cheapest.parallelism)
    monkeypatch.setattr(crypto, "password_hasher", hasher)
    body = {"secret": "henrys-second-secret", "current_secret": "henrys-first-secret"}
    refused = send(env, "PUT", f"{USERS}/{henry_id}/secret", body, own)
    assert refused.status_code == 409, refused.text
    error = refused.json()["errors"][0]
    assert error["context"] == "current_secret"
    assert error["message"].startswith("the secret changed while current_secret was being")
    env.login("henry", "set-by-the-admin")
    assert env.send_login("henry", "henrys-second-secret").status_code == 401


def test_names_that_read_alike_are_one_name(env: Env) -> None:
    """Compared in NFKC, case-folded and trimmed: another user's name in other letters is a
    409 naming the user; login stays exact, as the reference's."""
    full_width, circled = "\uff41\uff44\uff4d\uff49\uff4e", "\u24d0dmin"
    cases = [
        ("ADMIN", "user name 'ADMIN' reads as the existing user 'admin'"),
        (full_width, f"user name '{full_width}' reads as the existing user 'admin'"),
        (circled, f"user name '{circled}' reads as the existing user 'admin'"),
    ]
    for name, message in cases:
        refused = create(env, principal=name)
        assert refused.status_code == 409, (name, refused.text)
        error = refused.json()["errors"][0]
        assert (error["context"], error["message"][: len(message)]) == ("principal", message)
    kim = create(env, principal="kim").json()["data"]
    renamed = send(env, "PATCH", f"{USERS}/{kim['id']}", {"principal": "ADMIN"})
    assert renamed.status_code == 409, renamed.text
    assert renamed.json()["errors"][0]["message"].startswith("user name 'ADMIN' reads as")
    # One's own name in other letters is one's own.
    assert send(env, "PATCH", f"{USERS}/{kim['id']}", {"principal": "Kim"}).status_code == 200
    assert env.send_login("ADMIN", "admin-secret").status_code == 401
    cli = env.cli("user", "create", "Admin", "--role", "User")
    assert cli.exit_code == 1 and "user name 'Admin' reads as the existing user" in cli.stderr


def test_names_that_could_pass_for_another_are_refused(env: Env) -> None:
    cases = [
        ("\u0430dmin", "principal mixes scripts (Cyrillic, Latin)"),  # a Cyrillic a
        ("\u0391dmin", "principal mixes scripts (Greek, Latin)"),  # a Greek capital alpha
        ("ad\u200bmin", "principal must not hold invisible or control characters (U+200B)"),
        ("admin\u202e", "principal must not hold invisible or control characters (U+202E)"),
        ("admin ", "principal must not begin or end with white space"),
        ("\ufdfa" * 20, "principal must be at most 255 characters once normalized"),
    ]
    for name, message in cases:
        refused = create(env, principal=name)
        assert refused.status_code == 400, (name, refused.text)
        error = refused.json()["errors"][0]
        assert (error["context"], error["message"][: len(message)]) == ("principal", message)
    # One script, digits and punctuation, or the ways CJK names are written, are fine.
    for name in ("\u0438\u0432\u0430\u043d", "\u5c71\u7530\u305f\u308d\u3046", "jos\u00e9.m-2"):
        made = create(env, principal=name)
        assert made.status_code == 200, (name, made.text)
    refused = send(
        env, "PATCH", f"{USERS}/{user_id_of(env, env.token)}", {"principal": "\u0430dmin"}
    )
    assert refused.status_code == 400
    cli = env.cli("user", "create", "\u0430dmin", "--role", "User")
    assert cli.exit_code == 1 and "name mixes scripts (Cyrillic, Latin)" in cli.stderr


def test_names_holding_characters_shown_as_nothing_are_refused(env: Env) -> None:
    """Unicode's default-ignorable code points, which no category refused: variation
    selectors, U+034F, the Hangul fillers. Each made a second `admin` (or `admin2`) that
    logged in."""
    assert create(env, principal="admin2").status_code == 200
    cases = [
        ("admin\ufe0f", "FE0F"),
        ("adm\u034fin", "034F"),
        ("admin\u115f", "115F"),
        ("admin2\ufe00", "FE00"),
        ("admin2\U000e0100", "E0100"),
        ("admin2\u1160", "1160"),
        ("\u3164", "3164"),
        ("admin\uffa0", "FFA0"),
        ("admin\u180b", "180B"),
    ]
    for name, code in cases:
        refused = create(env, principal=name)
        assert refused.status_code == 400, (name, refused.text)
        error = refused.json()["errors"][0]
        message = f"principal must not hold characters shown as nothing (U+{code},"
        assert (error["context"], error["message"][: len(message)]) == ("principal", message)
    renamed = send(
        env, "PATCH", f"{USERS}/{user_id_of(env, env.token)}", {"principal": "admin\ufe0f"}
    )
    assert renamed.status_code == 400, renamed.text


def test_names_that_look_like_a_live_users_are_refused(env: Env) -> None:
    """UTS #39's confusable skeleton: one-script look-alikes (a Latin alpha, a dotless i, a
    small capital, a dotted capital I) and whole names in another script (Cyrillic, Greek)
    are a 409 naming the user they could pass for; other names, and a deleted user's
    look-alikes, stay free."""
    for name in ("admin2", "ace", "poe", "scope"):
        assert create(env, principal=name).status_code == 200, name
    cases = [
        ("adm\u0131\u0307n", "admin"),  # a dotless i and a combining dot above
        ("\u0251dmin2", "admin2"),  # a Latin alpha
        ("adm\u0131n2", "admin2"),  # a dotless i
        ("ADM\u0130N2", "admin2"),  # a capital I with a dot, case-folded to i and a dot
        ("\u1d00ce", "ace"),  # a small capital A
        ("\u0430\u0441\u0435", "ace"),  # all Cyrillic
        ("\u0440\u043e\u0435", "poe"),
        ("\u0455\u0441\u043e\u0440\u0435", "scope"),
        ("\u03a1\u039f\u0395", "poe"),  # all Greek capitals
    ]
    for name, other in cases:
        refused = create(env, principal=name)
        assert refused.status_code == 409, (name, refused.text)
        error = refused.json()["errors"][0]
        message = f"user name {name!r} could pass for the existing user {other!r}"
        assert (error["context"], error["message"][: len(message)]) == ("principal", message)
    kim = create(env, principal="kim").json()["data"]
    renamed = send(env, "PATCH", f"{USERS}/{kim['id']}", {"principal": "\u0251ce"})
    assert renamed.status_code == 409, renamed.text
    assert "could pass for the existing user 'ace'" in renamed.json()["errors"][0]["message"]
    # Names that only resemble: fine; and renaming oneself to one's own look-alike is too.
    for name in ("klm", "ivy", "\u0438\u0432\u0430\u043d"):
        assert create(env, principal=name).status_code == 200, name
    assert send(env, "PATCH", f"{USERS}/{kim['id']}", {"principal": "k\u0131m"}).status_code == 200
    ace = next(
        u for u in send(env, "GET", USERS).json()["data"]["users"] if u["principal_name"] == "ace"
    )
    assert send(env, "DELETE", f"{USERS}/{ace['id']}").status_code == 200
    assert create(env, principal="\u0430\u0441\u0435").status_code == 200
    cli = env.cli("user", "create", "\u0251dmin2", "--role", "User")
    assert cli.exit_code == 1 and "could pass for the existing user 'admin2'" in cli.stderr


def test_a_deleted_users_name_can_be_given_again(env: Env) -> None:
    """The deleted user's row stays (the audit log names it by id too), its name free."""
    first = create(env, principal="olive", secret="olives-first-secret").json()["data"]
    assert send(env, "DELETE", f"{USERS}/{first['id']}").status_code == 200
    again = create(env, principal="olive", secret="olives-other-secret")
    assert again.status_code == 200, again.text
    second = again.json()["data"]
    assert second["id"] != first["id"] and second["principal_name"] == "olive"
    env.login("olive", "olives-other-secret")
    assert env.send_login("olive", "olives-first-secret").status_code == 401
    created = [
        e["fields"] for e in env.get("/api/v2/audit?action=eq:CreateUser").json()["data"]["logs"]
    ]
    assert [f["user"] for f in created] == ["olive", "olive"]
    # Once more, in other letters; and a live name still refuses its look-alikes.
    assert send(env, "DELETE", f"{USERS}/{second['id']}").status_code == 200
    assert create(env, principal="Olive").status_code == 200
    assert create(env, principal="OLIVE").status_code == 409


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
