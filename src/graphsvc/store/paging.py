"""What the list operations share: the page and time window asked for, the sort keys, one page
of rows with the total, and ORDER BY."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from graphsvc.store.db import (
    Connection,
    Row,
)


@dataclass(frozen=True)
class Page:
    skip: int
    limit: int


@dataclass(frozen=True)
class Window:
    """An inclusive range of creation times."""

    start: datetime
    end: datetime


class SortKey(NamedTuple):
    """One `sort_by` value: a column name as the API spells it, and the direction."""

    column: str
    descending: bool


async def fetch_page(
    conn: Connection, sql: str, args: Sequence[Any], skip: int, limit: int
) -> tuple[int, list[Row]]:
    """Rows of one page plus the total count; `sql` selects `count(*) OVER ()` last."""
    n = len(args)
    rows = await conn.fetch(f"{sql} LIMIT ${n + 1} OFFSET ${n + 2}", *args, limit, skip)
    if rows:
        return int(rows[0][-1]), rows
    if skip == 0 and limit > 0:
        return 0, []  # a first page with room and no rows: there are none to count
    total = await conn.fetchval(f"SELECT count(*) FROM ({sql}) AS page", *args)
    return int(total or 0), []


def order_clause(sort: Sequence[SortKey], columns: dict[str, str], tie: str) -> str:
    """ORDER BY from sort keys already checked against `columns` (API name: SQL column)."""
    parts = [f"{columns[name]} {'DESC' if desc else 'ASC'}" for name, desc in sort]
    return ", ".join([*parts, tie])
