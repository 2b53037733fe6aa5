"""Saved queries and who they are shared with (migration 0022)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graphsvc.store.db import Connection, Row
from graphsvc.store.dialect import in_list, list_param
from graphsvc.store.filters import EQUALITY, RANGE, Filter, FilterColumn, filter_conditions
from graphsvc.store.paging import SortKey, fetch_page, order_clause

SCOPES = ("owned", "shared", "public")  # and "all", any of them
SAVED_QUERY_FILTERS = {
    "id": FilterColumn("q.id", "int", RANGE),
    "user_id": FilterColumn("q.user_id", "uuid", EQUALITY),
    "name": FilterColumn("q.name", "text", (*EQUALITY, "~eq")),
    "query": FilterColumn("q.query", "text", EQUALITY),
    "description": FilterColumn("q.description", "text", (*EQUALITY, "~eq")),
    "created_at": FilterColumn("q.created_at", "time", RANGE),
    "updated_at": FilterColumn("q.updated_at", "time", RANGE),
}
SAVED_QUERY_SORT_COLUMNS = {
    name: f"q.{name}"
    for name in ("id", "user_id", "name", "query", "description", "created_at", "updated_at")
}
FIELDS = "q.id, q.user_id, q.name, q.query, q.description, q.public, q.created_at, q.updated_at"


@dataclass(frozen=True)
class SavedQueryRow:
    id: int
    user_id: str
    name: str
    query: str
    description: str
    public: bool
    created_at: datetime
    updated_at: datetime
    scope: str | None  # to the user it was read for: owned, shared, public; None: not seen


def saved_query_row(row: Row) -> SavedQueryRow:
    return SavedQueryRow(
        row[0], str(row[1]), row[2], row[3], row[4], bool(row[5]), row[6], row[7], row[8]
    )


def scope_of(user_param: str) -> str:
    """The scope of a row (aliased q) to the user of `user_param`, the first that holds; NULL
    where the user may not see it."""
    return f"""CASE WHEN q.user_id = {user_param} THEN 'owned'
        WHEN EXISTS (SELECT 1 FROM saved_query_shares s
            WHERE s.query_id = q.id AND s.user_id = {user_param}) THEN 'shared'
        WHEN q.public THEN 'public' END"""


def in_scopes(scopes: Sequence[str], user_param: str) -> str:
    """SQL testing that a row (q) is in one of the scopes for the user of `user_param`."""
    tests = {
        "owned": f"q.user_id = {user_param}",
        "shared": f"""EXISTS (SELECT 1 FROM saved_query_shares s
            WHERE s.query_id = q.id AND s.user_id = {user_param})""",
        "public": "q.public",
    }
    return "(" + " OR ".join(tests[s] for s in scopes) + ")"


async def list_saved_queries(
    conn: Connection,
    user_id: str,
    scopes: Sequence[str],
    filters: Sequence[Filter],
    sort: Sequence[SortKey],
    skip: int,
    limit: int,
) -> tuple[int, list[SavedQueryRow]]:
    """One page of the queries in the scopes (each its scope to the user), and their count."""
    args: list[Any] = [user_id]
    conditions = [
        in_scopes(scopes, "$1"),
        *filter_conditions(conn.dialect, filters, SAVED_QUERY_FILTERS, args),
    ]
    total, rows = await fetch_page(
        conn,
        f"""SELECT {FIELDS}, {scope_of("$1")}, count(*) OVER () FROM saved_queries q
        WHERE {" AND ".join(conditions)}
        ORDER BY {order_clause(sort, SAVED_QUERY_SORT_COLUMNS, "q.id")}""",
        args,
        skip,
        limit,
    )
    return total, [saved_query_row(r) for r in rows]


async def list_all_in_scopes(
    conn: Connection, user_id: str, scopes: Sequence[str]
) -> list[SavedQueryRow]:
    """Every query in the scopes, by name then id (an export)."""
    rows = await conn.fetch(
        f"""SELECT {FIELDS}, {scope_of("$1")} FROM saved_queries q
        WHERE {in_scopes(scopes, "$1")} ORDER BY q.name, q.id""",
        user_id,
    )
    return [saved_query_row(r) for r in rows]


async def find_saved_query(conn: Connection, query_id: int, user_id: str) -> SavedQueryRow | None:
    """The query, with its scope to the user (None: the user may not see it)."""
    row = await conn.fetchrow(
        f"SELECT {FIELDS}, {scope_of('$2')} FROM saved_queries q WHERE q.id = $1",
        query_id,
        user_id,
    )
    return None if row is None else saved_query_row(row)


async def list_own_names(conn: Connection, user_id: str) -> set[str]:
    rows = await conn.fetch("SELECT name FROM saved_queries WHERE user_id = $1", user_id)
    return {r[0] for r in rows}


async def name_taken(conn: Connection, user_id: str, name: str, other_than: int = 0) -> bool:
    """Whether another query of the user's (not `other_than`) has this name."""
    found = await conn.fetchval(
        "SELECT 1 FROM saved_queries WHERE user_id = $1 AND name = $2 AND id <> $3",
        user_id,
        name,
        other_than,
    )
    return found is not None


async def insert_saved_query(
    conn: Connection, user_id: str, name: str, query: str, description: str, now: datetime
) -> int:
    query_id = await conn.fetchval(
        """INSERT INTO saved_queries (user_id, name, query, description, public, created_at,
            updated_at)
        VALUES ($1, $2, $3, $4, false, $5, $5) RETURNING id""",
        user_id,
        name,
        query,
        description,
        now,
    )
    return int(query_id)


async def update_saved_query(
    conn: Connection, query_id: int, name: str, query: str, description: str, now: datetime
) -> None:
    await conn.execute(
        """UPDATE saved_queries SET name = $2, query = $3, description = $4, updated_at = $5
        WHERE id = $1""",
        query_id,
        name,
        query,
        description,
        now,
    )


async def delete_saved_query(conn: Connection, query_id: int) -> None:
    await conn.execute("DELETE FROM saved_query_shares WHERE query_id = $1", query_id)
    await conn.execute("DELETE FROM saved_queries WHERE id = $1", query_id)


async def set_public(conn: Connection, query_id: int, public: bool, now: datetime) -> None:
    await conn.execute(
        "UPDATE saved_queries SET public = $2, updated_at = $3 WHERE id = $1",
        query_id,
        public,
        now,
    )


async def list_shared_user_ids(conn: Connection, query_id: int) -> list[str]:
    rows = await conn.fetch(
        "SELECT user_id FROM saved_query_shares WHERE query_id = $1 ORDER BY user_id", query_id
    )
    return [str(r[0]) for r in rows]


async def add_shares(
    conn: Connection, query_id: int, user_ids: Sequence[str], now: datetime
) -> None:
    for user_id in user_ids:
        await conn.execute(
            """INSERT INTO saved_query_shares (query_id, user_id, created_at) VALUES ($1, $2, $3)
            ON CONFLICT (query_id, user_id) DO NOTHING""",
            query_id,
            user_id,
            now,
        )


async def remove_shares(conn: Connection, query_id: int, user_ids: Sequence[str]) -> None:
    await conn.execute(
        f"""DELETE FROM saved_query_shares WHERE query_id = $1
        AND {in_list(conn.dialect, "user_id", "$2", "uuid")}""",
        query_id,
        list_param(conn.dialect, user_ids),
    )


async def remove_all_shares(conn: Connection, query_id: int) -> None:
    await conn.execute("DELETE FROM saved_query_shares WHERE query_id = $1", query_id)


async def list_existing_users(conn: Connection, user_ids: Sequence[str]) -> set[str]:
    """Those of the ids that name a user not deleted."""
    rows = await conn.fetch(
        f"""SELECT id FROM users WHERE deleted_at IS NULL
        AND {in_list(conn.dialect, "id", "$1", "uuid")}""",
        list_param(conn.dialect, user_ids),
    )
    return {str(r[0]) for r in rows}
