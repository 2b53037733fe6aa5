"""Wire rules shared by every route: error body, RequestID, routing errors, Prefer, edition,
health, and the served OpenAPI document."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from datetime import datetime

import pytest
from openapi_spec_validator import validate

from graphsvc.api import probes
from graphsvc.store import data_quality, saml
from tests.conftest import FIXTURES, Env, admin_sql

AGG = "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"


def test_error_body_and_request_id(env: Env) -> None:
    response = env.get("/api/v2/data-quality-stats-aggregations")
    body = response.json()
    assert set(body) == {"http_status", "timestamp", "request_id", "errors"}
    assert body["request_id"] == response.headers["requestid"]
    assert uuid.UUID(body["request_id"]).version == 4
    assert body["timestamp"].endswith("Z")
    datetime.fromisoformat(body["timestamp"])
    assert body["errors"] == [
        {
            "context": "schema_environment_kind_id",
            "message": "missing required query parameter: schema_environment_kind_id",
        }
    ]


def test_request_ids_are_fresh_per_request(env: Env) -> None:
    ids = {env.get(AGG).headers["requestid"] for _ in range(3)}
    assert len(ids) == 3


@pytest.mark.parametrize(
    "path",
    [
        "/docs",  # the API reference is at /api/v2/docs; / redirects to the console
        "/api/v2",
        "/api/v2/nothing",
        "/api/v1/clients/x",
        "/api/v2/computers/X/dcom-rights/extra",
        "/api/v2/saml/providers/1/",
        "/health/",
    ],
)
def test_unknown_routes_are_json_404(env: Env, path: str) -> None:
    response = env.request("GET", path, validate=False)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    assert response.json()["errors"][0]["context"] == "route"
    assert response.json()["request_id"] == response.headers["requestid"]


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_wrong_methods_are_json_405(env: Env, method: str) -> None:
    response = env.request(method, AGG)
    assert response.status_code == 405
    assert "GET" in response.headers["allow"]
    assert response.json()["errors"][0]["context"] == "method"


def test_head_answers_like_get_without_a_body(env: Env) -> None:
    got = env.get(AGG)
    response = env.request("HEAD", AGG, headers=env.signed_headers("HEAD", AGG), validate=False)
    assert response.status_code == 200
    assert response.content == b""
    assert response.headers["content-length"] == str(len(got.content))


def test_unexpected_errors_are_a_json_500(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire: secret detail")

    monkeypatch.setattr(data_quality, "list_aggregations", broken)
    response = env.get(AGG)
    assert response.status_code == 500
    body = response.json()
    assert body["errors"] == [{"context": "server", "message": "internal server error"}]
    assert "secret detail" not in response.text


def test_database_failures_are_a_500_from_the_database(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def failing(conn: object, *args: object) -> None:
        await conn.fetch("SELECT no_such_column FROM saml_providers")  # type: ignore[attr-defined]

    monkeypatch.setattr(saml, "find_saml_provider", failing)
    response = env.get("/api/v2/saml/providers/1")
    assert response.status_code == 500
    assert response.json()["errors"] == [{"context": "database", "message": "database error"}]
    assert "no_such_column" not in response.text


# --- Prefer -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefer", "applied"),
    [
        ("wait=5", "wait=5"),
        (" wait=5 ", "wait=5"),
        ("wait=0", "wait=30"),
        ("wait=600", "wait=60"),
        ("wait=60", "wait=60"),
    ],
)
def test_prefer_wait_is_applied_and_echoed(env: Env, prefer: str, applied: str) -> None:
    response = env.get(AGG, headers={"Prefer": prefer})
    assert response.status_code == 200
    assert response.headers["preference-applied"] == applied


def test_no_prefer_no_preference_applied(env: Env) -> None:
    assert "preference-applied" not in env.get(AGG).headers


@pytest.mark.parametrize(
    "prefer",
    [
        "wait",
        "wait=",
        "wait=abc",
        "wait=-2",
        "wait=1.5",
        "respond-async",
        "wait=5, handling=strict",
        "",
    ],
)
def test_malformed_prefer_is_400(env: Env, prefer: str) -> None:
    response = env.get(AGG, headers={"Prefer": prefer})
    assert response.status_code == 400
    assert response.json()["errors"][0]["context"] == "Prefer"


def test_unlimited_wait_only_when_enabled(make_env: Callable[..., Env]) -> None:
    strict = make_env()
    strict.create_admin()
    refused = strict.get(AGG, headers={"Prefer": "wait=-1"})
    assert refused.status_code == 400 and "disabled" in refused.json()["errors"][0]["message"]


def test_unlimited_wait_when_enabled(make_env: Callable[..., Env]) -> None:
    relaxed = make_env(allow_unlimited_wait=True)
    relaxed.create_admin()
    response = relaxed.get(AGG, headers={"Prefer": "wait=-1"})
    assert response.status_code == 200 and response.headers["preference-applied"] == "wait=-1"


def test_timeout_is_a_500_naming_the_seconds(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    original = data_quality.list_aggregations

    async def slow(*args: object, **kwargs: object) -> object:
        await asyncio.sleep(5)  # a slow store's read, cut off (cancelled) after the 1 s asked
        return await original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(data_quality, "list_aggregations", slow)
    response = env.get(AGG, headers={"Prefer": "wait=1"})
    assert response.status_code == 500
    assert response.json()["errors"][0]["message"] == "request timed out after 1 seconds"


# --- edition ----------------------------------------------------------------------------


def test_community_edition_hides_clients(make_env: Callable[..., Env]) -> None:
    env = make_env(edition="community")
    env.create_admin()
    response = env.get("/api/v2/clients/00000000-0000-4000-8000-000000000000")
    assert response.status_code == 404
    assert "Enterprise edition only" in response.json()["errors"][0]["message"]
    assert env.get(AGG).status_code == 200


# --- health and the OpenAPI document ------------------------------------------------------


def test_health_without_authentication(env: Env) -> None:
    response = env.request("GET", "/health")
    assert response.status_code == 200
    assert response.json()["data"]["status"] == "ok"


def test_health_is_503_when_the_database_is_unreachable(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def unreachable(conn: object) -> None:
        raise ConnectionRefusedError("connection refused")

    monkeypatch.setattr(probes, "ping", unreachable)
    response = env.request("GET", "/health")
    assert response.status_code == 503
    assert response.json()["errors"][0]["context"] == "database"


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_health_is_503_when_postgresql_refuses_connections(env: Env) -> None:
    """A real outage after start-up: live connections killed, new ones refused."""
    name = env.url.rsplit("/", 1)[1]
    asyncio.run(
        admin_sql(
            f"ALTER DATABASE {name} ALLOW_CONNECTIONS false",
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'",
        )
    )
    try:
        response = env.request("GET", "/health")
        assert response.status_code == 503
        assert response.json()["errors"] == [
            {"context": "database", "message": "database is unreachable"}
        ]
    finally:
        asyncio.run(admin_sql(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true"))
    assert env.request("GET", "/health").status_code == 200


OPENAPI_DOCUMENT = FIXTURES / "openapi.json"


def test_openapi_document_is_served_and_valid(env: Env) -> None:
    response = env.request("GET", "/api/v2/spec/openapi.json")
    assert response.status_code == 200
    document = response.json()
    # The reviewed document: a change to it is deliberate, made by regenerating the file.
    assert document == json.loads(OPENAPI_DOCUMENT.read_text()), (
        "the OpenAPI document changed; if that is meant, regenerate tests/fixtures/openapi.json: "
        ".venv/bin/python -c 'import json; from graphsvc.api.openapi import build_openapi; "
        "print(json.dumps(build_openapi(), indent=1))' > tests/fixtures/openapi.json"
    )
    validate(document)
    assert document["openapi"] == "3.1.0"
    assert {"Retry-After", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} <= set(
        document["components"]["responses"]["Error429"]["headers"]
    )
    for path in (
        "/api/v2/data-quality-stats-aggregations",
        "/api/v2/azure-tenants/{tenant_id}/data-quality-stats",
        "/api/v2/saml/providers/{saml_provider_id}",
        "/api/v2/clients/{client_id}",
        "/api/v2/computers/{object_id}/dcom-rights",
    ):
        operation = document["paths"][path]["get"]
        assert {"200", "400", "401", "403", "404", "429", "500"} <= set(operation["responses"])
