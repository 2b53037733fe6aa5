"""Parsing and checking of path and query parameters; each failure is a 400 naming the parameter."""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from graphsvc.errors import bad_request
from graphsvc.web import Query

INT32_MAX = 2**31 - 1
DIGITS = re.compile(r"[0-9]+")
SIGNED_DIGITS = re.compile(r"-?[0-9]+")
# RFC 3339 date-time. A space where the offset's '+' stood is accepted: an unencoded '+'
# in a query string arrives decoded as a space.
RFC3339 = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+\- ]\d{2}:\d{2})")
DEFAULT_WINDOW = timedelta(days=30)


def single(query: Query, name: str) -> str | None:
    values = query.get(name, [])
    if len(values) > 1:
        raise bad_request(f"query parameter {name} may be given only once", name)
    return values[0] if values else None


def parse_int32(raw: str, name: str, what: str = "query parameter") -> int:
    if not SIGNED_DIGITS.fullmatch(raw) or abs(int(raw)) > INT32_MAX:
        raise bad_request(f"{what} {name} must be a 32-bit integer, got {raw!r}", name)
    return int(raw)


def optional_int32(query: Query, name: str) -> int | None:
    raw = single(query, name)
    return None if raw is None else parse_int32(raw, name)


def required_int32(query: Query, name: str) -> int:
    raw = single(query, name)
    if raw is None or raw == "":
        raise bad_request(f"missing required query parameter: {name}", name)
    return parse_int32(raw, name)


def non_negative(query: Query, name: str, default: int, maximum: int) -> int:
    raw = single(query, name)
    if raw is None:
        return default
    if not DIGITS.fullmatch(raw) or int(raw) > INT32_MAX:
        raise bad_request(
            f"query parameter {name} must be an integer from 0 to {INT32_MAX}, got {raw!r}", name
        )
    value = int(raw)
    if value > maximum:
        raise bad_request(f"query parameter {name} must be at most {maximum}, got {value}", name)
    return value


@dataclass(frozen=True)
class Page:
    skip: int
    limit: int


def parse_page(query: Query, default_limit: int, max_limit: int) -> Page:
    return Page(
        skip=non_negative(query, "skip", 0, INT32_MAX),
        limit=non_negative(query, "limit", default_limit, max_limit),
    )


def parse_sort(
    query: Query, columns: Collection[str], default: Sequence[tuple[str, bool]]
) -> list[tuple[str, bool]]:
    """`sort_by` values as (column, descending); a leading '-' means descending."""
    values = query.get("sort_by", [])
    if not values:
        return list(default)
    sort = []
    for value in values:
        column = value.removeprefix("-")
        if column not in columns:
            allowed = ", ".join(sorted(columns))
            shown = repr(value) if value else "an empty value"
            raise bad_request(f"sort_by: cannot sort by {shown}; sortable: {allowed}", "sort_by")
        sort.append((column, value.startswith("-")))
    return sort


def rfc3339(raw: str) -> datetime | None:
    """The instant an RFC 3339 date-time names, in UTC; None when `raw` is not one."""
    match = RFC3339.fullmatch(raw)
    if match is None:
        return None
    day, clock, fraction, offset = match.groups()
    micros = (fraction or ".0")[1:7].ljust(6, "0")
    offset = "+00:00" if offset in ("Z", "z") else offset.replace(" ", "+")
    try:
        return datetime.fromisoformat(f"{day}T{clock}.{micros}{offset}").astimezone(UTC)
    except ValueError:
        return None


def parse_time(raw: str, name: str) -> datetime:
    value = rfc3339(raw)
    if value is None:
        raise bad_request(
            f"query parameter {name} must be an RFC 3339 date-time, got {raw!r}", name
        )
    return value


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime


def parse_window(query: Query, now: datetime) -> Window:
    raw_start, raw_end = single(query, "start"), single(query, "end")
    end = now if raw_end is None else parse_time(raw_end, "end")
    start = end - DEFAULT_WINDOW if raw_start is None else parse_time(raw_start, "start")
    if start > end:
        raise bad_request("query parameter start must not be after end", "start")
    return Window(start, end)


UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


def parse_uuid(raw: str, name: str) -> str:
    """The canonical lower-case form of a UUID written 8-4-4-4-12."""
    if not UUID_TEXT.fullmatch(raw):
        raise bad_request(f"path parameter {name} must be a UUID, got {raw!r}", name)
    return str(uuid.UUID(raw))
