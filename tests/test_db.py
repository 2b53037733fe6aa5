"""SQLite reads run on the event loop until they outgrow their budget; writes never do."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from graphsvc.store.sqlite import SQLiteConnection, SQLiteDatabase

# About two million rows: far beyond the inline budget, well under a second on a worker.
LONG_READ = """WITH RECURSIVE steps(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM steps
    WHERE n < 2000000) SELECT count(*), thread_name() FROM steps"""


def threads_of(database: SQLiteDatabase, sql: str, write: bool = False) -> tuple[int, str, str]:
    """What the statement returned, on which thread it finished, and the event loop's thread."""

    async def work() -> tuple[int, str, str]:
        await database.open()
        try:
            # A bare store, without the data version's table (migration 0016).
            block = database.transaction(changes_answers=False) if write else database.reading()
            async with block as conn:
                assert isinstance(conn, SQLiteConnection)
                conn.raw.create_function("thread_name", 0, lambda: threading.current_thread().name)
                count, thread = (await conn.fetch(sql))[0]
            return count, thread, threading.current_thread().name
        finally:
            await database.close()

    return asyncio.run(work())


def test_a_short_read_runs_on_the_event_loop(tmp_path: Path) -> None:
    count, thread, loop_thread = threads_of(
        SQLiteDatabase(tmp_path / "db.sqlite3", 2), "SELECT 7, thread_name()"
    )
    assert (count, thread) == (7, loop_thread)


def test_a_long_read_moves_to_a_worker_and_still_answers(tmp_path: Path) -> None:
    count, thread, loop_thread = threads_of(SQLiteDatabase(tmp_path / "db.sqlite3", 2), LONG_READ)
    assert count == 2000000
    assert thread != loop_thread
    assert thread.startswith("sqlite")


def test_writes_never_run_on_the_event_loop(tmp_path: Path) -> None:
    count, thread, loop_thread = threads_of(
        SQLiteDatabase(tmp_path / "db.sqlite3", 2), "SELECT 7, thread_name()", write=True
    )
    assert count == 7
    assert thread != loop_thread


def test_an_interrupt_other_than_the_budget_is_not_retried(tmp_path: Path) -> None:
    """A statement that fails by itself fails once, with SQLite's own error."""
    database = SQLiteDatabase(tmp_path / "db.sqlite3", 1)
    calls = [0]

    def failing() -> int:
        calls[0] += 1
        raise ValueError("boom")

    async def work() -> str:
        await database.open()
        try:
            async with database.reading() as conn:
                assert isinstance(conn, SQLiteConnection)
                conn.raw.create_function("failing", 0, failing)
                try:
                    await conn.fetch("SELECT failing()")
                except Exception as exc:
                    return type(exc).__name__
                return "no error"
        finally:
            await database.close()

    assert asyncio.run(work()) == "OperationalError"
    assert calls == [1]


def test_a_write_cancelled_at_its_begin_or_commit_leaves_no_lock_behind(tmp_path: Path) -> None:
    """Cancelled at every step of its first moments (BEGIN runs on a worker thread and may
    complete as the cancel lands), a write transaction never leaves SQLite's one write lock
    held: the next write gets it at once. Seen as 503s after a cancelled keep-alive write."""
    database = SQLiteDatabase(tmp_path / "store.sqlite3", pool_size=2)

    async def write() -> None:
        async with database.transaction(changes_answers=False) as conn:  # a bare store
            await conn.execute("CREATE TABLE IF NOT EXISTS t (n INTEGER)")
            await conn.execute("INSERT INTO t VALUES (1)")

    async def work() -> None:
        await database.open()
        try:
            for steps in range(12):  # the cancel lands after 0, 1, 2... turns of the loop
                cancelled = asyncio.create_task(write())
                for _ in range(steps):
                    await asyncio.sleep(0)
                cancelled.cancel()
                await asyncio.gather(cancelled, return_exceptions=True)
                async with asyncio.timeout(3):  # the busy timeout would be 10 s
                    await write()
        finally:
            await database.close()

    asyncio.run(work())
