"""Finding the ids to ask for: a user who ingested the real SharpHound samples finds WIN10's
object id by name (API and CLI) and gets its DCOM list; the tenants of an AzureHound file,
the SAML providers, the clients and the schema extensions are listed; every answer is
validated against the OpenAPI document, on both stores."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from graphsvc.demo.collectors import Tenant, write_azurehound
from graphsvc.demo.dataset import DemoResult
from tests.conftest import FIXTURES, Env, ingest

TESTLAB = FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "ingest"
WIN10 = "S-1-5-21-3130019616-2776909439-2417379446-1104"


def cli(env: Env, *args: str) -> str:
    result = env.cli(*args)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_find_win10_by_name_then_its_dcom_rights(env: Env) -> None:
    ingest(env, TESTLAB)
    by_name = env.get("/api/v2/computers/WIN10.TESTLAB.LOCAL/dcom-rights")
    assert by_name.status_code == 404
    assert "/api/v2/search?q=" in by_name.json()["errors"][0]["message"]
    found = env.get("/api/v2/search?q=win10&type=Computer").json()
    assert found["count"] == 1 and found["data"][0]["objectid"] == WIN10
    assert found["data"][0]["name"] == "WIN10.TESTLAB.LOCAL"
    assert found["data"][0]["distinguishedname"].startswith("CN=WIN10")
    from_cli = json.loads(cli(env, "find", "WIN10", "--kind", "Computer", "--json"))
    assert [n["objectid"] for n in from_cli["data"]] == [WIN10]
    rights = env.get(f"/api/v2/computers/{WIN10}/dcom-rights").json()
    assert rights["count"] >= 1


def test_search_by_object_id_ranks_it_first_and_pages(env: Env) -> None:
    ingest(env, TESTLAB)
    exact = env.get(f"/api/v2/search?q={WIN10.lower()}").json()
    assert exact["data"][0]["objectid"] == WIN10
    every = env.get("/api/v2/search?q=TESTLAB&limit=5").json()
    assert every["count"] > 5 and len(every["data"]) == 5 and every["limit"] == 5
    prefix_first = env.get("/api/v2/search?q=domain&limit=100").json()["data"]
    names = [n["name"] for n in prefix_first]
    starts = [n.upper().startswith("DOMAIN") for n in names]
    assert starts == sorted(starts, reverse=True)  # names that start with it come first
    wild = env.get("/api/v2/search?q=%25").json()  # a literal %, not a wildcard
    assert wild["count"] == 0


@pytest.mark.parametrize(
    ("query", "context"),
    [("", "q"), ("q=", "q"), ("q=x&limit=101", "limit"), ("q=x&q=y", "q")],
)
def test_bad_searches_are_400(env: Env, query: str, context: str) -> None:
    response = env.get("/api/v2/search" + (f"?{query}" if query else ""))
    assert response.status_code == 400 and response.json()["errors"][0]["context"] == context


def test_available_domains_name_the_tenants_of_an_azurehound_file(env: Env, tmp_path: Path) -> None:
    tenant = "A1B2C3D4-0000-4000-8000-00000000ABCD"
    path = write_azurehound(tmp_path / "azure.json", [Tenant(tenant, "ACME", {"AZUser": 2})])
    ingest(env, path, TESTLAB)
    listed = env.get("/api/v2/available-domains").json()["data"]
    assert {"type": "azure", "name": "ACME", "id": tenant, "collected": True} in listed
    domains = {d["name"]: d for d in listed if d["type"] == "active-directory"}
    assert domains["TESTLAB.LOCAL"]["collected"] is True
    assert tenant in cli(env, "domains")
    run = json.loads(cli(env, "ingest", str(path), "--json"))
    assert {"type": "azure", "name": "ACME", "id": tenant} in run["environments"]


def test_lists_of_providers_clients_and_extensions(demo_env: tuple[Env, DemoResult]) -> None:
    env, demo = demo_env
    providers = env.get("/api/v2/saml").json()["data"]["saml_providers"]
    assert [p["id"] for p in providers] == demo.saml_provider_ids
    clients = env.get("/api/v2/clients?limit=1").json()
    assert clients["count"] == 2 and len(clients["data"]) == 1
    assert clients["data"][0]["id"] in demo.client_ids
    extensions = env.get("/api/v2/graph-schema/extensions").json()["data"]
    kinds = {k["id"] for x in extensions for k in x["environment_kinds"]}
    assert set(demo.environment_kind_ids) == kinds
    # The reference's list: the same extensions, without their environment kinds.
    summaries = env.get("/api/v2/extensions").json()["data"]["extensions"]
    assert summaries == [
        {
            "id": x["id"],
            "name": x["display_name"],
            "namespace": x["name"],
            "version": x["version"],
            "is_builtin": x["is_builtin"],
        }
        for x in extensions
    ]
    assert {"AD", "AZ"} <= {x["namespace"] for x in summaries if x["is_builtin"]}


def test_client_list_is_enterprise_only(make_env: Callable[..., Env]) -> None:
    env = make_env(edition="community")
    env.create_admin()
    assert env.get("/api/v2/clients").status_code == 404


def test_client_list_filters_and_sort(demo_env: tuple[Env, DemoResult]) -> None:
    """The reference's ListClients filters and sort columns."""
    env, demo = demo_env
    every = env.get("/api/v2/clients").json()["data"]
    assert [c["name"] for c in every] == sorted(c["name"] for c in every)
    assert sorted(c["id"] for c in every) == sorted(demo.client_ids)
    first = every[0]
    only = env.get(f"/api/v2/clients?name=eq:{first['name']}").json()
    assert only["count"] == 1 and only["data"][0]["id"] == first["id"]
    assert env.get(f"/api/v2/clients?id=neq:{first['id']}").json()["data"] == every[1:]
    backwards = env.get("/api/v2/clients?sort_by=-name").json()["data"]
    assert [c["id"] for c in backwards] == [c["id"] for c in reversed(every)]
    assert env.get("/api/v2/clients?completed_job_count=gte:0").json()["count"] == 2
    refused = env.get("/api/v2/clients?secret=eq:x")
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["message"].startswith("the column 'secret' cannot be")
