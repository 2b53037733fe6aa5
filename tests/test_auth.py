"""Signed requests, JWT sessions, roles and permissions (spec 5, decisions)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import jwt
import pytest
from starlette.testclient import TestClient

from graphsvc.accounts import tokens
from graphsvc.api.app import create_app
from graphsvc.api.auth import Authenticator, Identity, TokenRefused
from graphsvc.api.web import Request
from graphsvc.errors import ApiError
from graphsvc.logs import token_hash
from graphsvc.signatures import sign_request
from graphsvc.store.db import Connection
from tests.conftest import Env, make_settings, signed_headers, wait_until

AGG = "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"
SAML = "/api/v2/saml/providers/1"
CLIENT = "/api/v2/clients/00000000-0000-4000-8000-000000000000"


def message(response) -> str:  # type: ignore[no-untyped-def]
    body = response.json()
    assert body["http_status"] == response.status_code
    return str(body["errors"][0]["message"])


def test_signature_is_the_spec_chain() -> None:
    """Recomputed step by step from spec 5.2 for the spec's own example path."""
    key, date = "my-token-key", "2026-03-04T05:06:07.123Z"
    step1 = hmac.new(key.encode(), b"GET/api/v2/test/resource", hashlib.sha256).digest()
    step2 = hmac.new(step1, b"2026-03-04T05", hashlib.sha256).digest()
    step3 = hmac.new(step2, b"", hashlib.sha256).digest()
    assert sign_request(key, "GET", "/api/v2/test/resource", date, b"") == (
        base64.b64encode(step3).decode()
    )


def test_signed_request_over_path_and_query(env: Env) -> None:
    response = env.get(AGG + "&sort_by=-created_at&limit=5")
    assert response.status_code == 200


def test_signature_covers_the_raw_query_as_sent(env: Env) -> None:
    uri = AGG + "&start=2026-01-01T00%3A00%3A00%2B01%3A00"
    assert env.get(uri).status_code == 200
    decoded = AGG + "&start=2026-01-01T00:00:00+01:00"
    headers = env.signed_headers("GET", decoded)
    assert env.request("GET", uri, headers).status_code == 401


def test_signature_without_the_query_is_rejected_by_default(env: Env) -> None:
    path = AGG.split("?")[0]
    headers = env.signed_headers("GET", path)
    response = env.request("GET", AGG, headers)
    assert response.status_code == 401
    assert message(response) == "invalid signature or unknown token id"


def test_path_only_signatures_when_the_compatibility_setting_is_on(
    make_env: Callable[..., Env],
) -> None:
    env = make_env(sdk_compatibility=True)
    env.create_admin()
    headers = env.signed_headers("GET", AGG.split("?")[0])
    assert env.request("GET", AGG, headers).status_code == 200
    assert env.get(AGG).status_code == 200  # full-URI signatures still work


def test_schemes_are_case_insensitive_and_reference_alias_works(env: Env) -> None:
    for scheme in ("SVCSIGNATURE", "bhesignature", "BheSignature"):
        headers = env.signed_headers("GET", AGG)
        headers["Authorization"] = f"{scheme} {env.token.id}"
        assert env.request("GET", AGG, headers).status_code == 200, scheme
    jwt_token = env.login()
    for scheme in ("Bearer", "bearer", "BEARER"):
        headers = {"Authorization": f"{scheme} {jwt_token}"}
        assert env.request("GET", AGG, headers).status_code == 200, scheme


@pytest.mark.parametrize(
    ("offset", "status"),
    [
        (timedelta(hours=-1), 200),
        (timedelta(hours=-2, seconds=-1), 401),
        (timedelta(days=-3), 401),
        (timedelta(0), 200),
        (timedelta(days=1), 401),
    ],
)
def test_request_date_window(env: Env, offset: timedelta, status: int) -> None:
    """Dates from the start of the current hour; the frozen-clock test below has the edges."""
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    headers = env.signed_headers("GET", AGG, date=hour + offset)
    response = env.request("GET", AGG, headers)
    assert response.status_code == status
    if status == 401:
        assert "RequestDate" in message(response)


def signed_at(env: Env, stamp: str) -> dict[str, str]:
    return signed_headers(env.token, "GET", AGG, stamp)


def test_request_date_in_utc_with_fraction(env: Env) -> None:
    stamp = datetime.now(UTC).replace(microsecond=123456).isoformat()
    assert stamp.endswith("+00:00")
    assert env.request("GET", AGG, signed_at(env, stamp)).status_code == 200


def test_request_date_in_another_offset_only_under_the_compatibility_setting(
    make_env: Callable[..., Env],
) -> None:
    stamp = datetime.now(timezone(timedelta(hours=-5))).isoformat(timespec="seconds")
    strict = make_env()
    strict.create_admin()
    refused = strict.request("GET", AGG, signed_at(strict, stamp))
    assert refused.status_code == 401 and "must be in UTC" in message(refused)
    lenient = make_env(accept_local_time_signatures=True)
    lenient.token = strict.token
    assert lenient.request("GET", AGG, signed_at(lenient, stamp)).status_code == 200
    odd = datetime.now(timezone(timedelta(hours=-13))).isoformat(timespec="seconds")
    refused = lenient.request("GET", AGG, signed_at(lenient, odd))
    assert refused.status_code == 401 and "offset no time zone uses" in message(refused)


def rewrite_tail(stamp: str, now: datetime, offset: str) -> str:
    """What a replayer can do: keep the signed hour (13 characters), rewrite the rest."""
    return stamp[:13] + now.strftime(":%M:%S") + offset


@pytest.mark.parametrize("hours_ago", [3, 10, 20])
def test_a_captured_request_with_its_unsigned_tail_rewritten_is_refused(
    env: Env, hours_ago: int
) -> None:
    now = datetime.now(UTC)
    stamp = (now - timedelta(hours=hours_ago)).isoformat(timespec="seconds")
    captured = signed_at(env, stamp)
    assert env.request("GET", AGG, captured).status_code == 401
    # The offset that makes the signed hour read as now: refused, UTC only.
    shifted = f"-{hours_ago:02d}:00"
    for tail in (rewrite_tail(stamp, now, shifted), rewrite_tail(stamp, now, "Z")):
        replayed = env.request("GET", AGG, {**captured, "RequestDate": tail})
        assert replayed.status_code == 401, tail


class FrozenClock(datetime):
    """datetime, with `now` fixed at 10:30 UTC (what `check_freshness` reads the time from)."""

    @classmethod
    def now(cls, tz=None):  # type: ignore[no-untyped-def]
        return datetime(2026, 11, 24, 10, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("request_date", "refused"),
    [
        # Signed at 08:00, its unsigned minutes rewritten: the signed hour began 2 h 30 ago.
        ("2026-11-24T08:59:59Z", "stale_date"),
        ("2026-11-24T08:45:00Z", "stale_date"),
        ("2026-11-24T09:00:00Z", None),  # 1 h 30 from the start of its hour
        ("2026-11-24T10:59:59Z", None),  # its hour has begun
        ("2026-11-24T11:00:00Z", "future_date"),  # 30 min ahead; at most 15 allowed
    ],
)
def test_a_signed_request_ages_from_the_start_of_its_signed_hour(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, request_date: str, refused: str | None
) -> None:
    """The max age bounds a replay from when the request was signed: no rewriting of the
    unsigned minutes keeps a capture alive past two hours."""
    from graphsvc.api import auth
    from graphsvc.api.auth import Authenticator
    from graphsvc.crypto import KeyBox
    from graphsvc.errors import ApiError

    monkeypatch.setattr(auth, "datetime", FrozenClock)
    settings = make_settings(tmp_path, f"sqlite:///{tmp_path / 'unused.db'}")
    checker = Authenticator(settings, b"jwt-key", KeyBox(settings.resolved_token_encryption_key()))
    if refused is None:
        checker.check_freshness(request_date)
        return
    with pytest.raises(ApiError) as raised:
        checker.check_freshness(request_date)
    assert raised.value.status == 401 and raised.value.code == refused


def test_a_replay_outside_the_wider_window_is_refused_under_the_compatibility_setting(
    make_env: Callable[..., Env],
) -> None:
    env = make_env(accept_local_time_signatures=True)
    env.create_admin()
    now = datetime.now(UTC)
    # Signed 30 hours ago: even read in the most favourable offset (-12:00), it is older than
    # the wider window (the max age plus the 26 hours offsets span).
    stamp = (now - timedelta(hours=30)).isoformat(timespec="seconds")
    captured = signed_at(env, stamp)
    replayed = env.request(
        "GET", AGG, {**captured, "RequestDate": rewrite_tail(stamp, now, "-12:00")}
    )
    assert replayed.status_code == 401 and "stale RequestDate" in message(replayed)
    # Signed 5 hours ago, the same rewrite is inside the documented wider window.
    stamp = (now - timedelta(hours=5)).isoformat(timespec="seconds")
    captured = signed_at(env, stamp)
    shifted = {**captured, "RequestDate": rewrite_tail(stamp, now, "-05:00")}
    assert env.request("GET", AGG, shifted).status_code == 200


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"Authorization": None}, "missing Authorization header"),
        ({"Authorization": "Basic abc"}, "unknown authorization scheme"),
        ({"Authorization": "svcsignature"}, "missing token id"),
        ({"RequestDate": None}, "missing RequestDate header"),
        ({"RequestDate": "yesterday"}, "malformed RequestDate"),
        ({"RequestDate": "2026-01-01"}, "malformed RequestDate"),
        ({"Signature": None}, "missing Signature header"),
        ({"Signature": "bm90IGEgc2lnbmF0dXJl"}, "invalid signature or unknown token id"),
        (
            {"Authorization": "svcsignature 00000000-0000-4000-8000-000000000000"},
            "invalid signature or unknown token id",
        ),
        ({"Authorization": "svcsignature not-a-uuid"}, "malformed token id"),
        ({"Authorization": "svcsignature a b"}, "malformed token id"),
    ],
)
def test_each_authentication_failure_is_401_saying_what_failed(
    env: Env, change: dict[str, str | None], expected: str
) -> None:
    headers = env.signed_headers("GET", AGG)
    for name, value in change.items():
        headers.pop(name)
        if value is not None:
            headers[name] = value
    response = env.request("GET", AGG, headers)
    assert response.status_code == 401
    assert expected in message(response)
    assert response.json()["errors"][0]["context"] == "auth"


def refusal(env: Env, headers: dict[str, str], upload: bool = False) -> ApiError:
    """What the authenticator raises for a GET of AGG with these headers (for an upload, what
    it raises before the body, from the headers alone)."""
    path, _, query = AGG.partition("?")
    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    checker = Authenticator(env.settings, b"jwt-key", env.keys)

    async def work(conn: Connection) -> ApiError:
        request = Request(scope, receive, {}, 1000, 10.0, 100)
        with pytest.raises(ApiError) as raised:
            if upload:
                found = await checker.authenticate_headers(conn, request)
                assert not isinstance(found, Identity)
                found.claimed_identity()
            else:
                await checker.authenticate(conn, request)
        return raised.value

    return env.run_in_transaction(work)


def revoked_token(env: Env) -> tokens.CreatedToken:
    token = env.user_with_token("leaver", "User")
    uri = f"/api/v2/tokens/{token.id}"
    assert env.request("DELETE", uri, env.signed_headers("DELETE", uri)).status_code == 200
    return token


def test_an_unknown_revoked_or_wrongly_signed_token_is_told_alike_and_recorded_apart(
    env: Env,
) -> None:
    """The caller cannot tell an unknown token id from a revoked token or a wrong signature
    (it could find out which ids exist); the error carries which it was for the audit log."""
    revoked = revoked_token(env)
    unknown = tokens.CreatedToken(str(uuid.uuid4()).upper(), "k" * 40, None)
    wrong_key = tokens.CreatedToken(env.token.id, "not-the-key", None)
    cases = [(unknown, "unknown_token"), (revoked, "revoked_token"), (wrong_key, "bad_signature")]
    answers = set()
    for token, failure in cases:
        headers = env.signed_headers("GET", AGG, token)
        raised = refusal(env, headers)
        assert isinstance(raised, TokenRefused)
        assert (raised.status, raised.code) == (401, "signature_or_unknown_token")
        assert raised.audit_fields == {"auth_failure": failure, "token_id": token.id.lower()}
        response = env.request("GET", AGG, headers)
        assert response.status_code == 401
        answers.add((raised.message, str(response.json()["errors"])))
    assert answers == {
        (
            "invalid signature or unknown token id",
            "[{'context': 'auth', 'message': 'invalid signature or unknown token id'}]",
        )
    }
    # An upload's token is checked before its body: unknown and revoked are alike there too.
    for token, failure in cases[:2]:
        raised = refusal(env, env.signed_headers("GET", AGG, token), upload=True)
        assert isinstance(raised, TokenRefused) and raised.message == "unknown token id"
        assert raised.audit_fields == {"auth_failure": failure, "token_id": token.id.lower()}


def test_the_audit_event_of_a_refused_token_says_why(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    revoked = revoked_token(env)
    caplog.set_level(logging.INFO, logger="graphsvc.audit")
    assert env.get(AGG, token=revoked).status_code == 401
    failed = [
        fields
        for record in caplog.records
        if record.name == "graphsvc.audit"
        and (fields := record.__dict__["fields"])["event"] == "auth.failed"
    ]
    assert failed and failed[-1]["auth_failure"] == "revoked_token"
    assert failed[-1]["token_hash"] == token_hash(revoked.id) and "token_id" not in failed[-1]


def test_signature_of_another_method_or_body_fails(env: Env) -> None:
    headers = env.signed_headers("POST", AGG)
    assert env.request("GET", AGG, headers).status_code == 401
    headers = env.signed_headers("GET", AGG, body=b"{}")
    assert env.request("GET", AGG, headers).status_code == 401


def test_authentication_comes_before_parameter_checks(env: Env) -> None:
    response = env.request("GET", "/api/v2/data-quality-stats-aggregations?limit=-1")
    assert response.status_code == 401


def test_token_key_is_encrypted_at_rest(env: Env) -> None:
    async def stored(conn: Connection) -> str:
        value = await conn.fetchval(
            "SELECT key_ciphertext FROM auth_tokens WHERE id = $1", env.token.id
        )
        return str(value)

    ciphertext = env.run_in_transaction(stored)
    assert env.token.key not in ciphertext
    assert env.keys.open(ciphertext) == env.token.key


def test_last_access_is_recorded_once_a_minute(env: Env) -> None:
    async def last_access(conn: Connection) -> datetime:
        value: datetime = await conn.fetchval(
            "SELECT last_access FROM auth_tokens WHERE id = $1", env.token.id
        )
        return value

    def moved() -> datetime | None:
        found = env.run_in_transaction(last_access)
        return found if found != before else None

    async def other_used(conn: Connection) -> bool:
        return bool(
            await conn.fetchval(
                "SELECT last_access <> created_at FROM auth_tokens WHERE id = $1", other.id
            )
        )

    before = env.run_in_transaction(last_access)
    env.get(AGG)
    # Written just after the answer.
    after_first = wait_until(moved, timeout=10, what="last_access to be written")
    env.get(AGG)
    # Accesses are written by one writer, in the order noted: once another token's first
    # access, noted after the second request, is written, a write of the second request's
    # access (there must be none) would have been written too.
    other = env.user_with_token("other", "Read-Only")
    assert env.get(AGG, token=other).status_code == 200
    wait_until(lambda: env.run_in_transaction(other_used), timeout=10, what="other's last_access")
    assert after_first > before
    assert env.run_in_transaction(last_access) == after_first


def test_every_token_used_gets_its_last_access_even_when_used_at_once(env: Env) -> None:
    """Twenty tokens, each signing one request, all at once: a token used while another
    one's last access is being written still gets its own (it was once dropped)."""
    used = [env.user_with_token(f"user{n}", "Read-Only") for n in range(20)]
    with ThreadPoolExecutor(len(used)) as pool:
        answers = list(pool.map(lambda token: env.get(AGG, token=token), used))
    assert [answer.status_code for answer in answers] == [200] * len(used)

    async def never_used(conn: Connection) -> list[str]:
        rows = await conn.fetch("SELECT id FROM auth_tokens WHERE last_access = created_at")
        return sorted(str(row[0]) for row in rows)

    deadline = time.monotonic() + 10
    while waiting := set(env.run_in_transaction(never_used)) & {t.id for t in used}:
        assert time.monotonic() < deadline, f"{len(waiting)} of 20 tokens never written"
        time.sleep(0.05)


# --- roles and permissions --------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "expected"),
    [
        ("Read-Only", {AGG: 200, SAML: 403, CLIENT: 403}),
        ("Upload-Only", {AGG: 403, SAML: 403, CLIENT: 403}),
        ("User", {AGG: 200, SAML: 403, CLIENT: 404}),
        ("Power User", {AGG: 200, SAML: 403, CLIENT: 404}),
        ("Administrator", {AGG: 200, SAML: 404, CLIENT: 404}),
    ],
)
def test_role_permissions(env: Env, role: str, expected: dict[str, int]) -> None:
    token = env.user_with_token(f"someone-{role}", role)
    for uri, status in expected.items():
        response = env.get(uri, token=token)
        assert response.status_code == status, (role, uri, response.text)
        if status == 403:
            assert "permission" in message(response)


def test_disabled_user_is_403_for_tokens_and_login(env: Env) -> None:
    token = env.user_with_token("dormant", "Administrator", disabled=True, secret="pw-0123456789")
    response = env.get(AGG, token=token)
    assert response.status_code == 403 and message(response) == "user is disabled"
    login = env.request(
        "POST",
        "/api/v2/login",
        content=b'{"login_method":"secret","username":"dormant","secret":"pw-0123456789"}',
    )
    assert login.status_code == 403


def test_collection_client_token_cannot_read(env: Env) -> None:
    from graphsvc.graph import clients

    _, token = env.run_in_transaction(lambda conn: clients.create_client(conn, env.keys, "c1"))
    response = env.get(AGG, token=token)
    assert response.status_code == 403 and "collection client" in message(response)


# --- JWT sessions -----------------------------------------------------------------------


def test_login_returns_a_working_jwt(env: Env) -> None:
    response = env.request(
        "POST",
        "/api/v2/login",
        content=b'{"login_method":"secret","username":"admin","secret":"admin-secret"}',
    )
    data = response.json()["data"]
    assert data["auth_expired"] is False
    claims = jwt.decode(data["session_token"], options={"verify_signature": False})
    assert claims["sub"] == data["user_id"]
    lifetime = claims["exp"] - datetime.now(UTC).timestamp()
    assert 8 * 3600 - 60 < lifetime <= 8 * 3600
    headers = {"Authorization": f"Bearer {data['session_token']}"}
    assert env.request("GET", AGG, headers).status_code == 200


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b'{"login_method":"secret","username":"admin","secret":"wrong"}', 401),
        (b'{"login_method":"secret","username":"nobody","secret":"admin-secret"}', 401),
        (b'{"login_method":"oidc","username":"admin","secret":"admin-secret"}', 400),
        (b'{"login_method":"secret","username":"admin"}', 400),
        (b'{"login_method":"secret","username":1,"secret":"x"}', 400),
        (b"not json", 400),
        (b"", 400),
    ],
)
def test_login_failures(env: Env, body: bytes, status: int) -> None:
    response = env.request("POST", "/api/v2/login", content=body)
    assert response.status_code == status
    if status == 401:
        assert message(response) == "invalid username or secret"


def test_logout_revokes_the_jwt(env: Env) -> None:
    token = env.login()
    headers = {"Authorization": f"Bearer {token}"}
    assert env.request("GET", AGG, headers).status_code == 200
    assert env.request("POST", "/api/v2/logout", headers).status_code == 200
    response = env.request("GET", AGG, headers)
    assert response.status_code == 401 and "session has ended" in message(response)


def test_logout_needs_a_jwt(env: Env) -> None:
    headers = env.signed_headers("POST", "/api/v2/logout")
    response = env.request("POST", "/api/v2/logout", headers)
    assert response.status_code == 400


def test_expired_and_forged_jwts_are_401(env: Env) -> None:
    token = env.login()
    claims = jwt.decode(token, options={"verify_signature": False})
    key = env.settings.resolved_jwt_secret()
    expired = jwt.encode({**claims, "exp": datetime.now(UTC) - timedelta(seconds=5)}, key)
    response = env.request("GET", AGG, {"Authorization": f"Bearer {expired}"})
    assert response.status_code == 401 and "expired JWT" in message(response)
    forged = jwt.encode(claims, b"some-other-key-that-is-long-enough-for-hs256")
    response = env.request("GET", AGG, {"Authorization": f"Bearer {forged}"})
    assert response.status_code == 401 and message(response) == "invalid JWT"
    response = env.request("GET", AGG, {"Authorization": "Bearer"})
    assert response.status_code == 401


def test_removing_a_user_revokes_its_sessions_and_tokens(env: Env) -> None:
    token = env.user_with_token("leaver", "User", secret="pw-0123456789")
    session = env.login("leaver", "pw-0123456789")

    async def remove(conn: Connection) -> None:
        await conn.execute(
            "UPDATE users SET deleted_at = $1 WHERE name = 'leaver'", datetime.now(UTC)
        )

    env.run_in_transaction(remove)
    assert env.request("GET", AGG, {"Authorization": f"Bearer {session}"}).status_code == 401
    assert env.get(AGG, token=token).status_code == 401


def remove_user(env: Env, name: str) -> None:
    async def remove(conn: Connection) -> None:
        await conn.execute(
            "UPDATE users SET deleted_at = $1 WHERE name = $2", datetime.now(UTC), name
        )

    env.run_in_transaction(remove)


def test_token_records_are_reused_within_the_cache_time(make_env: Callable[..., Env]) -> None:
    env = make_env(token_cache_seconds=600)
    token = env.user_with_token("leaver", "User")
    assert env.get(AGG, token=token).status_code == 200
    remove_user(env, "leaver")
    assert env.get(AGG, token=token).status_code == 200, "served from the cache"
    assert env.get(AGG, token=env.user_with_token("other", "User")).status_code == 200


def test_a_removed_user_is_refused_once_the_cache_time_passes(make_env: Callable[..., Env]) -> None:
    env = make_env(token_cache_seconds=0.1)
    token = env.user_with_token("leaver", "User")
    assert env.get(AGG, token=token).status_code == 200
    remove_user(env, "leaver")
    time.sleep(0.15)  # not an event: the cache time passing is what is tested
    assert env.get(AGG, token=token).status_code == 401


def test_jwts_survive_a_restart_with_generated_keys(database_url: str, tmp_path: Path) -> None:
    """Secrets generated into the data directory are reused by the next process: a session
    opened before a restart is still good after it."""
    settings = make_settings(
        tmp_path,
        database_url,
        data_dir=tmp_path / "keys",
        jwt_secret=None,
        token_encryption_key=None,
    )

    def started() -> Env:
        return Env(settings, TestClient(create_app(settings)))

    first = started()
    with first.client:
        first.create_admin()
        session = first.login()
    second = started()
    with second.client:
        answer = second.request(
            "GET", "/api/v2/self", headers={"Authorization": f"Bearer {session}"}
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"]["principal_name"] == "admin"
    assert (tmp_path / "keys" / "jwt-signing.key").stat().st_mode & 0o777 == 0o600


def test_a_signature_verified_before_is_taken_again_and_no_other(env: Env) -> None:
    """A bodiless request verified once is remembered (see `BodySignature.verify`): sent
    again it is admitted without the HMACs, but a changed signature, date hour or URI is
    checked in full, and a token revoked since is refused."""
    reader = env.user_with_token("reader", "Read-Only")
    uri = "/api/v2/self"
    headers = env.signed_headers("GET", uri, reader)
    remembered = env.client.app.auth.verified_signatures  # type: ignore[attr-defined]
    assert env.request("GET", uri, headers).status_code == 200
    assert len(remembered) == 1
    assert env.request("GET", uri, headers).status_code == 200
    wrong = {**headers, "Signature": headers["Signature"][:-4] + "AAAA"}
    assert env.request("GET", uri, wrong).status_code == 401
    other_uri = env.request("GET", uri + "?x=1", headers)
    assert other_uri.status_code == 401
    later = (datetime.now(UTC) + timedelta(hours=-1)).isoformat().replace("+00:00", "Z")
    assert env.request("GET", uri, {**headers, "RequestDate": later}).status_code == 401
    assert len(remembered) == 1  # nothing refused is remembered
    long_uri = uri + "?" + "x" * 2000  # refused (400) after its signature, but valid
    assert (
        env.request("GET", long_uri, env.signed_headers("GET", long_uri, reader)).status_code == 400
    )
    assert len(remembered) == 1  # too long to be remembered (REMEMBERED_URI_LENGTH)
    revoked = env.request(
        "DELETE",
        f"/api/v2/tokens/{reader.id}",
        env.signed_headers("DELETE", f"/api/v2/tokens/{reader.id}"),
    )
    assert revoked.status_code == 200, revoked.text
    refused = env.request("GET", uri, headers)
    assert refused.status_code == 401 and refused.json()["errors"][0]["context"] == "auth"
