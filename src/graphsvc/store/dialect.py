"""The SQL that differs between SQLite and PostgreSQL, and the values each hands back or
takes differently (times, JSON, lists): the store's modules build their statements from
these, so each statement is written once for both."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from functools import cache, lru_cache
from typing import Any

import msgspec

from graphsvc.store.db import Connection, Dialect


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
    A column with one value in every row (a batch's environment, its collection time) is
    bound once instead.

    One statement then writes a whole batch, where executemany binds each row from Python:
    1.2 million edge rows took 8.9 µs a row through executemany on SQLite, 4.5 µs as one
    statement per 12,000 (encoding included); 60,000 took 28 µs a row on PostgreSQL, 21 µs
    as one statement per 5,000. SQLite (3.40) parses a row's JSON again for each column it
    extracts: binding the constant columns once took the 1 GB collection's ingest (no
    analysis) from 87.5 and 85.9 s to 85.9 and 82.6 (alternated), its edge statements
    from 46.1 to 39.7 s.
    """
    count = len(pg_types)
    # Columns compared and gathered in C (zip, tuple.count) rather than by a generator over
    # every row for each column: a million edge rows (200 batches) 0.46 s to 0.37 s on
    # SQLite, their JSON encoding included.
    by_column: list[tuple[Any, ...]] = list(zip(*rows, strict=True)) if rows else [()] * count
    constant = [
        bool(column)
        and isinstance(column[0], str | int | float | datetime | None)
        and column.count(column[0]) == len(column)
        for column in by_column
    ]
    varying = [i for i in range(count) if not constant[i]]
    params: list[Any] = []
    if dialect == "postgresql":
        arrays = ", ".join(f"${first + n}::{pg_types[i]}[]" for n, i in enumerate(varying))
        params = [list(by_column[i]) for i in varying]
        source = f"unnest({arrays}) AS t({', '.join(f'v{i + 1}' for i in varying)})"
    else:
        extracts = ", ".join(
            f"json_extract(value, '$[{n}]') AS v{i + 1}" for n, i in enumerate(varying)
        )
        source = f"(SELECT {extracts} FROM json_each(${first})) AS t"
        params = [encode_json(list(zip(*(by_column[i] for i in varying), strict=True)))]
    if not varying:  # every row the same: one is enough
        source = "(SELECT 1) AS t"
        params = []
    columns = []
    for i in range(count):
        if constant[i]:
            params.append(rows[0][i])
            cast = f"::{pg_types[i]}" if dialect == "postgresql" else ""
            columns.append(f"${first + len(params) - 1}{cast} AS c{i + 1}")
        else:
            columns.append(f"v{i + 1} AS c{i + 1}")
    return f"(SELECT {', '.join(columns)} FROM {source}) AS rows_source", params


async def execute_counted(conn: Connection, sql: str, *args: Any) -> int:
    """Run an INSERT, UPDATE or DELETE; how many rows it changed."""
    if conn.dialect == "postgresql":
        counted = f"WITH done AS ({sql} RETURNING 1) SELECT count(*) FROM done"
        return int(await conn.fetchval(counted, *args))
    await conn.execute(sql, *args)
    return int(await conn.fetchval("SELECT changes()"))


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


def row_lock(dialect: Dialect, clause: str) -> str:
    """A row-locking clause (`FOR UPDATE`...) to end a SELECT with on PostgreSQL; nothing on
    SQLite, whose write transaction holds the whole store from its BEGIN IMMEDIATE."""
    return f" {clause}" if dialect == "postgresql" else ""


def text_aggregate(dialect: Dialect, expression: str) -> str:
    """SQL joining a text column's values with commas (an aggregate)."""
    if dialect == "sqlite":
        return f"group_concat({expression}, ',')"
    return f"string_agg({expression}, ',')"


def like_pattern(text: str) -> str:
    """`text` with LIKE's wildcards escaped (the queries say ESCAPE '\\')."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def json_property_equals(dialect: Dialect, column: str, key_param: str, value_param: str) -> str:
    """SQL testing that a top-level property of a JSON text column equals a value, by JSON type
    (7 matches 7, not "7"); pass the value through `json_value_param`."""
    if dialect == "sqlite":
        return f"json_extract({column}, '$.\"' || {key_param} || '\"') = {value_param}"
    return f"(({column})::jsonb -> {key_param}) = {value_param}::jsonb"


def json_member(dialect: Dialect, column: str, key_param: str) -> str:
    """SQL for a top-level property of a JSON text column as JSON text (NULL where absent).
    The key may not hold a double quote (SQLite's path quotes it with them)."""
    if dialect == "sqlite":
        return f"({column} -> ('$.\"' || {key_param} || '\"'))"
    return f"((({column})::jsonb -> {key_param})::text)"


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


def sqlite_time(value: datetime) -> str:
    """Fixed-width UTC text, so that SQLite compares and sorts times as strings correctly
    (strftime's %Y would write year 999 in three digits)."""
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def time_values(dialect: Dialect) -> Callable[[datetime], datetime | str]:
    """Times as `rows_source`'s values (SQLite's rows are JSON, so its text), for one batch:
    each distinct time converted once, since a batch's rows share its documents' few times
    (a node's conversion each was 1 s of the 1 GB collection's ingest)."""
    if dialect == "sqlite":
        return cache(sqlite_time)
    return lambda value: value


@lru_cache(maxsize=4096)
def parse_sqlite_time(raw: bytes) -> datetime:
    """A stored time (written by `sqlite_time`, ending in Z); the rows of one answer share
    most of their times (created_at and updated_at, a run's batch), so each text is parsed
    once. datetime is immutable, so a shared instance is safe."""
    value = datetime.fromisoformat(raw.decode())
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def computed_time(value: datetime | str | None) -> datetime | None:
    """A time a statement computed (an aggregate of a time column, such as min()): SQLite
    hands it back as its stored text, which no declared type converts."""
    if isinstance(value, str):
        return parse_sqlite_time(value.encode())
    return value


@lru_cache(maxsize=1024)
def sqlite_sql(sql: str) -> str:
    return re.sub(r"\$(\d+)", r"?\1", sql)


def sqlite_args(args: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(sqlite_time(a) if isinstance(a, datetime) else a for a in args)
