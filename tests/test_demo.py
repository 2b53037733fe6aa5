"""The demo dataset: every operation answers 200 with the identifiers the demo prints,
signed and with a JWT."""

from __future__ import annotations

from functools import partial

from graphsvc.demo.dataset import DemoResult
from graphsvc.store.db import Connection
from tests.conftest import Env


def demo_uris(result: DemoResult) -> list[str]:
    uris = [
        f"/api/v2/data-quality-stats-aggregations?schema_environment_kind_id={k}"
        for k in result.environment_kind_ids
    ]
    uris += [
        f"/api/v2/data-quality-stats-aggregations?schema_environment_kind_id="
        f"{result.environment_kind_ids[0]}&schema_extension_id={x}"
        for x in result.extension_ids
    ]
    uris += [f"/api/v2/azure-tenants/{t}/data-quality-stats" for t in result.tenant_ids]
    uris += [f"/api/v2/saml/providers/{p}" for p in result.saml_provider_ids]
    uris += [f"/api/v2/clients/{c}" for c in result.client_ids]
    uris += [f"/api/v2/computers/{c}/dcom-rights" for c in result.computer_object_ids]
    return uris


def test_every_operation_answers_signed_and_with_a_jwt(demo_env: tuple[Env, DemoResult]) -> None:
    env, result = demo_env
    jwt = env.login(result.admin_username, result.admin_secret)
    for uri in demo_uris(result):
        assert env.get(uri).status_code == 200, uri
        response = env.request("GET", uri, {"Authorization": f"Bearer {jwt}"})
        assert response.status_code == 200, uri


def test_demo_data_is_substantial(demo_env: tuple[Env, DemoResult]) -> None:
    env, result = demo_env
    for kind_id in result.environment_kind_ids:
        body = env.get(
            f"/api/v2/data-quality-stats-aggregations?schema_environment_kind_id={kind_id}"
        ).json()
        runs = {row["run_id"] for row in body["data"]}
        assert len(runs) >= 3, kind_id  # aggregation rows over several runs
        assert {row["metric_type"] for row in body["data"]} == {"node", "relationship"}
    for tenant in result.tenant_ids:
        body = env.get(f"/api/v2/azure-tenants/{tenant}/data-quality-stats").json()
        assert body["count"] == 30  # 30 days of daily stats
    holders = [
        env.get(f"/api/v2/computers/{c}/dcom-rights").json()["count"]
        for c in result.computer_object_ids
    ]
    assert max(holders) >= 5 and 0 in holders


def test_aggregations_match_the_ingested_graph(demo_env: tuple[Env, DemoResult]) -> None:
    """The newest run's node counts are the graph's own counts per kind."""
    env, result = demo_env
    domain_kind = result.environment_kind_ids[0]
    rows = env.get(
        f"/api/v2/data-quality-stats-aggregations?schema_environment_kind_id="
        f"{domain_kind}&schema_extension_id=1"
    ).json()["data"]
    newest = max(r["created_at"] for r in rows)
    latest = {r["metric_name"]: r["metric_value"] for r in rows if r["created_at"] == newest}

    async def count(conn: Connection, kind: str) -> int:
        found: int = await conn.fetchval(
            "SELECT count(*) FROM node_kinds nk JOIN kinds k ON k.id = nk.kind_id "
            "WHERE k.name = $1",
            kind,
        )
        return found

    for kind in ("User", "Group", "Computer", "Domain"):
        assert latest[kind] == env.run_in_transaction(partial(count, kind=kind)), kind
    assert latest["ExecuteDCOM"] == 6
