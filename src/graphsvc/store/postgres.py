"""The PostgreSQL pool (asyncpg), and the data version followed by LISTEN/NOTIFY on a
connection of its own, polled in case a notification is lost."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import asyncpg

from graphsvc.store.data_version import (
    DATA_VERSION_CHANNEL,
    DATA_VERSION_POLL_SECONDS,
    MOVE_AND_NOTIFY_DATA_VERSION,
    READ_DATA_VERSION,
    data_version_step,
)
from graphsvc.store.db import (
    Connection,
    ConnectionOnDemand,
    Dialect,
    NoFreeConnection,
    Row,
    database_errors,
    describe_database_error,
)

LISTENER_NAME = "graphsvc data version"  # in pg_stat_activity, for an operator to find
# A poll that takes longer is a lost connection (a path that went silent without a reset
# would otherwise hold the last version until TCP gives up, minutes later).
VERSION_READ_TIMEOUT_SECONDS = 2.0
VERSION_POLL_ERRORS: tuple[type[BaseException], ...] = (*database_errors(), OSError, TimeoutError)


def log_version_failure(exc: BaseException) -> None:
    logging.getLogger("graphsvc").warning(
        "the store's data version could not be read (%s): answers are made from the store, "
        "none from memory, until it can",
        describe_database_error(exc),
    )


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
