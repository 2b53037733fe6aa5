"""GET /api/v2/saml/providers/{id} (4.2) and GET /api/v2/clients/{id} (4.4)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import msgspec
import pytest

from graphsvc import wire
from graphsvc.accounts import saml
from graphsvc.demo.dataset import DemoResult
from graphsvc.store.accounts import TOKEN_FIELDS
from tests.conftest import Env

ZERO_TIME = "0001-01-01T00:00:00Z"
ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def create_provider(env: Env, name: str = "okta") -> int:
    provider_id: int = env.run_in_transaction(
        lambda conn: saml.create_saml_provider(
            conn,
            name,
            "Okta",
            "http://www.okta.com/exk1",
            "https://okta.example/sso",
            ["urn:oid:0.9.2342.19200300.100.1.3", "email"],
        )
    )
    return provider_id


def test_saml_provider_with_derived_sp_uris(env: Env) -> None:
    provider_id = create_provider(env)
    response = env.get(f"/api/v2/saml/providers/{provider_id}")
    assert response.status_code == 200
    data = response.json()["data"]
    base = "http://testserver/api/v2/sso/okta"
    assert data["id"] == provider_id and data["name"] == "okta" and data["display_name"] == "Okta"
    assert data["idp_issuer_uri"] == "http://www.okta.com/exk1"
    assert data["idp_sso_uri"] == "https://okta.example/sso"
    assert data["principal_attribute_mappings"] == ["urn:oid:0.9.2342.19200300.100.1.3", "email"]
    assert (
        data["sp_issuer_uri"],
        data["sp_sso_uri"],
        data["sp_metadata_uri"],
        data["sp_acs_uri"],
    ) == (base, f"{base}/login", f"{base}/metadata", f"{base}/callback")
    assert data["sso_provider_id"] == {"int32": 0, "valid": False}
    assert data["deleted_at"] == {"time": ZERO_TIME, "valid": False}
    datetime.fromisoformat(data["created_at"])


def test_sp_uris_use_the_public_url_setting(make_env: Callable[..., Env]) -> None:
    env = make_env(public_url="https://graph.example.com/")
    env.create_admin()
    provider_id = create_provider(env, "entra")
    data = env.get(f"/api/v2/saml/providers/{provider_id}").json()["data"]
    assert data["sp_issuer_uri"] == "https://graph.example.com/api/v2/sso/entra"
    assert data["sp_acs_uri"] == "https://graph.example.com/api/v2/sso/entra/callback"


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        ("4242", 404),
        ("0", 404),
        ("-1", 404),
        ("abc", 400),
        ("1.0", 400),
        ("2147483648", 400),
        ("99999999999999999999", 400),
    ],
)
def test_saml_provider_id_rules(env: Env, raw: str, status: int) -> None:
    response = env.get(f"/api/v2/saml/providers/{raw}")
    assert response.status_code == status
    assert response.json()["errors"][0]["context"] == "saml_provider_id"


def test_duplicate_provider_names_are_refused(env: Env) -> None:
    from graphsvc.errors import ApiError

    create_provider(env, "dup")
    with pytest.raises(ApiError) as caught:
        create_provider(env, "dup")
    assert caught.value.status == 409


# --- clients ----------------------------------------------------------------------------


def test_demo_client_with_events_token_job_and_results(demo_env: tuple[Env, DemoResult]) -> None:
    env, result = demo_env
    response = env.get(f"/api/v2/clients/{result.client_ids[0]}")
    assert response.status_code == 200
    client = response.json()["data"]
    assert client["id"] == result.client_ids[0] and client["name"] == "COLLECTOR-HQ"
    assert client["ip_address"] == "10.20.0.15"
    assert client["completed_job_count"] == 41 and client["completed_task_count"] == 3
    assert client["domain_controller"] == {"string": "DC01.CONTOSO.LOCAL", "valid": True}
    assert client["user_sid"]["valid"] is True
    assert len(client["events"]) == 2
    assert client["events"][0]["id"] < client["events"][1]["id"]
    event = client["events"][0]
    assert event["client_id"] == client["id"] and event["rrule"].startswith("DTSTART:")
    assert event["domains"][0]["name"] == "CONTOSO.LOCAL" and event["ous"][0]["exists"] is True
    token = client["token"]
    assert token["key"] == "********" and token["hmac_method"] == "hmac-sha2-256"
    assert token["user_id"] == {"uuid": ZERO_UUID, "valid": False}
    job = client["current_job"]
    assert client["current_job_id"] == {"int64": job["id"], "valid": True}
    assert job["client_name"] == "COLLECTOR-HQ" and job["status_message"] == "collecting"
    assert job["end_time"] == ZERO_TIME and job["event_id"]["valid"] is True
    assert [(r["domain_name"], r["success"]) for r in job["domain_results"]] == [
        ("CONTOSO.LOCAL", True),
        ("PARTNER.LOCAL", False),
    ]
    assert job["domain_results"][0]["user_count"] == 10
    assert client["current_task_id"] == {"int64": 0, "valid": False}
    assert client["current_task"]["id"] == 0 and client["current_task"]["client_id"] == ZERO_UUID


def test_idle_client_has_zero_valued_job_and_task(demo_env: tuple[Env, DemoResult]) -> None:
    env, result = demo_env
    client = env.get(f"/api/v2/clients/{result.client_ids[1]}").json()["data"]
    assert client["events"] == [] and client["last_checkin"] == ZERO_TIME
    for key in ("current_job", "current_task"):
        job = client[key]
        assert job["id"] == 0 and job["start_time"] == ZERO_TIME and job["domain_results"] == []
        assert job["event_id"] == {"int32": 0, "valid": False}
    assert client["domain_controller"] == {"string": "", "valid": False}
    assert client["token"]["key"] == "********"


def test_no_token_key_is_ever_read_back(demo_env: tuple[Env, DemoResult]) -> None:
    env, result = demo_env
    text = env.get(f"/api/v2/clients/{result.client_ids[0]}").text
    assert result.token_key not in text

    async def keys(conn):  # type: ignore[no-untyped-def]
        return [
            env.keys.open(r[0]) for r in await conn.fetch("SELECT key_ciphertext FROM auth_tokens")
        ]

    assert all(key not in text for key in env.run_in_transaction(keys))


def test_client_id_is_case_insensitive(demo_env: tuple[Env, DemoResult]) -> None:
    env, result = demo_env
    assert env.get(f"/api/v2/clients/{result.client_ids[0].upper()}").status_code == 200


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        ("11111111-2222-4333-8444-555555555555", 404),
        ("not-a-uuid", 400),
        ("42", 400),
        ("%7B11111111-2222-4333-8444-555555555555%7D", 400),
    ],
)
def test_client_id_rules(env: Env, raw: str, status: int) -> None:
    response = env.get(f"/api/v2/clients/{raw}")
    assert response.status_code == status
    assert response.json()["errors"][0]["context"] == "client_id"


def test_the_collection_flags_and_token_columns_are_the_wire_shapes() -> None:
    """The store's column lists follow the structs they fill, field for field."""
    for struct in (wire.ClientEvent, wire.Job):
        flags = tuple(f.name for f in msgspec.structs.fields(struct) if f.type is bool)
        assert flags == wire.COLLECTION_FLAGS, struct.__name__
    shown = tuple(f.name for f in msgspec.structs.fields(wire.TokenFields) if f.name != "key")
    assert shown == TOKEN_FIELDS
