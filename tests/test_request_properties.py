"""Property tests of the request path: whatever a client sends in the query, the path, the
headers, a login body or the body of a change to accounts, the answer is a documented
success or the JSON error body of a documented status (every response is validated against
the served OpenAPI document by the Env), and never a 500."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphsvc.api.web import parse_query
from graphsvc.demo.dataset import DOMAIN_SID, DemoResult
from tests.conftest import Env

PROPERTY_SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
NAMES = st.sampled_from(
    ["schema_environment_kind_id", "schema_extension_id", "skip", "limit", "sort_by",
     "start", "end", "type", "x", "start_node", "end_node", "relationship_kinds",
     "only_traversable"]
)  # fmt: skip
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
NUMBERISH = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["", "-", "0", "1e3", "0x10", " 1", "9" * 4400, "-0"]),
)
DATES = st.one_of(
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
    st.sampled_from(
        ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59-01:00", "2026-02-30T00:00:00Z",
         "2026-11-22T10:00:00+99:99", "2026-11-22 10:00:00Z"]
    ),
)  # fmt: skip
VALUES = st.one_of(
    TEXT,
    NUMBERISH,
    DATES,
    st.sampled_from(["created_at", "-name", "list", "in:MemberOf", "nin:HasSession,", DOMAIN_SID]),
)
# Header values as bytes (UTF-8 included), without the control characters HTTP forbids.
HEADER_VALUES = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=40
).map(lambda t: t.strip().encode())
QUERY = st.lists(st.tuples(NAMES, VALUES), max_size=6).map(
    lambda pairs: "&".join(f"{quote(k)}={quote(v)}" for k, v in pairs)
)


def paths(demo: DemoResult) -> st.SearchStrategy[str]:
    segment = st.one_of(TEXT.filter(lambda t: t not in ("", ".", "..")), NUMBERISH)
    return st.one_of(
        st.just("/api/v2/data-quality-stats-aggregations"),
        st.just(f"/api/v2/azure-tenants/{demo.tenant_ids[0]}/data-quality-stats"),
        st.just(f"/api/v2/computers/{demo.computer_object_ids[0]}/dcom-rights"),
        segment.map(lambda s: f"/api/v2/azure-tenants/{quote(s, safe='')}/data-quality-stats"),
        st.just(f"/api/v2/ad-domains/{DOMAIN_SID}/data-quality-stats"),
        segment.map(lambda s: f"/api/v2/ad-domains/{quote(s, safe='')}/data-quality-stats"),
        segment.map(lambda s: f"/api/v2/users/{quote(s, safe='')}/controllables"),
        st.just("/api/v2/graphs/shortest-path"),
        segment.map(lambda s: f"/api/v2/domains/{quote(s, safe='')}/exposure"),
        st.just(f"/api/v2/domains/{DOMAIN_SID}/tier-zero"),
        segment.map(lambda s: f"/api/v2/saml/providers/{quote(s, safe='')}"),
        segment.map(lambda s: f"/api/v2/clients/{quote(s, safe='')}"),
        segment.map(lambda s: f"/api/v2/computers/{quote(s, safe='')}/dcom-rights"),
    )


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_any_signed_query_gets_a_documented_answer(demo_env: tuple[Env, DemoResult]) -> None:
    env, demo = demo_env

    prefers = st.one_of(st.none(), HEADER_VALUES, NUMBERISH.map(lambda n: f"wait={n}".encode()))

    @PROPERTY_SETTINGS
    @given(path=paths(demo), query=QUERY, prefer=prefers)
    def check(path: str, query: str, prefer: bytes | None) -> None:
        uri = f"{path}?{query}" if query else path
        headers = {} if prefer is None else {"Prefer": prefer}
        response = env.get(uri, headers=headers)
        assert response.status_code != 500, response.text

    check()


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_any_credentials_get_a_documented_answer(env: Env) -> None:
    uri = "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"

    @PROPERTY_SETTINGS
    @given(
        scheme=st.sampled_from(["svcsignature", "bhesignature", "Bearer", "Basic", ""]),
        credential=HEADER_VALUES,
        date=st.one_of(DATES.map(str.encode), HEADER_VALUES),
        signature=HEADER_VALUES,
    )
    def check(scheme: str, credential: bytes, date: bytes, signature: bytes) -> None:
        headers = {
            "Authorization": f"{scheme} ".encode() + credential,
            "RequestDate": date,
            "Signature": signature,
        }
        response = env.request("GET", uri, headers)
        assert response.status_code in (400, 401), response.text

    check()


JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), TEXT),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=10,
)


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_any_login_body_gets_a_documented_answer(make_env: Callable[..., Env]) -> None:
    env = make_env(login_failures_per_minute=100_000)
    env.create_admin()
    bodies = st.one_of(
        st.binary(max_size=200),
        st.fixed_dictionaries(
            {"login_method": st.one_of(st.just("secret"), TEXT)},
            optional={"username": st.one_of(st.just("admin"), TEXT), "secret": JSON_VALUES},
        ).map(lambda d: json.dumps(d).encode()),
        JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    )

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(body=bodies)
    def check(body: bytes) -> None:
        response = env.request("POST", "/api/v2/login", content=body)
        assert response.status_code in (200, 400, 401), response.text

    check()


@PROPERTY_SETTINGS
@given(st.text(alphabet=st.sampled_from("ab=&%+;2F é"), max_size=30))
def test_a_query_string_is_read_as_parse_qs_reads_it(raw: str) -> None:
    assert parse_query(raw) == parse_qs(raw, keep_blank_values=True)


# Names the store keeps: any text, and the edges of what it can keep.
NAMES_TO_KEEP = st.one_of(TEXT, st.sampled_from(["ci\x00", "x" * 255, "x" * 256, ""]))
OFFSETS = st.timedeltas(min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23))
EXPIRIES = st.one_of(
    DATES,
    st.datetimes().map(datetime.isoformat),  # without an offset
    st.datetimes(timezones=OFFSETS.map(timezone)).map(datetime.isoformat),
)
# The account bodies' fields, each with values of its type (edges included).
TOKEN_FIELDS = {
    "token_name": NAMES_TO_KEEP,
    "user_id": st.one_of(st.uuids().map(str), TEXT),
    "expires_at": EXPIRIES,
    "lifetime_seconds": st.integers(-(2**70), 2**70),
}
USER_UPDATE_FIELDS = {
    "is_disabled": st.booleans(),
    "roles": st.lists(st.one_of(st.integers(1, 5), st.integers(-(2**70), 2**70)), max_size=3),
}
SECRET_FIELDS = {
    "secret": st.one_of(TEXT, st.sampled_from(["twelve-chars", "a NUL\x00 in a secret"])),
    "needs_password_reset": st.booleans(),
}


def json_bodies(
    fields: dict[str, st.SearchStrategy[object]], required: tuple[str, ...] = ()
) -> st.SearchStrategy[bytes]:
    """Mostly the body's fields (its `required` ones always) with values of their types;
    else any values under its field names, any JSON, or bytes."""
    typed = st.fixed_dictionaries(
        {name: fields[name] for name in required},
        optional={name: value for name, value in fields.items() if name not in required},
    )
    untyped = st.dictionaries(st.sampled_from([*fields, "surprise"]), JSON_VALUES, max_size=3)
    return st.integers(0, 9).flatmap(
        lambda n: (
            typed.map(json.dumps)
            if n < 7
            else untyped.map(json.dumps)
            if n < 9
            else st.one_of(JSON_VALUES.map(json.dumps), st.text(max_size=30))
        ).map(str.encode)
    )


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_any_account_body_gets_a_documented_answer(env: Env) -> None:
    """Token creation, a user's update and a user's secret, as an Administrator sends them:
    on itself, another user, or one that does not exist."""
    worker = env.user_with_token("worker", "User")
    user_ids = [
        env.get("/api/v2/self", token).json()["data"]["id"] for token in (env.token, worker)
    ]
    targets = st.one_of(st.sampled_from(user_ids), st.uuids().map(str))
    requests = st.one_of(
        st.tuples(st.just("POST"), st.just("/api/v2/tokens"), json_bodies(TOKEN_FIELDS)),
        st.tuples(
            st.just("PATCH"),
            targets.map(lambda u: f"/api/v2/bloodhound-users/{u}"),
            json_bodies(USER_UPDATE_FIELDS),
        ),
        st.tuples(
            st.just("PUT"),
            targets.map(lambda u: f"/api/v2/bloodhound-users/{u}/secret"),
            json_bodies(SECRET_FIELDS, required=("secret",)),
        ),
    )

    @PROPERTY_SETTINGS
    @given(request=requests)
    def check(request: tuple[str, str, bytes]) -> None:
        method, uri, body = request
        headers = env.signed_headers(method, uri, body=body)
        response = env.request(method, uri, headers, content=body)
        assert response.status_code in (200, 400, 404), response.text

    check()
