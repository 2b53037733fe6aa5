"""Migration 0017: nodes and edges keep their ingest run by number; what a store held before
keeps its runs, and a run after the upgrade gets the next number."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from alembic import command

from graphsvc.ingest.run import IngestResult, ingest_files
from graphsvc.store import graph
from graphsvc.store.db import Connection, run_in_transaction
from graphsvc.store.dialect import sync_id_sequence
from graphsvc.store.migrate import alembic_config, upgrade_schema
from tests.conftest import FIXTURES

V5_COMPUTERS = FIXTURES / "bloodhound-ce" / "fixtures" / "v5" / "ingest" / "computers.json"
OLDER, NEWER = "22222222-2222-4222-8222-222222222222", "11111111-1111-4111-8111-111111111111"
NEVER_RECORDED = "33333333-3333-4333-8333-333333333333"
UNRECORDED_RUN = "00000000-0000-0000-0000-000000000000"  # what a downgrade gives number 0


def run_sql(url: str, work: Any) -> Any:
    return asyncio.run(run_in_transaction(url, work))


async def seed_revision_0016(conn: Connection) -> None:
    """Two recorded runs (the newer one first in the table), their nodes and edges, a stub,
    and a node and an edge of a run that has no record."""
    now = datetime(2026, 11, 1, tzinfo=UTC)
    for run_id, at in ((NEWER, now), (OLDER, now - timedelta(days=1))):
        await conn.execute(
            """INSERT INTO ingest_runs (id, created_at, files, node_count, edge_count)
            VALUES ($1, $2, '[]', 1, 1)""",
            run_id,
            at,
        )
    collected: tuple[tuple[int, str | None], ...] = (
        (1, OLDER),
        (2, NEWER),
        (3, None),
        (4, NEVER_RECORDED),
    )
    for node_id, node_run in collected:
        await conn.execute(
            """INSERT INTO nodes (id, object_id, name, label, kinds, properties, run_id,
                environment_id, created_at, updated_at)
            VALUES ($1, $2, $2, 'User', '["User"]', '{}', $3, 'S-1-5-21-1-2-3', $4, $4)""",
            node_id,
            f"NODE-{node_id}",
            node_run,
            now,
        )
    await sync_id_sequence(conn, "nodes")
    for start, end, run_id in ((1, 2, NEWER), (2, 1, OLDER), (3, 1, NEVER_RECORDED)):
        await conn.execute(
            """INSERT INTO edges (start_id, end_id, kind_id, properties, run_id, environment_id,
                created_at, updated_at)
            VALUES ($1, $2, (SELECT id FROM kinds WHERE name = 'MemberOf'), '{}', $3,
                'S-1-5-21-1-2-3', $4, $4)""",
            start,
            end,
            run_id,
            now,
        )


def test_a_store_keeps_its_runs_through_the_upgrade_and_counts_on(database_url: str) -> None:
    config = alembic_config(database_url)
    command.downgrade(config, "0016")
    run_sql(database_url, seed_revision_0016)
    assert upgrade_schema(database_url)[0] == "0017"

    async def read(conn: Connection) -> tuple[Any, ...]:
        return (
            await conn.fetch("SELECT CAST(id AS text), number FROM ingest_runs ORDER BY number"),
            await conn.fetch("SELECT object_id, run_number FROM nodes ORDER BY id"),
            await conn.fetch("SELECT start_id, end_id, run_number FROM edges ORDER BY start_id"),
            await graph.count_run(conn, 1),
            await graph.count_run(conn, 2),
        )

    runs, nodes, edges, older, newer = run_sql(database_url, read)
    assert [tuple(r) for r in runs] == [(OLDER, 1), (NEWER, 2)]
    assert [tuple(r) for r in nodes] == [
        ("NODE-1", 1),
        ("NODE-2", 2),
        ("NODE-3", None),  # a stub stays one
        ("NODE-4", 0),  # collected by a run without a record: still collected
    ]
    assert [tuple(r) for r in edges] == [(1, 2, 2), (2, 1, 1), (3, 1, 0)]
    assert (older, newer) == ((1, 1), (1, 1))

    result: IngestResult = run_sql(database_url, lambda conn: ingest_files(conn, [V5_COMPUTERS]))

    async def read_run(conn: Connection) -> tuple[Any, tuple[int, int]]:
        number = await conn.fetchval(
            "SELECT number FROM ingest_runs WHERE CAST(id AS text) = $1", result.run_id
        )
        derived = await conn.fetchval("SELECT count(*) FROM edges WHERE derived")
        nodes, edges = await graph.count_run(conn, int(number))
        return number, (nodes, edges + derived)

    number, counted = run_sql(database_url, read_run)
    assert number == 3, "the next number after the stored runs'"
    # The run's edges: those it collected, and those its analysis left.
    assert counted == (result.nodes, result.edges) and result.edges > 0

    command.downgrade(config, "0016")

    async def read_downgraded(conn: Connection) -> list[Any]:
        return await conn.fetch(
            "SELECT object_id, CAST(run_id AS text) FROM nodes WHERE id <= 4 ORDER BY id"
        )

    assert [tuple(r) for r in run_sql(database_url, read_downgraded)] == [
        ("NODE-1", OLDER),
        ("NODE-2", NEWER),
        ("NODE-3", None),
        ("NODE-4", UNRECORDED_RUN),
    ]


def test_each_run_gets_a_number_of_its_own(database_url: str) -> None:
    """Runs one after the other count up from 1; collecting the same objects again moves
    them, and the edges it reports again, to the newer run."""
    first, second = (
        run_sql(database_url, lambda conn: ingest_files(conn, [V5_COMPUTERS])) for _ in range(2)
    )

    async def read(conn: Connection) -> tuple[Any, ...]:
        runs = await conn.fetch("SELECT CAST(id AS text), number FROM ingest_runs ORDER BY number")
        derived = await conn.fetchval("SELECT count(*) FROM edges WHERE derived")
        return runs, await graph.count_run(conn, 1), await graph.count_run(conn, 2), derived

    runs, in_first, in_second, derived = run_sql(database_url, read)
    assert [tuple(r) for r in runs] == [(first.run_id, 1), (second.run_id, 2)]
    assert in_first == (0, 0)
    # A run's edges: those it collected, and those its analysis left (derived: AdminTo...).
    assert derived > 0
    assert (second.nodes, second.edges) == (first.nodes, first.edges)
    assert in_second == (second.nodes, second.edges - derived)
