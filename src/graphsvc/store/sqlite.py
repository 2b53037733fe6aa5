"""The SQLite pool: connections whose reads run on the event loop until they take too long,
writes on worker threads, and the data version followed through the WAL-index."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mmap
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

from graphsvc.store.data_version import (
    DATA_VERSION_POLL_SECONDS,
    MOVE_DATA_VERSION,
    READ_DATA_VERSION,
    data_version_step,
)
from graphsvc.store.db import Connection, ConnectionOnDemand, Dialect, NoFreeConnection, Row
from graphsvc.store.dialect import parse_sqlite_time, sqlite_args, sqlite_sql

# How long a statement waits for another connection's write lock (a second ingest waits this
# long for the first, then fails as locked).
SQLITE_BUSY_TIMEOUT_MS = 10_000
# A read runs on the event loop for at most this long before it is rerun on a worker thread.
INLINE_BUDGET_SECONDS = 0.005
INLINE_CHECK_INSTRUCTIONS = 2000

# The WAL-index header: two copies of 48 bytes at the start of the `-shm` file (SQLite's
# file format, "WAL-Index Format").
WAL_INDEX_HEADER_BYTES = 96


def create_private_file(path: Path) -> None:
    """Create a SQLite store's file (and its folder) readable by this user only, whatever the
    umask: it holds the graph and the password hashes. SQLite gives its -wal and -shm files
    the store file's mode."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def unicode_upper(value: str | int | float | bytes | None) -> str | int | float | bytes | None:
    return value.upper() if isinstance(value, str) else value


class InlineBudgetSpent(Exception):
    """A statement run on the event loop took longer than its budget."""


class SQLiteConnection:
    dialect: Dialect = "sqlite"

    def __init__(self, raw: sqlite3.Connection, executor: ThreadPoolExecutor, inline: bool) -> None:
        self.raw = raw
        self.executor = executor
        # Reads first run on the event loop: a hand-off to a worker thread costs more than
        # most of this API's statements. Writes may wait on the write lock, so they never do.
        self.inline = inline

    async def run(self, fn: Any, *args: Any) -> Any:
        """Run blocking SQLite work off the event loop; cancelling interrupts the statement."""
        future = asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            self.raw.interrupt()
            with contextlib.suppress(Exception):
                await future
            raise

    def _fetch(self, sql: str, args: Sequence[Any]) -> list[Row]:
        return self.raw.execute(sqlite_sql(sql), sqlite_args(args)).fetchall()

    def _fetch_inline(self, sql: str, args: Sequence[Any]) -> list[Row]:
        """Run a read on the event loop, abandoning it once it has taken INLINE_BUDGET_SECONDS
        (an autocommit read leaves nothing behind), so that no statement stalls the loop."""
        deadline = time.perf_counter() + INLINE_BUDGET_SECONDS
        spent = False

        def over_budget() -> bool:
            nonlocal spent
            spent = time.perf_counter() > deadline
            return spent

        self.raw.set_progress_handler(over_budget, INLINE_CHECK_INSTRUCTIONS)
        try:
            return self._fetch(sql, args)
        except sqlite3.OperationalError:
            if spent:
                raise InlineBudgetSpent from None
            raise
        finally:
            self.raw.set_progress_handler(None, 0)

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        if self.inline:
            with contextlib.suppress(InlineBudgetSpent):
                return self._fetch_inline(sql, args)
        rows: list[Row] = await self.run(self._fetch, sql, args)
        return rows

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        rows = await self.fetch(sql, *args)
        return rows[0] if rows else None

    async def fetchval(self, sql: str, *args: Any) -> Any:
        row = await self.fetchrow(sql, *args)
        return None if row is None else row[0]

    async def execute(self, sql: str, *args: Any) -> None:
        await self.fetch(sql, *args)

    def _executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.raw.executemany(sqlite_sql(sql), [sqlite_args(r) for r in rows])

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self.run(self._executemany, sql, rows)

    async def copy_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> None:
        values = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
        await self.executemany(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({values})", rows
        )


def roll_back(raw: sqlite3.Connection) -> None:
    """Roll back, if a transaction is still open: an interrupted write (a cancelled request
    or a stopped ingest) has SQLite roll the whole transaction back itself."""
    if raw.in_transaction:
        raw.execute("ROLLBACK")


class SQLiteDatabase:
    dialect: Dialect = "sqlite"

    def __init__(self, path: Path, pool_size: int, acquire_timeout: float | None = None) -> None:
        self.path = path
        self.pool_size = pool_size
        self.acquire_timeout = acquire_timeout
        self.idle: asyncio.Queue[sqlite3.Connection] | None = None
        self.executor: ThreadPoolExecutor | None = None
        self.version_reader: sqlite3.Connection | None = None  # see `data_version`
        self.wal_index: mmap.mmap | None = None
        self.wal_index_file: BinaryIO | None = None
        self.seen_header = b""  # the WAL-index header when `version` was read
        self.version: int | None = None
        self.read_again_at = 0.0  # time.monotonic() after which the row is read in any case

    def _connect(self) -> sqlite3.Connection:
        raw = sqlite3.connect(
            self.path,
            isolation_level=None,
            check_same_thread=False,
            detect_types=sqlite3.PARSE_DECLTYPES,
        )
        raw.execute("PRAGMA journal_mode=WAL")
        raw.execute("PRAGMA synchronous=NORMAL")
        raw.execute("PRAGMA foreign_keys=ON")
        # The list filters' `~eq` (store/filters.py): upper() as Python has it, past ASCII.
        raw.create_function("unicode_upper", 1, unicode_upper, deterministic=True)
        raw.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        return raw

    async def open(self) -> None:
        # Declared column types as alembic writes them on SQLite; registering is idempotent.
        sqlite3.register_converter("DATETIME", parse_sqlite_time)
        sqlite3.register_converter("BOOLEAN", lambda raw: raw != b"0")
        create_private_file(self.path)
        self.executor = ThreadPoolExecutor(self.pool_size, thread_name_prefix="sqlite")
        self.idle = asyncio.Queue()
        for _ in range(self.pool_size):
            self.idle.put_nowait(self._connect())

    def connections_in_use(self) -> int:
        return 0 if self.idle is None else self.pool_size - self.idle.qsize()

    async def close(self) -> None:
        if self.version_reader is not None:
            self.version_reader.close()
            self.version_reader = None
        if self.idle is not None:
            while not self.idle.empty():
                self.idle.get_nowait().close()
        # Last, once this process's connections are closed (see follow_data_version).
        if self.wal_index is not None:
            self.wal_index.close()
            self.wal_index = None
        if self.wal_index_file is not None:
            self.wal_index_file.close()
            self.wal_index_file = None
        if self.executor is not None:
            self.executor.shutdown(wait=True)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[sqlite3.Connection]:
        assert self.idle is not None, "database is not open"
        try:
            async with asyncio.timeout(self.acquire_timeout):
                raw = await self.idle.get()
        except TimeoutError:
            raise NoFreeConnection from None
        try:
            yield raw
        finally:
            self.idle.put_nowait(raw)

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[Connection]:
        assert self.executor is not None, "database is not open"
        async with self.connection() as raw:
            yield SQLiteConnection(raw, self.executor, inline=True)

    def reading_on_demand(self) -> contextlib.AbstractAsyncContextManager[Connection]:
        return ConnectionOnDemand(self.dialect, self.reading)

    @contextlib.asynccontextmanager
    async def transaction(self, changes_answers: bool = True) -> AsyncIterator[Connection]:
        assert self.executor is not None, "database is not open"
        async with self.connection() as raw:
            conn = SQLiteConnection(raw, self.executor, inline=False)
            # IMMEDIATE takes the write lock up front, so two writers wait instead of deadlocking.
            # BEGIN and COMMIT are inside the try: a cancel that lands as one of them completes
            # in its thread left the transaction open, the write lock held by an idle
            # connection of the pool, and every later write waited 10 s for a 503.
            try:
                await conn.execute("BEGIN IMMEDIATE")
                yield conn
                if changes_answers:
                    await conn.execute(MOVE_DATA_VERSION, data_version_step())
                await conn.execute("COMMIT")
            except BaseException:
                await asyncio.shield(conn.run(roll_back, raw))
                raise

    async def follow_data_version(self) -> None:
        raw = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        # Read on the event loop, so it never waits: a read of a WAL store waits only in rare
        # moments (another connection recovering the WAL), and then the version is unknown
        # for that request.
        raw.execute("PRAGMA busy_timeout=0")
        raw.execute(READ_DATA_VERSION).fetchone()  # the WAL-index exists once a read has run
        self.version_reader = raw
        try:
            # Kept open until `close`: closing a descriptor of the file drops every POSIX
            # lock this process holds on it, SQLite's own included, and another process
            # then takes the WAL-index for unused and rebuilds it under this one's feet.
            self.wal_index_file = open(f"{self.path}-shm", "rb")  # noqa: SIM115
            self.wal_index = mmap.mmap(
                self.wal_index_file.fileno(), WAL_INDEX_HEADER_BYTES, access=mmap.ACCESS_READ
            )
        except (OSError, ValueError) as exc:  # no WAL-index: the row is read at every call
            logging.getLogger("graphsvc").debug("no WAL-index to watch in %s: %s", self.path, exc)

    def data_version(self) -> int | None:
        """The version row, read again only when the WAL-index header has changed since the
        last read, or DATA_VERSION_POLL_SECONDS have passed.

        Every commit to a WAL store rewrites that header (its change counter, frame count and
        salts), in shared memory that every connection maps: comparing its 96 bytes takes
        0.15 us, where the statement takes 3.9 (it takes the WAL's read lock, two system
        calls; `PRAGMA data_version` costs as much), in a loop of each alone. The header is
        read before the row, so a commit between the two is seen at the next call. The read
        each second bounds what a change the header did not show (a file replaced under the
        server) can cost."""
        if self.version_reader is None:
            return None
        header = b"" if self.wal_index is None else self.wal_index[:WAL_INDEX_HEADER_BYTES]
        now = time.monotonic()
        if header and header == self.seen_header and now < self.read_again_at:
            return self.version
        try:
            row = self.version_reader.execute(READ_DATA_VERSION).fetchone()
        except sqlite3.Error:
            self.seen_header = b""
            return None
        self.version = None if row is None else int(row[0])
        self.seen_header, self.read_again_at = header, now + DATA_VERSION_POLL_SECONDS
        return self.version
