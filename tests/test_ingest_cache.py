"""An ingest run's SQLite page cache (GRAPHSVC_INGEST_CACHE_MB): the run has it, whether it
comes from `graphsvc ingest` or an upload job, and gives it back when it ends, landed or
failed; PostgreSQL's cache is its server's, and nothing is asked of it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from graphsvc.ingest import run
from graphsvc.ingest.records import IngestError
from graphsvc.store import graph
from graphsvc.store.db import Connection
from tests.conftest import Env
from tests.test_sharphound import SAMPLES
from tests.test_uploads import json_files, upload, wait_for_job

COMPUTERS = SAMPLES["v5 computers"]


async def cache_size(conn: Connection) -> int | None:
    """SQLite's `cache_size` of the connection (negative: KiB), None on PostgreSQL."""
    if conn.dialect != "sqlite":
        return None
    return int(await conn.fetchval("PRAGMA cache_size"))


def watch_cache(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """The cache size each ingest run has while it runs, in order."""
    seen: list[int | None] = []
    whole_run = run.ingest_run

    async def watched(conn: Connection, *args: object) -> run.IngestResult:
        seen.append(await cache_size(conn))
        return await whole_run(conn, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(run, "ingest_run", watched)
    return seen


def test_a_run_has_its_cache_and_gives_it_back_landed_or_failed(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = watch_cache(monkeypatch)
    broken = tmp_path / "broken.json"
    broken.write_text('{"meta": {"type": "computers"}, "data": [')

    async def work(conn: Connection) -> tuple[int | None, int | None, int | None]:
        before = await cache_size(conn)
        await run.ingest_files(conn, [COMPUTERS], cache_mb=48)
        after_landing = await cache_size(conn)
        with pytest.raises(IngestError, match=r"broken\.json"):
            await run.ingest_files(conn, [broken], cache_mb=48)
        return before, after_landing, await cache_size(conn)

    before, after_landing, after_failure = env.run_in_transaction(work)
    if env.url.startswith("sqlite"):
        assert seen == [-48 * 1024, -48 * 1024]
        assert before is not None and before != -48 * 1024
        assert after_landing == after_failure == before
    else:
        assert seen == [None, None] and before is None


def test_a_cache_of_zero_leaves_sqlite_s_own(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = watch_cache(monkeypatch)

    async def work(conn: Connection) -> int | None:
        await run.ingest_files(conn, [COMPUTERS], cache_mb=0)
        return await cache_size(conn)

    after = env.run_in_transaction(work)
    assert seen == [after]


def spy_on_page_cache(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The cache each `graph.page_cache` was asked for."""
    asked: list[int] = []
    page_cache = graph.page_cache

    def spied(conn: Connection, mebibytes: int) -> contextlib.AbstractAsyncContextManager[None]:
        asked.append(mebibytes)
        return page_cache(conn, mebibytes)

    monkeypatch.setattr(graph, "page_cache", spied)
    return asked


def test_the_cli_and_an_upload_job_take_the_setting(
    make_env: Callable[..., Env], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = spy_on_page_cache(monkeypatch)
    env = make_env(ingester=True, ingest_poll_seconds=0.05, ingest_cache_mb=40)
    env.create_admin()
    collector = env.user_with_token("collector", "Upload-Only")
    monkeypatch.setenv("GRAPHSVC_INGEST_CACHE_MB", "40")
    done = env.cli("ingest", str(COMPUTERS))
    assert done.exit_code == 0, done.output
    job = wait_for_job(env, collector, upload(env, collector, json_files(COMPUTERS.parent)))
    assert job["status"] == 2, job["status_message"]
    assert asked == [40, 40]
