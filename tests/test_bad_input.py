"""Hostile or careless input answers a JSON 4xx naming what was wrong, never a 500: dates out
of range, numbers of thousands of digits, bodies that are not UTF-8 or nest deeply, NUL bytes,
and JWTs whose claims have the wrong type."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import jwt
import pytest

from tests.conftest import Env

AGG = "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"
HUGE = "9" * 5000


def first_error(response) -> dict[str, str]:  # type: ignore[no-untyped-def]
    body = response.json()
    assert body["http_status"] == response.status_code
    error: dict[str, str] = body["errors"][0]
    return error


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("&end=0001-01-01T00:00:00Z", "end"),
        ("&end=9999-12-31T23:59:59-01:00", "end"),
        ("&start=0000-12-31T00:00:00Z", "start"),
        (f"&limit={HUGE}", "limit"),
        (f"&skip={HUGE}", "skip"),
        (f"&schema_extension_id={HUGE}", "schema_extension_id"),
        (f"&schema_extension_id=-{HUGE}", "schema_extension_id"),
    ],
)
def test_out_of_range_query_values_are_400_naming_the_parameter(
    env: Env, query: str, parameter: str
) -> None:
    response = env.get(AGG + query)
    assert response.status_code == 400, response.text
    assert first_error(response)["context"] == parameter


def test_huge_numbers_in_path_and_prefer_are_400(env: Env) -> None:
    response = env.get(f"/api/v2/saml/providers/{HUGE}")
    assert response.status_code == 400 and first_error(response)["context"] == "saml_provider_id"
    response = env.get(AGG, headers={"Prefer": f"wait={HUGE}"})
    assert response.status_code == 400 and first_error(response)["context"] == "Prefer"


def test_request_date_out_of_range_is_401_without_credentials(env: Env) -> None:
    headers = {
        "Authorization": "svcsignature 00000000-0000-4000-8000-000000000000",
        "RequestDate": "9999-12-31T23:59:59-01:00",
        "Signature": "c2lnbmF0dXJl",
    }
    response = env.request("GET", AGG, headers)
    assert response.status_code == 401 and "RequestDate" in first_error(response)["message"]


@pytest.mark.parametrize(
    "body",
    [
        b'{"login_method": "secret", "username": "\xff\xfe", "secret": "x"}',
        b"[" * 8000 + b"]" * 8000,
        b'{"login_method": "secret", "username": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    ],
    ids=["invalid utf-8", "deeply nested", "nested value"],
)
def test_login_bodies_that_are_not_json_objects_are_400(env: Env, body: bytes) -> None:
    response = env.request("POST", "/api/v2/login", content=body)
    assert response.status_code == 400, response.text
    assert first_error(response)["context"] == "body"


def test_nul_bytes_are_refused_before_they_reach_the_database(env: Env) -> None:
    response = env.get("/api/v2/computers/S-1-5-21-1%00/dcom-rights")
    assert response.status_code == 400, response.text
    assert first_error(response)["context"] == "object_id"
    response = env.request(
        "POST",
        "/api/v2/login",
        content=b'{"login_method": "secret", "username": "ad\\u0000min", "secret": "x"}',
    )
    assert response.status_code == 400 and first_error(response)["context"] == "username"


@pytest.mark.parametrize(
    "claims",
    [
        {"sid": ["a", "b"]},
        {"sid": "not-a-uuid"},
        {"sub": 12},
        {"sid": None},
    ],
)
def test_jwt_claims_of_the_wrong_type_are_401(env: Env, claims: dict[str, object]) -> None:
    jwt_key = env.settings.resolved_jwt_secret()
    payload = {
        "sub": "00000000-0000-4000-8000-000000000001",
        "sid": "00000000-0000-4000-8000-000000000002",
        "exp": datetime.now(UTC) + timedelta(hours=1),
        **claims,
    }
    token = jwt.encode(payload, jwt_key, algorithm="HS256")
    response = env.request("GET", AGG, {"Authorization": f"Bearer {token}"})
    assert response.status_code == 401, response.text
    assert "JWT" in first_error(response)["message"]


@pytest.mark.parametrize(
    ("method", "path", "body", "context", "named"),
    [
        ("POST", "/api/v2/tokens", {"expires_at": "2030-01-01T00:00:00"}, "body", "expires_at"),
        ("POST", "/api/v2/tokens", {"expires_at": "9999-12-31T23:59:59-14:00"}, "expires_at", ""),
        ("POST", "/api/v2/tokens", {"token_name": "x" * 256}, "body", "token_name"),
        ("POST", "/api/v2/tokens", {"token_name": "ci\x00"}, "body", "token_name"),
        ("POST", "/api/v2/tokens", {"user_id": "not-a-uuid"}, "body", "user_id"),
        ("POST", "/api/v2/tokens", {"user_id": "a\x00"}, "body", "user_id"),
        ("PATCH", "{user}", {"roles": [2**32]}, "body", "roles"),
        ("PATCH", "{user}", {"roles": [2**63]}, "body", "roles"),
        ("PATCH", "{user}", {"roles": [-(2**31) - 1]}, "body", "roles"),
    ],
    ids=[
        "expiry without offset",
        "expiry past year 9999 in UTC",
        "long token name",
        "NUL in token name",
        "user id not a UUID",
        "NUL in user id",
        "role id over int32",
        "role id over int64",
        "role id under int32",
    ],
)
def test_account_bodies_the_store_cannot_take_are_400_naming_the_field(
    env: Env, method: str, path: str, body: dict[str, object], context: str, named: str
) -> None:
    """Refused alike on both stores, before any SQL: PostgreSQL failed on each of these,
    and SQLite kept some and failed on others."""
    worker_id = env.get("/api/v2/self", env.user_with_token("worker", "User")).json()["data"]["id"]
    uri = path.format(user=f"/api/v2/bloodhound-users/{worker_id}")
    content = json.dumps(body).encode()
    response = env.request(method, uri, env.signed_headers(method, uri, body=content), content)
    assert response.status_code == 400, response.text
    error = first_error(response)
    assert error["context"] == context and named in error["message"]


@pytest.mark.parametrize(
    ("uri", "takes"),
    [
        (
            "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8&run_id=x",
            "this operation takes end, limit, schema_environment_kind_id",
        ),
        ("/api/v2/azure-tenants/T1/data-quality-stats?run_id=x", "this operation takes end"),
        ("/api/v2/ad-domains/D1/data-quality-stats?run_id=x", "this operation takes end"),
        ("/api/v2/saml/providers/1?run_id=x", "this operation takes no query parameters"),
        ("/api/v2/self?run_id=x", "this operation takes no query parameters"),
    ],
)
def test_a_query_parameter_an_operation_does_not_take_is_400_naming_it(
    env: Env, uri: str, takes: str
) -> None:
    """Ignored, `run_id=...` would read as a filter that applied."""
    response = env.get(uri)
    assert response.status_code == 400, response.text
    (error,) = response.json()["errors"]
    assert error["context"] == "run_id"
    assert error["message"].startswith("unknown query parameter 'run_id': " + takes), error


@pytest.mark.parametrize(
    ("uri", "parameter"),
    [
        # 999 filters: past SQLite's 998 statement variables before, a 500
        ("/api/v2/file-upload?" + "&".join(["status=neq:7"] * 999), "status"),
        ("/api/v2/file-upload?" + "&".join(["sort_by=id"] * 3000), "sort_by"),
        ("/api/v2/file-upload?sort_by=id&sort_by=-id", "sort_by"),
        # a NUL in query text, which PostgreSQL cannot compare
        ("/api/v2/graphs/shortest-path?start_node=%00&end_node=x", "start_node"),
        ("/api/v2/search?q=x&type=%00", "type"),
        ("/api/v2/search?q=%00", "q"),
        # a year before `before` is before the first year
        ("/api/v2/audit?before=0001-01-01T00:00:00Z", "before"),
    ],
)
def test_cheap_hostile_queries_are_400_naming_the_parameter(
    env: Env, uri: str, parameter: str
) -> None:
    response = env.get(uri)
    assert response.status_code == 400, response.text[:300]
    assert first_error(response)["context"] == parameter
