"""Connections to SQLite or PostgreSQL behind one small interface.

Every dialect difference lives in this module. SQL elsewhere is written once, PostgreSQL
style (`$1` placeholders); SQLite gets it rewritten to `?1`. Both dialects hand back the
same Python types: datetimes with UTC tzinfo, bools, UUIDs as strings.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import mmap
import os
import re
import secrets
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO, Literal, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import msgspec

Row = Sequence[Any]
T = TypeVar("T")
# What either driver raises when the database fails or cannot be reached.
DATABASE_ERRORS: tuple[type[BaseException], ...] = (
    sqlite3.Error,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    ConnectionError,
)
Dialect = Literal["sqlite", "postgresql"]


class Connection(Protocol):
    dialect: Dialect

    async def fetch(self, sql: str, *args: Any) -> list[Row]: ...
    async def fetchrow(self, sql: str, *args: Any) -> Row | None: ...
    async def fetchval(self, sql: str, *args: Any) -> Any: ...
    async def execute(self, sql: str, *args: Any) -> None: ...
    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...
    async def copy_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> None:
        """Append rows in bulk (PostgreSQL's COPY; a plain multi-row insert on SQLite)."""
        ...


class Database(Protocol):
    dialect: Dialect

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    def connections_in_use(self) -> int: ...
    def reading(self) -> contextlib.AbstractAsyncContextManager[Connection]:
        """A connection in autocommit: each statement reads its own consistent snapshot."""
        ...

    def reading_on_demand(self) -> contextlib.AbstractAsyncContextManager[Connection]:
        """As `reading`, but the connection is taken from the pool at the block's first
        statement: a block that needs none (an answer from memory) takes none."""
        ...

    def transaction(
        self, changes_answers: bool = True
    ) -> contextlib.AbstractAsyncContextManager[Connection]:
        """A connection in a write transaction, committed when the block ends without error.
        Unless told it `changes_answers` not (a token's last access, a job kept alive), the
        commit moves the store's data version (see `data_version`)."""
        ...

    async def follow_data_version(self) -> None:
        """Start following the store's data version, for `data_version`."""
        ...

    def data_version(self) -> int | None:
        """The store's data version as this process knows it: a value no earlier answer of
        a changed store was made under. SQLite reads it again when its WAL-index shows a
        commit; PostgreSQL's is pushed by NOTIFY; both at least each
        DATA_VERSION_POLL_SECONDS. None: not known right now."""
        ...


def create_database(url: str, pool_size: int = 8, acquire_timeout: float | None = None) -> Database:
    """A pool of `pool_size` connections; taking one waits `acquire_timeout` seconds at most
    (None: as long as it takes), then raises NoFreeConnection."""
    if url.startswith("sqlite:///"):
        return SQLiteDatabase(Path(url.removeprefix("sqlite:///")), pool_size, acquire_timeout)
    if url.startswith(("postgresql://", "postgres://", "postgresql+asyncpg://")):
        return PostgresDatabase(asyncpg_dsn(url), pool_size, acquire_timeout)
    raise ValueError(
        f"unsupported database URL {redact_url(url)!r}: use sqlite:/// or postgresql://"
    )


async def run_in_transaction(
    url: str, work: Callable[[Connection], Awaitable[T]], changes_answers: bool = True
) -> T:
    """Open a one-connection database, run `work` in one write transaction, and close."""
    db = create_database(url, pool_size=1)
    await db.open()
    try:
        async with db.transaction(changes_answers) as conn:
            return await work(conn)
    finally:
        await db.close()


# The store's data version (migration 0016): one row, moved forward by a random step by
# every write transaction that can change an answer, as its last statement. Forward, so that
# a process can tell a late or raced value from a newer one (it keeps the larger); by a random
# step, so that a store restored from a backup does not count again through the values that
# clients hold in their ETags.
DATA_VERSION_CHANNEL = "graphsvc_data_version"  # PostgreSQL NOTIFY channel of the new value
# The WAL-index header: two copies of 48 bytes at the start of the `-shm` file (SQLite's
# file format, "WAL-Index Format").
WAL_INDEX_HEADER_BYTES = 96
LISTENER_NAME = "graphsvc data version"  # in pg_stat_activity, for an operator to find
DATA_VERSION_POLL_SECONDS = 1.0  # how stale a replica's version may be when NOTIFY is lost
# A poll that takes longer is a lost connection (a path that went silent without a reset
# would otherwise hold the last version until TCP gives up, minutes later).
VERSION_READ_TIMEOUT_SECONDS = 2.0
READ_DATA_VERSION = "SELECT version FROM data_version WHERE id = 1"
MOVE_DATA_VERSION = "UPDATE data_version SET version = version + $1 WHERE id = 1"
MOVE_AND_NOTIFY_DATA_VERSION = """WITH moved AS (
    UPDATE data_version SET version = version + $1 WHERE id = 1 RETURNING version)
SELECT version, pg_notify($2, version::text) FROM moved"""


VERSION_POLL_ERRORS: tuple[type[BaseException], ...] = (*DATABASE_ERRORS, OSError, TimeoutError)


def data_version_step() -> int:
    return 1 + secrets.randbits(31)


def log_version_failure(exc: BaseException) -> None:
    logging.getLogger("graphsvc").warning(
        "the store's data version could not be read (%s): answers are made from the store, "
        "none from memory, until it can",
        describe_database_error(exc),
    )


class ConnectionOnDemand:
    """A Connection that takes one from `connect` (a Database's `reading`) at its first
    statement and gives it back when its block ends.

    A class of its own rather than an asynccontextmanager generator: entering and leaving
    the generator was 2% of an answer from memory, which takes no connection at all."""

    def __init__(
        self, dialect: Dialect, connect: Callable[[], contextlib.AbstractAsyncContextManager[Any]]
    ) -> None:
        self.dialect = dialect
        self.connect = connect
        self.held: contextlib.AbstractAsyncContextManager[Any] | None = None
        self.conn: Any = None

    async def take(self) -> Any:
        if self.conn is None:
            held = self.connect()
            self.conn = await held.__aenter__()
            self.held = held
        return self.conn

    async def __aenter__(self) -> ConnectionOnDemand:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        if self.held is not None:
            held, self.held, self.conn = self.held, None, None
            await held.__aexit__(kind, exc, tb)

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        rows: list[Row] = await (await self.take()).fetch(sql, *args)
        return rows

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        row: Row | None = await (await self.take()).fetchrow(sql, *args)
        return row

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return await (await self.take()).fetchval(sql, *args)

    async def execute(self, sql: str, *args: Any) -> None:
        await (await self.take()).execute(sql, *args)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await (await self.take()).executemany(sql, rows)

    async def copy_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> None:
        await (await self.take()).copy_rows(table, columns, rows)


async def ping(conn: Connection) -> None:
    await conn.fetchval("SELECT 1")


def is_store_busy(exc: BaseException) -> bool:
    """Whether a write gave up waiting for SQLite's one write lock (an ingest holds it)."""
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def describe_database_error(exc: BaseException) -> str:
    """One line for a user: what went wrong with the database, and what to do."""
    if is_store_busy(exc):
        return (
            f"the SQLite store stayed locked by another write (an ingest running?) for "
            f"{SQLITE_BUSY_TIMEOUT_MS // 1000} s; run this again once it has finished"
        )
    return f"database error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


class NoFreeConnection(Exception):
    """Every connection of the pool stayed in use for the acquire timeout."""


class MissingDatabase(Exception):
    """The PostgreSQL database does not exist and this role may not create it."""


async def create_missing_database(url: str) -> bool:
    """Create the PostgreSQL database a URL names if it does not exist yet, when this role
    may (CREATEDB); True when it was created. SQLite files are created on first use."""
    if not url.startswith(("postgresql://", "postgres://")):
        return False
    dsn = asyncpg_dsn(url)
    try:
        conn = await asyncpg.connect(dsn, timeout=10)
    except asyncpg.InvalidCatalogNameError:
        pass
    else:
        await conn.close()
        return False
    parts = urlsplit(dsn)
    name = parts.path.lstrip("/")
    maintenance = urlunsplit(parts._replace(path="/postgres"))
    conn = await asyncpg.connect(maintenance, timeout=10)
    try:
        await conn.execute(f'CREATE DATABASE "{name.replace(chr(34), chr(34) * 2)}"')
    except asyncpg.InsufficientPrivilegeError:
        user = parts.username or "(your user)"
        host = f"-h {parts.hostname} " if parts.hostname else ""
        port = f"-p {parts.port} " if parts.port else ""
        raise MissingDatabase(
            f"database {name!r} does not exist and the role {user!r} may not create it; "
            f"create it as a role that may: createdb {host}{port}-U postgres -O {user} {name}"
        ) from None
    finally:
        await conn.close()
    return True


def asyncpg_dsn(url: str) -> str:
    return re.sub(r"^postgres(ql)?(\+asyncpg)?://", "postgresql://", url)


def sqlalchemy_url(url: str) -> str:
    """The URL alembic connects with: SQLAlchemy's pysqlite or asyncpg driver."""
    if url.startswith("sqlite:///"):
        return url
    return re.sub(r"^postgres(ql)?(\+asyncpg)?://", "postgresql+asyncpg://", url)


def redact_url(url: str) -> str:
    return re.sub(r"://([^:/@]*):[^@]*@", r"://\1:***@", url)


def in_list(dialect: Dialect, column: str, param: str, pg_type: str = "text") -> str:
    """SQL testing that a column (text, or of `pg_type`) is one of a list passed as one
    parameter, so that one prepared statement serves lists of every length; pass the list
    through `list_param`."""
    if dialect == "sqlite":
        return f"{column} IN (SELECT value FROM json_each({param}))"
    return f"{column} = ANY({param}::{pg_type}[])"


def list_param(dialect: Dialect, values: Iterable[str] | Iterable[int]) -> object:
    return encode_json(list(values)) if dialect == "sqlite" else list(values)


def encode_json(value: Any) -> str:
    """JSON text for a column or a statement's parameter. msgspec writes the 1 GB benchmark's
    batches several times faster than the json module (its 490,000 edge rows of the 96 MB
    collection: 0.66 s of json.dumps in a 9 s ingest, 3.5% of it)."""
    return msgspec.json.encode(value).decode()


def rows_source(
    dialect: Dialect, pg_types: Sequence[str], rows: Sequence[Sequence[Any]], first: int
) -> tuple[str, list[Any]]:
    """A FROM clause yielding `rows` as columns c1, c2..., and its parameters from `$first` on:
    one array per column on PostgreSQL (unnest), one JSON array of rows on SQLite (json_each).

    One statement then writes a whole batch, where executemany binds each row from Python:
    1.2 million edge rows took 8.9 µs a row through executemany on SQLite, 4.5 µs as one
    statement per 12,000 (encoding included); 60,000 took 28 µs a row on PostgreSQL, 21 µs
    as one statement per 5,000.
    """
    count = len(pg_types)
    if dialect == "postgresql":
        arrays = ", ".join(f"${first + i}::{t}[]" for i, t in enumerate(pg_types))
        columns = ", ".join(f"c{i + 1}" for i in range(count))
        return f"unnest({arrays}) AS t({columns})", [list(c) for c in zip(*rows, strict=True)]
    columns = ", ".join(f"json_extract(value, '$[{i}]') AS c{i + 1}" for i in range(count))
    return f"(SELECT {columns} FROM json_each(${first})) AS t", [encode_json(rows)]


async def sync_id_sequence(conn: Connection, table: str) -> None:
    """After rows were added with explicit ids: PostgreSQL's sequence must move past them
    (SQLite's rowid needs nothing)."""
    if conn.dialect == "postgresql":
        await conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
        )


async def next_number(conn: Connection, sequence: str, table: str, column: str) -> int:
    """A number no other transaction gets for `table.column`: the sequence's next value on
    PostgreSQL, where transactions writing at once would otherwise share one; one more than
    the column's largest on SQLite, whose write transactions hold the only write lock from
    their BEGIN IMMEDIATE (the rows must never be deleted, or a number could come back)."""
    if conn.dialect == "postgresql":
        return int(await conn.fetchval(f"SELECT nextval('{sequence}')"))
    return int(await conn.fetchval(f"SELECT coalesce(max({column}), 0) + 1 FROM {table}"))


async def refresh_planner_statistics(conn: Connection, tables: Sequence[str]) -> None:
    """After a large load: PostgreSQL plans from row estimates, and stale ones (autovacuum has
    not run yet) took the DCOM list at a million nodes from milliseconds to 16 s. SQLite
    plans this API's queries well from its own heuristics, and measured no better with
    statistics, so it keeps none."""
    if conn.dialect == "postgresql":
        await conn.execute(f"ANALYZE {', '.join(tables)}")


def like_pattern(text: str) -> str:
    """`text` with LIKE's wildcards escaped (the queries say ESCAPE '\\')."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def json_property_equals(dialect: Dialect, column: str, key_param: str, value_param: str) -> str:
    """SQL testing that a top-level property of a JSON text column equals a value, by JSON type
    (7 matches 7, not "7"); pass the value through `json_value_param`."""
    if dialect == "sqlite":
        return f"json_extract({column}, '$.\"' || {key_param} || '\"') = {value_param}"
    return f"(({column})::jsonb -> {key_param}) = {value_param}::jsonb"


def json_value_param(dialect: Dialect, value: str | float | bool) -> object:
    # SQLite's json_extract yields native values (true as 1); PostgreSQL compares jsonb.
    return value if dialect == "sqlite" else json.dumps(value)


def json_number(dialect: Dialect, column: str, key: str) -> str:
    """SQL for a top-level property of a JSON text column if it is a number, else NULL.
    `key` is a constant of ours, written into the SQL."""
    if dialect == "sqlite":
        return (
            f"(CASE WHEN json_type({column}, '$.{key}') IN ('integer', 'real') "
            f"THEN json_extract({column}, '$.{key}') END)"
        )
    return (
        f"(CASE WHEN jsonb_typeof(({column})::jsonb -> '{key}') = 'number' "
        f"THEN (({column})::jsonb ->> '{key}')::float8 END)"
    )


def json_text(dialect: Dialect, column: str, key: str) -> str:
    """SQL for a top-level property of a JSON text column as text (NULL if missing)."""
    if dialect == "sqlite":
        return f"json_extract({column}, '$.{key}')"
    return f"(({column})::jsonb ->> '{key}')"


# --- SQLite ----------------------------------------------------------------------------

# How long a statement waits for another connection's write lock (a second ingest waits this
# long for the first, then fails as locked).
SQLITE_BUSY_TIMEOUT_MS = 10_000
# A read runs on the event loop for at most this long before it is rerun on a worker thread.
INLINE_BUDGET_SECONDS = 0.005
INLINE_CHECK_INSTRUCTIONS = 2000


def sqlite_time(value: datetime) -> str:
    """Fixed-width UTC text, so that SQLite compares and sorts times as strings correctly
    (strftime's %Y would write year 999 in three digits)."""
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def create_private_file(path: Path) -> None:
    """Create a SQLite store's file (and its folder) readable by this user only, whatever the
    umask: it holds the graph and the password hashes. SQLite gives its -wal and -shm files
    the store file's mode."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


@lru_cache(maxsize=4096)
def parse_sqlite_time(raw: bytes) -> datetime:
    """A stored time (written by `sqlite_time`, ending in Z); the rows of one answer share
    most of their times (created_at and updated_at, a run's batch), so each text is parsed
    once. datetime is immutable, so a shared instance is safe."""
    value = datetime.fromisoformat(raw.decode())
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@lru_cache(maxsize=1024)
def sqlite_sql(sql: str) -> str:
    return re.sub(r"\$(\d+)", r"?\1", sql)


def sqlite_args(args: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(sqlite_time(a) if isinstance(a, datetime) else a for a in args)


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


# --- PostgreSQL ------------------------------------------------------------------------


class PostgresConnection:
    dialect: Dialect = "postgresql"

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        rows: list[Row] = await self.raw.fetch(sql, *args)
        return rows

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        row: Row | None = await self.raw.fetchrow(sql, *args)
        return row

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return await self.raw.fetchval(sql, *args)

    async def execute(self, sql: str, *args: Any) -> None:
        await self.raw.execute(sql, *args)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self.raw.executemany(sql, rows)

    async def copy_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> None:
        await self.raw.copy_records_to_table(table, records=rows, columns=list(columns))


async def init_postgres_connection(raw: Any) -> None:
    # UUIDs travel as text so both dialects hand the store the same str values.
    await raw.set_type_codec("uuid", encoder=str, decoder=str, schema="pg_catalog", format="text")


async def keep_session(raw: Any) -> None:
    """Pooled connections never change session state (no SET, LISTEN or advisory locks), so
    the pool's default reset, a round trip on every release, is skipped; asyncpg still rolls
    back a transaction left open."""


class PostgresDatabase:
    dialect: Dialect = "postgresql"

    def __init__(self, dsn: str, pool_size: int, acquire_timeout: float | None = None) -> None:
        self.dsn = dsn
        self.pool_size = pool_size
        self.acquire_timeout = acquire_timeout
        self.pool: Any = None
        self.version: int | None = None  # see `data_version`
        self.lower_polled: int | None = None  # a poll's value below `version`, once
        self.listener: Any = None  # the connection LISTENing on DATA_VERSION_CHANNEL
        self.polling: asyncio.Task[None] | None = None

    async def open(self) -> None:
        self.pool = await asyncpg.create_pool(
            self.dsn,
            min_size=1,
            max_size=self.pool_size,
            init=init_postgres_connection,
            reset=keep_session,
        )

    def connections_in_use(self) -> int:
        if self.pool is None:
            return 0
        return int(self.pool.get_size() - self.pool.get_idle_size())

    async def close(self) -> None:
        if self.polling is not None:
            self.polling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.polling
            self.polling = None
        await self.drop_listener()
        if self.pool is not None:
            await self.pool.close()

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        assert self.pool is not None, "database is not open"
        try:
            raw = await self.pool.acquire(timeout=self.acquire_timeout)
        except TimeoutError:
            raise NoFreeConnection from None
        try:
            yield raw
        finally:
            await self.pool.release(raw)

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[Connection]:
        async with self.connection() as raw:
            yield PostgresConnection(raw)

    def reading_on_demand(self) -> contextlib.AbstractAsyncContextManager[Connection]:
        return ConnectionOnDemand(self.dialect, self.reading)

    @contextlib.asynccontextmanager
    async def transaction(self, changes_answers: bool = True) -> AsyncIterator[Connection]:
        version = None
        async with self.connection() as raw, raw.transaction():
            yield PostgresConnection(raw)
            if changes_answers:
                # Moved as the transaction's last statement: the row stays locked, holding
                # back a concurrent writer's commit, only while this one commits.
                version = await raw.fetchval(
                    MOVE_AND_NOTIFY_DATA_VERSION, data_version_step(), DATA_VERSION_CHANNEL
                )
        if version is not None:  # this process knows it at once; others when notified
            self.note_version(version)

    async def follow_data_version(self) -> None:
        await self.listen()
        self.polling = asyncio.create_task(self.poll_data_version())

    def data_version(self) -> int | None:
        return self.version

    async def listen(self) -> None:
        """A connection of its own (LISTEN is session state, which pooled connections never
        keep), then the version as it is now: no change is missed between the two."""
        listener = await asyncpg.connect(
            self.dsn, timeout=10, server_settings={"application_name": LISTENER_NAME}
        )
        try:
            await listener.add_listener(DATA_VERSION_CHANNEL, self.note_notified_version)
            # A notification may arrive while this reads: the larger of the two counts.
            self.note_version(
                await listener.fetchval(READ_DATA_VERSION, timeout=VERSION_READ_TIMEOUT_SECONDS)
            )
            self.lower_polled = None
        except BaseException:
            with contextlib.suppress(*VERSION_POLL_ERRORS):
                await listener.close(timeout=2)
            raise
        self.listener = listener

    def note_notified_version(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        self.note_version(int(payload))

    def note_version(self, version: int) -> None:
        if self.version is None or version > self.version:
            self.version = version

    def note_polled_version(self, version: int) -> None:
        """A poll read that began before a commit this process noted can return the value
        before it: a lower value is believed only when the next poll returns it again (the
        store was restored from a backup)."""
        if self.version is not None and version < self.version and version != self.lower_polled:
            self.lower_polled = version
            return
        self.lower_polled = None
        self.version = version

    async def poll_data_version(self) -> None:
        """Read the version each DATA_VERSION_POLL_SECONDS, which also finds a listening
        connection that was lost (then reconnected); while there is none, the version is
        unknown, and nothing is answered from memory."""
        while True:
            await asyncio.sleep(DATA_VERSION_POLL_SECONDS)
            try:
                if self.listener is None or self.listener.is_closed():
                    self.version = None  # notifications were lost: unknown until listening
                    await self.drop_listener()
                    await self.listen()
                else:
                    self.note_polled_version(
                        await self.listener.fetchval(
                            READ_DATA_VERSION, timeout=VERSION_READ_TIMEOUT_SECONDS
                        )
                    )
            except VERSION_POLL_ERRORS as exc:
                self.version = None
                await self.drop_listener()
                log_version_failure(exc)

    async def drop_listener(self) -> None:
        listener, self.listener = self.listener, None
        if listener is not None:
            with contextlib.suppress(*VERSION_POLL_ERRORS):
                await listener.close(timeout=2)
