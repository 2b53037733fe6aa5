"""Prefer: wait=N really cancels the database work when the time runs out, on both stores."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from graphsvc.ingest.records import NodeRecord
from graphsvc.store import entities, graph
from graphsvc.store.db import Connection, ConnectionOnDemand, asyncpg_dsn
from graphsvc.store.postgres import PostgresConnection
from graphsvc.store.sqlite import SQLiteConnection
from tests.conftest import wait_until

MARKER = "graphsvc-slow-probe"
# Counts towards ten billion: minutes of work on either store.
ENDLESS = f"""WITH RECURSIVE steps(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM steps
    WHERE n < 10000000000 AND {{probe}} >= 0) SELECT count(*) FROM steps /* {MARKER} */"""
DCOM = "/api/v2/computers/{}/dcom-rights"


def install_slow_query(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the DCOM list run the endless query; on SQLite every row ticks a counter."""
    ticks = [0]

    def tick() -> int:
        ticks[0] += 1
        return 1

    async def slow(conn: Connection, *args: Any) -> Any:
        if isinstance(conn, ConnectionOnDemand):  # a read's connection, taken at its first use
            conn = await conn.take()
        if isinstance(conn, SQLiteConnection):
            conn.raw.create_function("probe_tick", 0, tick)
            await conn.fetch(ENDLESS.format(probe="probe_tick()"))
        else:
            assert isinstance(conn, PostgresConnection)
            await conn.fetch(ENDLESS.format(probe="1"))
        raise AssertionError("the endless query ended")

    monkeypatch.setattr(entities, "list_reached", slow)
    return ticks


def running_probes(url: str) -> list[str]:
    async def read() -> list[str]:
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            rows = await conn.fetch(
                "SELECT state FROM pg_stat_activity WHERE query LIKE $1 AND pid <> "
                "pg_backend_pid() AND datname = current_database()",  # not another test's
                f"%{MARKER}%",
            )
        finally:
            await conn.close()
        return [r["state"] for r in rows]

    return asyncio.run(read())


def test_timeout_cancels_the_statement(demo_env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    env, result = demo_env
    ticks = install_slow_query(monkeypatch)
    on_postgres = env.url.startswith("postgresql")
    started = time.monotonic()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(
            env.get, DCOM.format(result.computer_object_ids[0]), headers={"Prefer": "wait=1"}
        )
        if on_postgres:  # the check below can see the probe while it runs
            wait_until(
                lambda: "active" in running_probes(env.url), timeout=5, what="the probe to run"
            )
        response = pending.result()
    elapsed = time.monotonic() - started
    assert response.status_code == 500
    assert response.json()["errors"][0]["message"] == "request timed out after 1 seconds"
    assert elapsed < 10, "the request waited for the query instead of timing out"

    if on_postgres:
        # The probe must not run on: the backend is idle (pg_stat_activity still shows an
        # idle backend's last statement) or gone, never active or inside a transaction.
        def stopped() -> bool:
            return all(state == "idle" for state in running_probes(env.url))

        wait_until(stopped, timeout=2, what="the probe to stop")
    else:
        assert ticks[0] > 0, "the probe query ran"
        seen = ticks[0]
        # Not an event: the time in which a statement still running would have ticked,
        # thousands of times (the interrupted one ended before the answer was sent).
        time.sleep(0.2)
        assert ticks[0] == seen, "the SQLite statement went on running after the timeout"

    monkeypatch.undo()
    after = env.get(DCOM.format(result.computer_object_ids[0]))
    assert after.status_code == 200, "the connection is usable again"


def test_timeouts_free_every_pooled_connection(
    make_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More timed-out requests than pooled connections: none leaks, the pool still serves."""
    env = make_env(db_pool_size=2)
    env.create_admin()
    computer = NodeRecord("PC-1", "PC-1", ["Computer"], {})
    env.run_in_transaction(lambda conn: graph.upsert_nodes(conn, [computer], 1, datetime.now(UTC)))
    install_slow_query(monkeypatch)
    for _ in range(3):
        response = env.get(DCOM.format("PC-1"), headers={"Prefer": "wait=1"})
        assert response.status_code == 500
    monkeypatch.undo()
    statuses = [env.get("/api/v2/saml/providers/1").status_code for _ in range(4)]
    assert statuses == [404] * 4
