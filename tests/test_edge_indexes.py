"""Migration 0026: one index of the relationships by kind, whether derived, run and
environment, which a run's counts seek kind by kind instead of reading every relationship.
SQLite's plans (EXPLAIN QUERY PLAN), since its planner is the one that scanned: the six
million relationships of the 1 GB collection took 0.3 to 1 s a scan."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from graphsvc.ingest.run import ingest_files
from graphsvc.store import analysis, data_quality, graph
from graphsvc.store.db import Connection, run_in_transaction
from graphsvc.store.sqlite import SQLiteConnection
from tests.conftest import FIXTURES, Templates

COLLECTION = FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "ingest"


async def statements_of_a_runs_counts(conn: Connection) -> list[str]:
    """The statements (parameters in place) of the run's counts, traced."""
    assert isinstance(conn, SQLiteConnection)
    await ingest_files(conn, [COLLECTION])
    traced: list[str] = []
    conn.raw.set_trace_callback(traced.append)
    try:
        await graph.count_run(conn, 1)
        await data_quality.fill_edge_environments(conn, 1)
        await data_quality.run_counts(conn, 1)
        await analysis.count_derived_edges(conn)
    finally:
        conn.raw.set_trace_callback(None)
    return traced


def test_a_runs_counts_read_no_relationship_but_through_the_index(
    tmp_path: Path, templates: Templates
) -> None:
    url = templates.sqlite_copy(tmp_path / "store.sqlite3", "schema")
    statements = asyncio.run(run_in_transaction(url, statements_of_a_runs_counts))
    on_edges = [s for s in statements if "FROM edges" in s or "UPDATE edges" in s]
    assert len(on_edges) == 4
    with sqlite3.connect(tmp_path / "store.sqlite3") as db:
        for statement in on_edges:
            plan = [row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {statement}")]
            on_the_edges = [step for step in plan if step.split()[1:2] == ["edges"]]
            assert on_the_edges, plan
            # SEARCH: a seek into the index; SCAN (of the table or the index) reads all.
            assert all(
                step.startswith("SEARCH") and "INDEX edges_kind_run" in step
                for step in on_the_edges
            ), (statement, plan)


def test_the_relationships_have_three_indexes_and_no_partial_one(
    tmp_path: Path, templates: Templates
) -> None:
    """Migration 0027 dropped 0020's partial index of the derived ids, which no read needs:
    each derived relationship written was one insert more in it."""
    templates.sqlite_copy(tmp_path / "store.sqlite3", "schema")
    with sqlite3.connect(tmp_path / "store.sqlite3") as db:
        indexes = {
            row[0]
            for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'edges'"
                " AND sql IS NOT NULL"
            )
        }
    assert indexes == {"edges_outbound", "edges_inbound", "edges_kind_run"}
