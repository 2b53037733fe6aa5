"""GET /api/v2/data-quality-stats-aggregations (4.1) and
GET /api/v2/azure-tenants/{tenant_id}/data-quality-stats (4.3)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic import command

from bench.bulk import bulk_insert_aggregations
from bench.shapes import AggregationHistory
from graphsvc.demo.dataset import DemoResult
from graphsvc.store import data_quality
from graphsvc.store.db import Connection, run_in_transaction
from graphsvc.store.migrate import alembic_config, upgrade_schema
from tests.conftest import Env

AGG = "/api/v2/data-quality-stats-aggregations"
TENANT = "6F1C2A3B-9D4E-4F5A-8B6C-7D8E9FA0B1C2"
STATS = "/api/v2/azure-tenants/{}/data-quality-stats"
AD_EXTENSION, DOMAIN_KIND = 1, 8  # seeded by migration 0002


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def seed_aggregations(
    env: Env,
    days_ago: list[int],
    environment_kind_id: int = DOMAIN_KIND,
    extension_id: int = AD_EXTENSION,
) -> datetime:
    """One node row per day; metric_value is the day, so rows identify themselves."""
    base = now()

    async def work(conn: Connection) -> None:
        for day in days_ago:
            row = data_quality.AggregationRow(
                str(uuid.uuid4()), extension_id, environment_kind_id, "node", "User", float(day), 2
            )
            await data_quality.insert_aggregations(conn, [row], base - timedelta(days=day))

    env.run_in_transaction(work)
    return base


def values(body: dict[str, Any]) -> list[float]:
    return [row["metric_value"] for row in body["data"]]


def test_default_window_is_last_30_days_newest_first(env: Env) -> None:
    seed_aggregations(env, [0, 1, 5, 29, 31, 60])
    response = env.get(f"{AGG}?schema_environment_kind_id={DOMAIN_KIND}")
    assert response.status_code == 200
    body = response.json()
    assert values(body) == [0.0, 1.0, 5.0, 29.0]
    assert body["count"] == 4 and body["skip"] == 0 and body["limit"] == 1000
    start = datetime.fromisoformat(body["start"])
    end = datetime.fromisoformat(body["end"])
    assert end - start == timedelta(days=30)
    assert abs((end - datetime.now(UTC)).total_seconds()) < 60
    row = body["data"][0]
    assert row["extension_id"] == AD_EXTENSION and row["environment_kind_id"] == DOMAIN_KIND
    assert row["metric_type"] == "node" and row["metric_name"] == "User" and row["kind_id"] == 2
    assert row["deleted_at"] == {"time": "0001-01-01T00:00:00Z", "valid": False}


def test_window_bounds_are_inclusive_and_echoed(env: Env) -> None:
    base = seed_aggregations(env, [2, 3, 4])
    start = (base - timedelta(days=3)).isoformat().replace("+00:00", "Z")
    end = (base - timedelta(days=2)).isoformat().replace("+00:00", "Z")
    body = env.get(f"{AGG}?schema_environment_kind_id=8&start={start}&end={end}").json()
    assert values(body) == [2.0, 3.0]
    assert datetime.fromisoformat(body["start"]) == base - timedelta(days=3)
    assert datetime.fromisoformat(body["end"]) == base - timedelta(days=2)


def test_window_accepts_offsets_and_fractions(env: Env) -> None:
    base = seed_aggregations(env, [1])
    local = (base - timedelta(days=2)).astimezone(
        __import__("datetime").timezone(timedelta(hours=2))
    )
    start = local.isoformat(timespec="milliseconds").replace("+", "%2B")
    body = env.get(f"{AGG}?schema_environment_kind_id=8&start={start}").json()
    assert values(body) == [1.0]
    assert datetime.fromisoformat(body["start"]) == base - timedelta(days=2)


def test_start_alone_defaults_end_to_now_and_end_alone_moves_start(env: Env) -> None:
    base = seed_aggregations(env, [40, 45, 50])
    end = (base - timedelta(days=40)).isoformat().replace("+00:00", "Z")
    body = env.get(f"{AGG}?schema_environment_kind_id=8&end={end}").json()
    assert values(body) == [40.0, 45.0, 50.0]  # start = end - 30 days
    start = (base - timedelta(days=46)).isoformat().replace("+00:00", "Z")
    assert values(env.get(f"{AGG}?schema_environment_kind_id=8&start={start}").json()) == [
        40.0,
        45.0,
    ]


def test_sort_and_stable_tie_break(env: Env) -> None:
    seed_aggregations(env, [3, 1, 2])
    ascending = env.get(f"{AGG}?schema_environment_kind_id=8&sort_by=created_at").json()
    assert values(ascending) == [3.0, 2.0, 1.0]
    by_update = env.get(f"{AGG}?schema_environment_kind_id=8&sort_by=-updated_at").json()
    assert values(by_update) == [1.0, 2.0, 3.0]


def test_rows_with_equal_times_page_stably_by_id(env: Env) -> None:
    stamp = now()

    async def work(conn: Connection) -> None:
        rows = [
            data_quality.AggregationRow("run", 1, 8, "relationship", f"K{i}", float(i), None)
            for i in range(7)
        ]
        await data_quality.insert_aggregations(conn, rows, stamp)

    env.run_in_transaction(work)
    pages = [
        env.get(f"{AGG}?schema_environment_kind_id=8&skip={s}&limit=3").json() for s in (0, 3, 6)
    ]
    seen = [v for p in pages for v in values(p)]
    assert seen == [6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0]  # -created_at, then -id
    assert all(p["count"] == 7 for p in pages)
    assert pages[0]["data"][0]["kind_id"] is None


def test_filters_by_environment_kind_and_extension(env: Env) -> None:
    seed_aggregations(env, [1], environment_kind_id=8, extension_id=1)
    seed_aggregations(env, [2], environment_kind_id=8, extension_id=2)
    seed_aggregations(env, [3], environment_kind_id=118, extension_id=2)
    assert values(env.get(f"{AGG}?schema_environment_kind_id=8").json()) == [1.0, 2.0]
    only_ad = env.get(f"{AGG}?schema_environment_kind_id=8&schema_extension_id=1").json()
    assert values(only_ad) == [1.0]
    assert values(env.get(f"{AGG}?schema_environment_kind_id=118").json()) == [3.0]


def test_unknown_environment_kind_is_empty_but_unknown_extension_is_404(env: Env) -> None:
    seed_aggregations(env, [1])
    empty = env.get(f"{AGG}?schema_environment_kind_id=999999")
    assert empty.status_code == 200 and empty.json()["data"] == []
    missing = env.get(f"{AGG}?schema_environment_kind_id=8&schema_extension_id=4242")
    assert missing.status_code == 404
    assert missing.json()["errors"][0]["context"] == "schema_extension_id"


@pytest.mark.parametrize(
    ("query", "context"),
    [
        ("", "schema_environment_kind_id"),
        ("schema_environment_kind_id=", "schema_environment_kind_id"),
        ("schema_environment_kind_id=abc", "schema_environment_kind_id"),
        ("schema_environment_kind_id=2147483648", "schema_environment_kind_id"),
        ("schema_environment_kind_id=8&schema_extension_id=x", "schema_extension_id"),
        ("schema_environment_kind_id=8&start=yesterday", "start"),
        ("schema_environment_kind_id=8&end=2026-01-01", "end"),
        ("schema_environment_kind_id=8&start=2026-02-30T00:00:00Z", "start"),
        (
            "schema_environment_kind_id=8&start=2026-01-02T00:00:00Z&end=2026-01-01T00:00:00Z",
            "start",
        ),
        ("schema_environment_kind_id=8&sort_by=metric_value", "sort_by"),
        ("schema_environment_kind_id=8&skip=-3", "skip"),
        ("schema_environment_kind_id=8&limit=10001", "limit"),
        ("schema_environment_kind_id=8&limit=5&limit=6", "limit"),
        (
            "schema_environment_kind_id=8&start=2026-01-01T00:00:00Z&start=2026-01-02T00:00:00Z",
            "start",
        ),
    ],
)
def test_bad_parameters_are_400_naming_them(env: Env, query: str, context: str) -> None:
    response = env.get(f"{AGG}?{query}" if query else AGG)
    assert response.status_code == 400
    body = response.json()
    assert body["http_status"] == 400 and body["errors"][0]["context"] == context


def test_missing_environment_kind_message(env: Env) -> None:
    message = env.get(AGG).json()["errors"][0]["message"]
    assert message == "missing required query parameter: schema_environment_kind_id"


def test_max_limit_is_a_setting(make_env: Callable[..., Env]) -> None:
    env = make_env(max_limit=50)
    env.create_admin()
    assert env.get(f"{AGG}?schema_environment_kind_id=8&limit=50").status_code == 200
    assert env.get(f"{AGG}?schema_environment_kind_id=8&limit=51").status_code == 400


# --- Azure tenant stats ---------------------------------------------------------------------


def seed_tenant(env: Env, tenant_id: str, days_ago: list[int]) -> None:
    base = now()

    async def work(conn: Connection) -> None:
        for day in days_ago:
            counts = dict.fromkeys(data_quality.TENANT_COUNT_FIELDS, day)
            await data_quality.insert_stats_record(
                conn,
                data_quality.TENANT_STATS,
                tenant_id,
                counts,
                str(uuid.uuid4()),
                base - timedelta(days=day),
            )

    env.run_in_transaction(work)


def test_tenant_time_series(env: Env) -> None:
    seed_tenant(env, TENANT, [0, 3, 10, 45])
    seed_tenant(env, "0B5E8C1D-2F3A-4B6C-9D7E-1A2B3C4D5E6F", [1])
    response = env.get(STATS.format(TENANT))
    assert response.status_code == 200
    body = response.json()
    assert [r["users"] for r in body["data"]] == [0, 3, 10]
    assert body["count"] == 3 and body["limit"] == 1000
    row = body["data"][1]
    assert row["tenantid"] == TENANT
    assert {k: row[k] for k in data_quality.TENANT_COUNT_FIELDS} == dict.fromkeys(
        data_quality.TENANT_COUNT_FIELDS, 3
    )
    uuid.UUID(row["run_id"])


def test_tenant_id_is_case_insensitive(env: Env) -> None:
    seed_tenant(env, TENANT, [1])
    assert env.get(STATS.format(TENANT.lower())).json()["count"] == 1


def test_tenant_sort_and_paging(env: Env) -> None:
    seed_tenant(env, TENANT, [1, 2, 3, 4])
    body = env.get(STATS.format(TENANT) + "?sort_by=created_at&skip=1&limit=2").json()
    assert [r["users"] for r in body["data"]] == [3, 2] and body["count"] == 4


def test_unknown_tenant_is_404_and_known_tenant_outside_window_is_empty(env: Env) -> None:
    unknown = env.get(STATS.format("11111111-2222-3333-4444-555555555555"))
    assert unknown.status_code == 404
    assert unknown.json()["errors"][0]["context"] == "tenant_id"
    seed_tenant(env, TENANT, [90])
    quiet = env.get(STATS.format(TENANT))
    assert quiet.status_code == 200 and quiet.json()["data"] == [] and quiet.json()["count"] == 0


def test_tenant_known_only_as_a_graph_node_is_200(demo_env: tuple[Env, DemoResult]) -> None:
    env, result = demo_env

    async def drop_stats(conn: Connection) -> None:
        await conn.execute("DELETE FROM azure_tenant_stats")

    env.run_in_transaction(drop_stats)
    response = env.get(STATS.format(result.tenant_ids[1]))
    assert response.status_code == 200 and response.json()["count"] == 0


def test_tenant_id_that_is_not_a_uuid_is_400(env: Env) -> None:
    response = env.get(STATS.format("not-a-tenant"))
    assert response.status_code == 400
    assert response.json()["errors"][0]["context"] == "tenant_id"


def test_tenant_stats_parameters_are_checked(env: Env) -> None:
    seed_tenant(env, TENANT, [1])
    for query, context in [
        ("sort_by=users", "sort_by"),
        ("limit=x", "limit"),
        ("start=2026-13-01T00:00:00Z", "start"),
    ]:
        response = env.get(STATS.format(TENANT) + "?" + query)
        assert response.status_code == 400 and response.json()["errors"][0]["context"] == context


def test_a_long_generated_history_answers_by_its_window(env: Env) -> None:
    end = now().replace(microsecond=0)
    history = AggregationHistory(5000, end, per_run=20, every_minutes=15)
    added = env.run_in_transaction(
        lambda conn: bulk_insert_aggregations(conn, history.aggregation_rows({}))
    )
    assert added == 5000
    start = end - timedelta(hours=24)
    window = f"&start={start.isoformat()}&end={end.isoformat()}".replace("+00:00", "Z")
    body = env.get(f"{AGG}?schema_environment_kind_id=8{window}&limit=5").json()
    # Runs every 15 minutes: 97 of them (0 to 24 hours back, both ends included).
    assert body["count"] == 97 * 20
    assert [r["run_id"] for r in body["data"]] == ["history-0"] * 5
    everything = env.get(f"{AGG}?schema_environment_kind_id=8&start=2000-01-01T00:00:00Z").json()
    assert everything["count"] == 5000


def test_upgrading_counts_the_batches_stored_before(tmp_path: Path) -> None:
    """Migration 0008 counts the aggregation rows already stored, run by run, so that the
    totals of windows over an older history stay right."""
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    command.upgrade(alembic_config(url), "0007")
    stamp = now() - timedelta(days=3)

    async def seed(conn: Connection) -> None:
        for run in range(4):
            for metric in ("User", "Group", "Computer"):
                await conn.execute(
                    """INSERT INTO data_quality_aggregations (run_id, extension_id,
                        environment_kind_id, metric_type, metric_name, metric_value, kind_id,
                        created_at, updated_at) VALUES ($1, 1, 8, 'node', $2, 1, NULL, $3, $3)""",
                    f"run-{run}",
                    metric,
                    stamp - timedelta(hours=run),
                )

    asyncio.run(run_in_transaction(url, seed, changes_answers=False))  # no data version at 0007
    upgrade_schema(url)

    async def total(conn: Connection) -> tuple[int, int]:
        everything = await data_quality.list_aggregations(
            conn, DOMAIN_KIND, None, stamp - timedelta(days=1), now(), [], 0, 1
        )
        two_runs = await data_quality.list_aggregations(
            conn, DOMAIN_KIND, AD_EXTENSION, stamp - timedelta(hours=1), stamp, [], 0, 1
        )
        assert everything is not None and two_runs is not None
        return everything[0], two_runs[0]

    assert asyncio.run(run_in_transaction(url, total)) == (12, 6)
