"""The ceiling: a bare ASGI app answering the benchmarked requests with graphsvc's own SQL.

No framework, no authentication, no rate limit, no parameter checks, no error body, no
transaction and no thread hand-off: SQLite runs inline on one connection, PostgreSQL on a
pooled asyncpg connection. What is left is the SQL (graphsvc's own store functions) and the
JSON encoding every server of this API must do, on the same uvicorn. graphsvc's figures are
reported as a ratio to this app's in the same run.

    python bench/ceiling.py --port 8101 --database-url sqlite:///path.db
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

import msgspec
import uvicorn

from graphsvc import wire
from graphsvc.graph.entities import DCOM_USERS
from graphsvc.store import clients, data_quality, entities, saml
from graphsvc.store.db import Connection, create_database
from graphsvc.store.dialect import sqlite_args, sqlite_sql
from graphsvc.store.paging import SortKey
from graphsvc.store.postgres import PostgresConnection, PostgresDatabase
from graphsvc.store.sqlite import SQLiteDatabase

encode = msgspec.json.Encoder().encode
NEWEST_FIRST = [SortKey("created_at", True)]
BY_NAME = [SortKey("name", False), SortKey("objectid", False)]
MONTH = timedelta(days=30)


async def answer(conn: Connection, path: str, query: dict[str, list[str]]) -> Any:
    """The answer, honouring skip, limit, start and end as given (and checking nothing)."""
    parts = path.strip("/").split("/")
    now = datetime.now(UTC)
    skip = int(query.get("skip", ["0"])[0])
    limit = int(query.get("limit", ["1000"])[0])
    start = datetime.fromisoformat(query["start"][0]) if "start" in query else now - MONTH
    end = datetime.fromisoformat(query["end"][0]) if "end" in query else now
    if parts[2] == "data-quality-stats-aggregations":
        kind = int(query["schema_environment_kind_id"][0])
        extension = int(query["schema_extension_id"][0]) if "schema_extension_id" in query else None
        found = await data_quality.list_aggregations(
            conn, kind, extension, start, end, NEWEST_FIRST, skip, limit
        )
        count, rows = found or (0, [])
        return wire.PagedAggregations(count, skip, limit, start, end, rows)
    if parts[2] == "azure-tenants":
        count, stats = await data_quality.list_stats_records(
            conn, data_quality.TENANT_STATS, parts[3], start, end, NEWEST_FIRST, skip, limit
        )
        return wire.PagedTenantStats(count, skip, limit, start, end, stats)
    if parts[2] == "saml":
        row = await saml.find_saml_provider(conn, int(parts[4]))
        return {"data": row.__dict__ if row else None}
    if parts[2] == "clients":
        return wire.ClientResponse(await clients.find_client(conn, parts[3]))  # type: ignore[arg-type]
    computer = await entities.find_walk_start(conn, parts[3], "Computer", DCOM_USERS.walk)
    computer = computer or entities.WalkStart(0, {})
    count, entries = await entities.list_reached(
        conn, computer, DCOM_USERS.walk, BY_NAME, skip, int(query.get("limit", ["10"])[0])
    )
    return wire.PagedNodeList(count, skip, limit, [entry for _, entry in entries])


class InlineSQLite:
    """The store's Connection, run directly on one sqlite3 connection (blocking, no hops)."""

    dialect = "sqlite"

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        return list(self.raw.execute(sqlite_sql(sql), sqlite_args(args)).fetchall())

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        rows = await self.fetch(sql, *args)
        return rows[0] if rows else None

    async def fetchval(self, sql: str, *args: Any) -> Any:
        row = await self.fetchrow(sql, *args)
        return None if row is None else row[0]


def create_ceiling(database_url: str) -> Any:
    db = create_database(database_url, pool_size=8)
    inline: list[InlineSQLite] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await db.open()  # also registers the SQLite type converters
                    if isinstance(db, SQLiteDatabase):
                        assert db.idle is not None
                        inline.append(InlineSQLite(db.idle.get_nowait()))
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await db.close()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        query = parse_qs(scope["query_string"].decode())
        if inline:
            body = encode(await answer(inline[0], scope["path"], query))  # type: ignore[arg-type]
        else:
            assert isinstance(db, PostgresDatabase)
            async with db.pool.acquire() as raw:
                body = encode(await answer(PostgresConnection(raw), scope["path"], query))
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database-url", required=True)
    args = parser.parse_args()
    uvicorn.run(
        create_ceiling(args.database_url),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
