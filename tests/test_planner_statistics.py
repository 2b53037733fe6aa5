"""After a large ingest, PostgreSQL's planner statistics of the graph tables are fresh: on
row estimates made before the load (autovacuum has not run yet), the DCOM list took 16 s at
a million nodes. A small run leaves them to autovacuum; SQLite keeps none."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.shapes import LargeDomain
from graphsvc.store.db import Connection
from graphsvc.store.graph import GRAPH_TABLES, LARGE_RUN_ROWS
from tests.conftest import Env


def estimated_rows(env: Env) -> dict[str, float]:
    """pg_class's row estimates of the graph tables: -1 until a table is first analyzed
    (or vacuumed), which the ingest's own transaction does where it must."""

    async def work(conn: Connection) -> dict[str, float]:
        rows = await conn.fetch(
            "SELECT relname, reltuples FROM pg_class WHERE relname = ANY($1::text[])",
            list(GRAPH_TABLES),
        )
        return {name: float(estimate) for name, estimate in rows}

    return env.run_in_transaction(work)


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_a_large_ingest_refreshes_the_planners_row_estimates(env: Env, tmp_path: Path) -> None:
    small, large = tmp_path / "small", tmp_path / "large"
    LargeDomain.of_size("SMALL.LOCAL", "S-1-5-21-7-7-7", 40).write(small)
    LargeDomain.of_size("LARGE.LOCAL", "S-1-5-21-7-7-8", 2_000).write(large)
    assert env.cli("ingest", str(small)).exit_code == 0
    assert set(estimated_rows(env).values()) == {-1.0}  # under LARGE_RUN_ROWS: not analyzed
    made = env.cli("ingest", str(large), "--json")
    assert made.exit_code == 0, made.output
    estimates = estimated_rows(env)
    assert estimates["edges"] >= LARGE_RUN_ROWS and estimates["nodes"] >= 2_000, estimates
