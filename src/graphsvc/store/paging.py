"""What the list operations share: the page and time window asked for, the sort keys, one page
of rows with the total, and ORDER BY; and the reads of a whole table in chunks by id."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from graphsvc.store.db import (
    Connection,
    Row,
)


@dataclass(frozen=True)
class Page:
    skip: int
    limit: int


@dataclass
class Window:
    """An inclusive range of creation times.

    One asked without an end ends at the time of each answer (`ends_now`); with no start
    either, it starts `start_follows_by` before its end. Its answer is kept while no record
    can enter or leave it as it moves: the read notes when that first happens
    (`note_records`)."""

    start: datetime
    end: datetime
    ends_now: bool = False
    start_follows_by: timedelta | None = None
    # When, as the window moves, a record first enters or leaves it (NEVER: none can);
    # None: not noted, so its answer is not kept.
    records_change_at: datetime | None = None

    def note_records(self, first_inside: datetime | None, first_after: datetime | None) -> None:
        """Note, from the earliest record inside the window and the earliest after its end,
        when the records of a window that ends now change: the one after enters as the end
        reaches it, the one inside leaves as the start passes it (only a start that follows
        the end moves)."""
        moments = [] if first_after is None else [first_after]
        if first_inside is not None and self.start_follows_by is not None:
            moments.append(first_inside + self.start_follows_by + ONE_MICROSECOND)
        self.records_change_at = min(moments, default=NEVER)


NEVER = datetime.max.replace(tzinfo=UTC)
ONE_MICROSECOND = timedelta(microseconds=1)  # the store's times are to the microsecond


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


async def chunks_by_id(
    conn: Connection, query: str, size: int, *params: Any
) -> AsyncIterator[list[Row]]:
    """Every row `query` selects, in chunks of `size`, by its first column (an id): the query
    ends `WHERE <id> > $1 ORDER BY <id> LIMIT $2`, and its own parameters are $3 on."""
    last = 0
    while True:
        rows = await conn.fetch(query, last, size, *params)
        if not rows:
            return
        last = rows[-1][0]
        yield rows
