"""AzureHound input: tenant counts (spec 2.3) from generated collections with known counts,
the real federated-identity-credential fixture, unknown kinds and id case."""

from __future__ import annotations

import json
from pathlib import Path

from graphsvc.demo.collectors import AZURE_ENTITIES, Tenant, write_azurehound
from tests.conftest import FIXTURES, Env, ingest

FIC = (
    FIXTURES
    / "bloodhound-ce"
    / "graphify"
    / "AzureFederatedIdentityCredentials"
    / "raw"
    / "federated_identity_credentials.json"
)
FIELDS = {
    "AZUser": "users",
    "AZGroup": "groups",
    "AZApp": "apps",
    "AZServicePrincipal": "service_principals",
    "AZDevice": "devices",
    "AZManagementGroup": "management_groups",
    "AZSubscription": "subscriptions",
    "AZResourceGroup": "resource_groups",
    "AZVM": "vms",
    "AZKeyVault": "key_vaults",
}
TENANTS = [
    Tenant(
        "11111111-1111-4111-8111-111111111111",
        "ALPHA",
        {
            "AZUser": 12,
            "AZGroup": 3,
            "AZApp": 4,
            "AZServicePrincipal": 6,
            "AZDevice": 5,
            "AZManagementGroup": 2,
            "AZSubscription": 2,
            "AZResourceGroup": 4,
            "AZVM": 3,
            "AZKeyVault": 2,
        },
    ),
    Tenant(
        "22222222-2222-4222-8222-222222222222",
        "BETA",
        {
            "AZUser": 3,
            "AZGroup": 1,
            "AZApp": 1,
            "AZServicePrincipal": 1,
            "AZDevice": 0,
            "AZManagementGroup": 0,
            "AZSubscription": 1,
            "AZResourceGroup": 1,
            "AZVM": 2,
            "AZKeyVault": 0,
        },
    ),
]


def test_tenant_stats_equal_the_generated_counts(env: Env, tmp_path: Path) -> None:
    result = ingest(env, write_azurehound(tmp_path / "azure.json", TENANTS))
    for tenant in TENANTS:
        body = env.get(f"/api/v2/azure-tenants/{tenant.tenant_id}/data-quality-stats").json()
        assert body["count"] == 1
        row = body["data"][0]
        assert row["run_id"] == result.run_id and row["tenantid"] == tenant.tenant_id.upper()
        assert {FIELDS[k]: row[FIELDS[k]] for k in AZURE_ENTITIES} == {
            FIELDS[k]: tenant.counts[k] for k in AZURE_ENTITIES
        }
        assert row["relationships"] == tenant.relationship_count()
        assert row["created_at"] == body["data"][0]["updated_at"]


def test_azure_aggregation_rows_sum_the_tenants(env: Env, tmp_path: Path) -> None:
    result = ingest(env, write_azurehound(tmp_path / "azure.json", TENANTS))
    body = env.get(
        "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=118"
        "&schema_extension_id=2"
    ).json()
    rows = {
        r["metric_name"]: r["metric_value"]
        for r in body["data"]
        if r["run_id"] == result.run_id and r["metric_type"] == "node"
    }
    for kind in AZURE_ENTITIES:
        total = sum(t.counts[kind] for t in TENANTS)
        assert rows.get(kind, 0.0) == float(total), kind
    assert rows["AZTenant"] == 2.0
    relationships = sum(
        r["metric_value"]
        for r in body["data"]
        if r["run_id"] == result.run_id and r["metric_type"] == "relationship"
    )
    assert relationships == sum(t.relationship_count() for t in TENANTS)


def test_repeated_records_are_counted_once(env: Env, tmp_path: Path) -> None:
    path = write_azurehound(tmp_path / "twice.json", [TENANTS[1], TENANTS[1]])
    ingest(env, path)
    row = env.get(f"/api/v2/azure-tenants/{TENANTS[1].tenant_id}/data-quality-stats").json()[
        "data"
    ][0]
    assert row["users"] == 3 and row["relationships"] == TENANTS[1].relationship_count()


def test_lower_case_ids_and_unknown_kinds(env: Env, tmp_path: Path) -> None:
    tenant = "33333333-3333-4333-8333-333333333333"
    document = {
        "meta": {"type": "azure", "version": 5},
        "data": [
            {
                "kind": "AZTenant",
                "data": {"tenantId": tenant, "displayName": "GAMMA", "collected": True},
            },
            {
                "kind": "AZUser",
                "data": {
                    "id": "aaaaaaaa-0000-4000-8000-000000000001",
                    "tenantId": tenant,
                    "userPrincipalName": "a@gamma",
                },
            },
            {"kind": "AZSomethingNew", "data": {"id": "x", "tenantId": tenant}},
            {
                "kind": "AZKeyVault",
                "data": {
                    "id": "/subscriptions/s/rg/vault1",
                    "name": "vault1",
                    "properties": {"tenantId": tenant},
                },
            },
        ],
    }
    (tmp_path / "azure.json").write_text(json.dumps(document))
    result = ingest(env, tmp_path / "azure.json")
    assert result.skipped == {"AzureHound AZSomethingNew": 1}  # counted, not silently dropped
    row = env.get(f"/api/v2/azure-tenants/{tenant.upper()}/data-quality-stats").json()["data"][0]
    assert (row["users"], row["key_vaults"], row["relationships"]) == (1, 1, 1)


def test_federated_identity_credential_fixture(env: Env) -> None:
    result = ingest(env, FIC)
    records = json.loads(FIC.read_text())["data"]
    credentials = {f["fic"]["id"].upper() for r in records for f in r["data"]["fics"]}
    apps = {f["appId"].upper() for r in records for f in r["data"]["fics"]}
    assert result.nodes == len(credentials) == 14
    assert result.edges == len(credentials)

    async def targets(conn):  # type: ignore[no-untyped-def]
        rows = await conn.fetch(
            "SELECT DISTINCT e.object_id, e.label FROM edges x JOIN nodes e ON e.id = x.end_id"
        )
        return {(r[0], r[1]) for r in rows}

    assert env.run_in_transaction(targets) == {(app, "AZApp") for app in apps}
    assert len(apps) == 7
