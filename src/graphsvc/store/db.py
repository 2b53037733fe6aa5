"""Connections to SQLite or PostgreSQL behind one small interface: what the rest of graphsvc
uses of a store. SQL elsewhere is written once, PostgreSQL style (`$1` placeholders), and
what differs between the dialects lives in `dialect` and in the two pools, `sqlite` and
`postgres`. Both dialects hand back the same Python types: datetimes with UTC tzinfo, bools,
UUIDs as strings.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

Row = Sequence[Any]
T = TypeVar("T")
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
    # Imported here: each pool's module builds on this one, and only the store's own (the
    # PostgreSQL pool's imports asyncpg, see database_errors).
    if url.startswith("sqlite:///"):
        from graphsvc.store.sqlite import SQLiteDatabase

        return SQLiteDatabase(Path(url.removeprefix("sqlite:///")), pool_size, acquire_timeout)
    if url.startswith(("postgresql://", "postgres://", "postgresql+asyncpg://")):
        from graphsvc.store.postgres import PostgresDatabase

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


def is_store_full(exc: BaseException) -> bool:
    """Whether a write found SQLite's store, or its temporary files, on a full disk."""
    return (
        isinstance(exc, sqlite3.OperationalError)
        and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
    )


def describe_database_error(exc: BaseException) -> str:
    """One line for a user: what went wrong with the database, and what to do."""
    # Imported here, as in create_database: the pool's module builds on this one.
    from graphsvc.store.sqlite import SQLITE_BUSY_TIMEOUT_MS

    if is_store_busy(exc):
        return (
            f"the SQLite store stayed locked by another write (an ingest running?) for "
            f"{SQLITE_BUSY_TIMEOUT_MS // 1000} s; run this again once it has finished"
        )
    return f"database error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def database_errors() -> tuple[type[BaseException], ...]:
    """What either driver raises when the database fails or cannot be reached. asyncpg's
    classes only once asyncpg is imported, by a PostgreSQL store: before that none of them
    can be raised, and importing asyncpg for its classes alone cost every SQLite command
    50 to 65 ms of CPU (python -X importtime)."""
    asyncpg = sys.modules.get("asyncpg")
    if asyncpg is None:
        return (sqlite3.Error, ConnectionError)
    return (sqlite3.Error, asyncpg.PostgresError, asyncpg.InterfaceError, ConnectionError)


class NoFreeConnection(Exception):
    """Every connection of the pool stayed in use for the acquire timeout."""


class MissingDatabase(Exception):
    """The PostgreSQL database does not exist and this role may not create it."""


async def create_missing_database(url: str) -> bool:
    """Create the PostgreSQL database a URL names if it does not exist yet, when this role
    may (CREATEDB); True when it was created. SQLite files are created on first use."""
    if not url.startswith(("postgresql://", "postgres://")):
        return False
    import asyncpg

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
    """`url` with its password, and any `password=` parameter, as ***: the user's part ends
    at the last @ before the path, so a password may hold @ and / (an unencoded one)."""
    scheme, separator, rest = url.partition(":")
    if not separator:
        return url
    authority_end = len(rest)
    for mark in ("?", "#"):
        found = rest.find(mark)
        if found != -1:
            authority_end = min(authority_end, found)
    head, tail = rest[:authority_end], rest[authority_end:]
    user, at, host = head.rpartition("@")
    if at:
        name, colon, _ = user.partition(":")
        head = f"{name}{colon}***@{host}" if colon else f"{user}@{host}"
    tail = re.sub(r"(?i)(password=)[^&#]*", r"\1***", tail)
    return f"{scheme}:{head}{tail}"
