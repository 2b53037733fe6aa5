"""Path and query parameters: parsing and checking (each failure is a 400 naming the
parameter), and the parameter kinds the operations table declares, each of which parses
its value and documents itself for the OpenAPI document."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from graphsvc.accounts.permissions import CredentialCache
from graphsvc.api.web import Query, Request
from graphsvc.crypto import KeyBox
from graphsvc.cypher.service import CypherEngine
from graphsvc.errors import bad_request
from graphsvc.graph.paths import PathIndex
from graphsvc.settings import Settings
from graphsvc.store.filters import OPERATORS, Filter, FilterColumn
from graphsvc.store.paging import Page, SortKey, Window

INT32_MAX = 2**31 - 1
# Bounded, so that int() never meets the thousands of digits it refuses (or spends time on).
DIGITS = re.compile(r"[0-9]{1,10}")
SIGNED_DIGITS = re.compile(r"-?[0-9]{1,10}")
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


def parse_page(query: Query, default_limit: int, max_limit: int) -> Page:
    return Page(
        skip=non_negative(query, "skip", 0, INT32_MAX),
        limit=non_negative(query, "limit", default_limit, max_limit),
    )


def parse_sort(query: Query, columns: Collection[str], default: Sequence[SortKey]) -> list[SortKey]:
    """`sort_by` values as (column, descending); a leading '-' means descending."""
    values = query.get("sort_by", [])
    if not values:
        return list(default)
    sort = []
    seen = set()
    for value in values:
        column = value.removeprefix("-")
        if column not in columns:
            allowed = ", ".join(sorted(columns))
            shown = repr(value) if value else "an empty value"
            raise bad_request(f"sort_by: cannot sort by {shown}; sortable: {allowed}", "sort_by")
        if column in seen:  # a second key on a column changes nothing; thousands broke SQLite
            raise bad_request(f"sort_by: {column!r} is named more than once", "sort_by")
        seen.add(column)
        sort.append(SortKey(column, value.startswith("-")))
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
    except (ValueError, OverflowError):  # no such day, or out of range once in UTC
        return None


def rfc3339_offset(raw: str) -> timedelta | None:
    """The UTC offset an RFC 3339 date-time is written in; None when `raw` is not one."""
    match = RFC3339.fullmatch(raw)
    if match is None:
        return None
    offset = match.group(4)
    if offset in ("Z", "z"):
        return timedelta(0)
    sign = -1 if offset[0] == "-" else 1
    return sign * timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6]))


def parse_time(raw: str, name: str) -> datetime:
    value = rfc3339(raw)
    if value is None:
        raise bad_request(
            f"query parameter {name} must be an RFC 3339 date-time, got {raw!r}", name
        )
    return value


def parse_window(query: Query, now: datetime) -> Window:
    raw_start, raw_end = single(query, "start"), single(query, "end")
    end = now if raw_end is None else parse_time(raw_end, "end")
    if raw_start is not None:
        start = parse_time(raw_start, "start")
    elif end - datetime.min.replace(tzinfo=UTC) >= DEFAULT_WINDOW:
        start = end - DEFAULT_WINDOW
    else:
        raise bad_request("query parameter end must be at least 30 days after year 1", "end")
    if start > end:
        raise bad_request("query parameter start must not be after end", "start")
    follows_by = DEFAULT_WINDOW if raw_start is None and raw_end is None else None
    return Window(start, end, ends_now=raw_end is None, start_follows_by=follows_by)


UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


def parse_uuid(raw: str, name: str, what: str = "path parameter") -> str:
    """The canonical lower-case form of a UUID written 8-4-4-4-12."""
    if not UUID_TEXT.fullmatch(raw):
        raise bad_request(f"{what} {name} must be a UUID, got {raw!r}", name)
    return str(uuid.UUID(raw))


# --- parameter kinds of the operations table ------------------------------------------------

INT32_SCHEMA = {"type": "integer", "format": "int32"}
UUID_SCHEMA = {"type": "string", "format": "uuid"}
NON_NEGATIVE_SCHEMA = {"type": "integer", "minimum": 0, "maximum": INT32_MAX}
DATE_TIME_SCHEMA = {"type": "string", "format": "date-time"}
Document = dict[str, Any]


def path_document(name: str, schema: Document, description: str) -> Document:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": schema,
    }


def query_document(
    name: str, schema: Document, description: str, required: bool = False, repeated: bool = False
) -> Document:
    document: Document = {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": {"type": "array", "items": schema} if repeated else schema,
    }
    if repeated:
        document["explode"] = True
    return document


class Services(Protocol):
    """What parameters are read with besides the request: the app's settings, keys and
    authenticator."""

    @property
    def settings(self) -> Settings: ...
    @property
    def keys(self) -> KeyBox: ...
    @property
    def auth(self) -> CredentialCache: ...
    @property
    def paths(self) -> PathIndex: ...
    @property
    def cypher(self) -> CypherEngine: ...


class Parameter(Protocol):
    """One input of an operation: the handler's keyword it fills (None: only checked), how
    it is read from the request, and its entries in the OpenAPI document."""

    @property
    def argument(self) -> str | None: ...
    def parse(self, request: Request, app: Services) -> Any: ...
    def document(self) -> list[Document]: ...


def parse_path_int32(raw: str, name: str) -> int:
    return parse_int32(raw, name, "path parameter")


def parse_text(raw: str, name: str) -> str:
    """Any text but a NUL byte, which PostgreSQL cannot store or compare."""
    if "\x00" in raw:
        raise bad_request(f"path parameter {name} must not contain a NUL byte", name)
    return raw


@dataclass(frozen=True)
class PathParameter:
    name: str
    argument: str
    description: str
    schema: Document
    convert: Callable[[str, str], Any]  # (the raw segment, the name) to the value, or a 400

    def parse(self, request: Request, app: Services) -> Any:
        return self.convert(request.path_params[self.name], self.name)

    def document(self) -> list[Document]:
        return [path_document(self.name, self.schema, self.description)]


@dataclass(frozen=True)
class QueryInt32:
    name: str
    argument: str
    description: str
    required: bool = False

    def parse(self, request: Request, app: Services) -> int | None:
        if self.required:
            return required_int32(request.query, self.name)
        return optional_int32(request.query, self.name)

    def document(self) -> list[Document]:
        return [query_document(self.name, INT32_SCHEMA, self.description, self.required)]


@dataclass(frozen=True)
class QueryChoice:
    """A query parameter with a fixed set of values, some of which are named but refused."""

    name: str
    supported: tuple[str, ...]
    refused: tuple[str, ...]
    description: str
    argument: str | None = None

    def parse(self, request: Request, app: Services) -> str | None:
        value = single(request.query, self.name)
        if value in self.refused:
            only = " or ".join(f"{self.name}={v}" for v in self.supported)
            raise bad_request(f"{self.name}={value} is not supported: only {only} is", self.name)
        if value is not None and value not in self.supported:
            allowed = " or ".join(repr(v) for v in self.supported)
            raise bad_request(f"{self.name} must be {allowed}, got {value!r}", self.name)
        return value

    def document(self) -> list[Document]:
        schema = {"type": "string", "enum": [*self.supported, *self.refused]}
        return [query_document(self.name, schema, self.description)]


@dataclass(frozen=True)
class QueryFlag:
    """A query parameter that is `true` or `false` (any case)."""

    name: str
    argument: str | None
    default: bool
    description: str

    def parse(self, request: Request, app: Services) -> bool:
        value = single(request.query, self.name)
        if value is None:
            return self.default
        if value.lower() not in ("true", "false"):
            raise bad_request(f"{self.name} must be true or false, got {value!r}", self.name)
        return value.lower() == "true"

    def document(self) -> list[Document]:
        return [query_document(self.name, {"type": "boolean"}, self.description)]


@dataclass(frozen=True)
class Paging:
    """`skip` and `limit`, as one Page; `limit` at most the max_limit setting, or `cap`."""

    default_limit: int
    argument: str = "page"
    cap: int | None = None

    def parse(self, request: Request, app: Services) -> Page:
        most = app.settings.max_limit if self.cap is None else min(self.cap, app.settings.max_limit)
        return parse_page(request.query, self.default_limit, most)

    def document(self) -> list[Document]:
        return [
            query_document("skip", NON_NEGATIVE_SCHEMA, "Items to skip; default 0"),
            query_document(
                "limit",
                NON_NEGATIVE_SCHEMA,
                f"Most items returned; default {self.default_limit}, at most the max",
            ),
        ]


@dataclass(frozen=True)
class OffsetPaging:
    """The audit log's paging as the reference reads it: `offset` (or `skip`) and `limit`
    (1000 by default, at most the max_limit setting)."""

    argument: str = "page"

    def parse(self, request: Request, app: Services) -> Page:
        if "offset" in request.query and "skip" in request.query:
            raise bad_request("give offset or skip, not both", "offset")
        name = "skip" if "skip" in request.query else "offset"
        return Page(
            skip=non_negative(request.query, name, 0, INT32_MAX),
            limit=non_negative(request.query, "limit", 1000, app.settings.max_limit),
        )

    def document(self) -> list[Document]:
        return [
            query_document("offset", NON_NEGATIVE_SCHEMA, "Items to skip; default 0"),
            query_document("skip", NON_NEGATIVE_SCHEMA, "The same as offset"),
            query_document(
                "limit", NON_NEGATIVE_SCHEMA, "Most items returned; default 1000, at most the max"
            ),
        ]


@dataclass(frozen=True)
class BeforeAfter:
    """The audit log's window as the reference reads it: `after` to `before`, inclusive;
    `before` now by default, `after` a year before `before`."""

    argument: str = "window"

    def parse(self, request: Request, app: Services) -> Window:
        raw_before, raw_after = single(request.query, "before"), single(request.query, "after")
        before = datetime.now(UTC) if raw_before is None else parse_time(raw_before, "before")
        if raw_after is not None:
            return Window(parse_time(raw_after, "after"), before)
        try:
            return Window(before - timedelta(days=365), before)
        except OverflowError:  # a year before the first year
            raise bad_request(
                "query parameter before must be at least a year after 0001-01-01 when after "
                "is not given (after defaults to a year before it)",
                "before",
            ) from None

    def document(self) -> list[Document]:
        return [
            query_document("before", DATE_TIME_SCHEMA, "Inclusive end; default now"),
            query_document("after", DATE_TIME_SCHEMA, "Inclusive start; default before - 365 days"),
        ]


@dataclass(frozen=True)
class TimeWindow:
    """`start` and `end` of the creation times asked for, as one Window."""

    argument: str = "window"

    def parse(self, request: Request, app: Services) -> Window:
        window = parse_window(request.query, datetime.now(UTC))
        if window.ends_now:  # the answer's `end` is the time it is sent
            request.window_ending_now = window
        return window

    def document(self) -> list[Document]:
        return [
            query_document(
                "start",
                DATE_TIME_SCHEMA,
                "Inclusive start of the created_at range; default end - 30 days",
            ),
            query_document(
                "end", DATE_TIME_SCHEMA, "Inclusive end of the created_at range; default now"
            ),
        ]


@dataclass(frozen=True)
class Sorting:
    """Repeatable `sort_by` over the named columns."""

    columns: tuple[str, ...]
    default: tuple[SortKey, ...]
    argument: str = "sort"

    def parse(self, request: Request, app: Services) -> list[SortKey]:
        return parse_sort(request.query, self.columns, self.default)

    def document(self) -> list[Document]:
        default = ", ".join(("-" if k.descending else "") + k.column for k in self.default)
        description = (
            "Repeatable; '-' prefix sorts descending. "
            f"Columns: {', '.join(self.columns)}. Default {default}."
        )
        return [query_document("sort_by", {"type": "string"}, description, repeated=True)]


# Each filter is a statement variable: 999 of them passed SQLite's limit (a 500 before).
MAX_FILTERS = 100
FILTER = re.compile(r"(~eq|eq|neq|gte|gt|lte|lt):(.*)", re.DOTALL)
OPERATOR_PREFIX = re.compile(r"[~\w]+:")


def query_names_of(parameters: Sequence[Parameter]) -> frozenset[str]:
    """The query parameters an operation takes: those its parameters document."""
    return frozenset(
        str(doc["name"]) for p in parameters for doc in p.document() if doc["in"] == "query"
    )


def refuse_nul_in_query(query: Query) -> None:
    """A 400 naming the first query parameter whose name or value holds a NUL character,
    which no store keeps or compares in text (PostgreSQL fails the statement)."""
    for name, values in query.items():
        if "\x00" in name or any("\x00" in value for value in values):
            raise bad_request(f"query parameter {name!r} must not contain a NUL character", name)


def refuse_undeclared_query(query: Query, names: frozenset[str]) -> None:
    """A 400 naming the first query parameter the operation does not take (where a lax
    server would ignore it, and the caller believe its filter applied)."""
    for name in query:
        if name not in names:
            takes = ", ".join(sorted(names)) if names else "no query parameters"
            raise bad_request(
                f"unknown query parameter {name!r}: this operation takes {takes}", name
            )


@dataclass(frozen=True)
class Filters:
    """The reference's list filters, `column=op:value` for the columns named (a bare value
    means `eq:`), repeatable and ANDed. Every other query parameter the operation takes is
    named in `others`: any parameter besides is a 400 naming the filterable columns, where
    the reference ignores it."""

    columns: dict[str, FilterColumn]
    others: tuple[str, ...] = ("skip", "limit", "sort_by")
    argument: str = "filters"

    def parse(self, request: Request, app: Services) -> list[Filter]:
        filters = []
        for name, values in request.query.items():
            if name in self.others:
                continue
            column = self.columns.get(name)
            if column is None:
                raise bad_request(
                    f"the column {name!r} cannot be filtered; filterable: "
                    f"{', '.join(sorted(self.columns))}",
                    name,
                )
            filters += [parse_filter(name, column, raw) for raw in values]
            if len(filters) > MAX_FILTERS:
                raise bad_request(
                    f"{name}: at most {MAX_FILTERS} filters in one request (they are ANDed: "
                    "a few narrower ones say the same)",
                    name,
                )
        return filters

    def document(self) -> list[Document]:
        return [
            query_document(
                name,
                {"type": "string"},
                f"Filter, repeatable: op:value with op one of {', '.join(column.operators)}"
                + (" (eq:null, neq:null too)" if column.nullable else "")
                + f"; a bare value means eq. Values: {FILTER_VALUES[column.kind]}.",
                repeated=True,
            )
            for name, column in self.columns.items()
        ]


FILTER_VALUES = {
    "text": "text",
    "uuid": "a UUID",
    "int": "an integer",
    "time": "an RFC 3339 date-time",
}


def parse_filter(name: str, column: FilterColumn, raw: str) -> Filter:
    match = FILTER.fullmatch(raw)
    if match is None and OPERATOR_PREFIX.match(raw):
        raise bad_request(
            f"filter {name}={raw!r}: unknown operator {raw.split(':', 1)[0]!r}; operators: "
            f"{', '.join(OPERATORS)}",
            name,
        )
    operator, text = match.groups() if match else ("eq", raw)
    if operator not in column.operators:
        raise bad_request(
            f"filter {name}: the operator {operator!r} is not supported for this column; "
            f"operators: {', '.join(column.operators)}",
            name,
        )
    if text == "null" and column.nullable and operator in ("eq", "neq"):
        return Filter(name, operator, None)
    return Filter(name, operator, parse_filter_value(name, column, text))


def parse_filter_value(name: str, column: FilterColumn, text: str) -> Any:
    if column.kind == "uuid":
        return parse_uuid(text, name, "filter")
    if column.kind == "time":
        value = rfc3339(text)
        if value is None:
            raise bad_request(f"filter {name} must be an RFC 3339 date-time, got {text!r}", name)
        return value
    if column.kind == "int":
        bound = 2 ** (column.bits - 1)
        if not re.fullmatch(r"-?\d{1,19}", text) or not -bound <= int(text) < bound:
            raise bad_request(
                f"filter {name} must be an integer from {-bound} to {bound - 1}, got {text!r}",
                name,
            )
        return int(text)
    return text  # a NUL was refused with the query (refuse_nul_in_query)


@dataclass(frozen=True)
class BaseUrl:
    """Not a parameter the client sends: the URL this service is reached at."""

    argument: str = "base_url"

    def parse(self, request: Request, app: Services) -> str:
        return app.settings.public_url or request.base_url()

    def document(self) -> list[Document]:
        return []


@dataclass(frozen=True)
class ThePathIndex:
    """Not a parameter the client sends: the process's shortest-path index."""

    argument: str = "index"

    def parse(self, request: Request, app: Services) -> PathIndex:
        return app.paths

    def document(self) -> list[Document]:
        return []


@dataclass(frozen=True)
class TheCypherEngine:
    """Not a parameter the client sends: what the process runs Cypher queries on."""

    argument: str = "engine"

    def parse(self, request: Request, app: Services) -> CypherEngine:
        return app.cypher

    def document(self) -> list[Document]:
        return []


@dataclass(frozen=True)
class TheCaller:
    """Not sent by the client: the authenticated user the request acts for."""

    argument: str = "caller"

    def parse(self, request: Request, app: Services) -> Any:
        return request.caller

    def document(self) -> list[Document]:
        return []


@dataclass(frozen=True)
class TokenKeys:
    """Not sent by the client: the key that seals API token keys at rest."""

    argument: str = "keys"

    def parse(self, request: Request, app: Services) -> KeyBox:
        return app.keys

    def document(self) -> list[Document]:
        return []


@dataclass(frozen=True)
class TokenCache:
    """Not sent by the client: this process's cache of token records, which a change that
    revokes or narrows a token drops entries of, so the process refuses it at once."""

    argument: str = "cache"

    def parse(self, request: Request, app: Services) -> CredentialCache:
        return app.auth

    def document(self) -> list[Document]:
        return []


@dataclass(frozen=True)
class QueryText:
    name: str
    argument: str
    description: str
    required: bool = False

    def parse(self, request: Request, app: Services) -> str | None:
        value = single(request.query, self.name)
        if self.required and not value:
            raise bad_request(f"missing required query parameter: {self.name}", self.name)
        return value

    def document(self) -> list[Document]:
        return [query_document(self.name, {"type": "string"}, self.description, self.required)]


@dataclass(frozen=True)
class QueryTexts:
    """A repeatable text parameter: every value given, in order (none: an empty list)."""

    name: str
    argument: str
    description: str

    def parse(self, request: Request, app: Services) -> list[str]:
        values = request.query.get(self.name, [])
        if len(values) > MAX_FILTERS:
            raise bad_request(f"{self.name}: at most {MAX_FILTERS} values", self.name)
        return [v for v in values if v]

    def document(self) -> list[Document]:
        return [query_document(self.name, {"type": "string"}, self.description, repeated=True)]


@dataclass(frozen=True)
class QueryUUID:
    name: str
    argument: str
    description: str

    def parse(self, request: Request, app: Services) -> str | None:
        raw = single(request.query, self.name)
        return None if raw is None else parse_uuid(raw, self.name, "query parameter")

    def document(self) -> list[Document]:
        return [query_document(self.name, UUID_SCHEMA, self.description)]
