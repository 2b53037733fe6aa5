"""The few HTTP pieces graphsvc needs on top of ASGI: requests, JSON responses, routes.

A framework would add a request object, middleware layers and exception plumbing to every
call; at this API's size they cost more than the work of a request, so the app speaks ASGI
directly and this module holds what it needs.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any, Protocol
from urllib.parse import parse_qs, unquote

import msgspec

from graphsvc import wire
from graphsvc.errors import ApiError, bad_request
from graphsvc.store.paging import Window

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Query = dict[str, list[str]]

encode = msgspec.json.Encoder().encode


def new_request_id() -> str:
    """A random (version 4) UUID naming a request in its answer and its log line. It names,
    it guards nothing, so it comes from `random`, not the system's entropy: str(uuid4())
    took 2.0 us and a getrandom call, this 0.7 us."""
    digits = f"{random.getrandbits(128) & ~UUID4_FIXED_BITS | UUID4_BITS:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


# The version (4) and variant (10) bits of a random UUID, and where they sit.
UUID4_FIXED_BITS = 0xF000 << 64 | 0xC000 << 48
UUID4_BITS = 0x4000 << 64 | 0x8000 << 48


class Request:
    """One HTTP request: method, path, headers (lower-case names), path and query parameters."""

    def __init__(
        self,
        scope: Scope,
        receive: Receive,
        path_params: dict[str, str],
        max_body: int,
        body_timeout: float,
        min_rate: int,
    ) -> None:
        self.scope = scope
        self.max_body = max_body
        self.body_timeout = body_timeout
        self.min_rate = min_rate  # bytes a second a body must average past its first pause
        self.receive = receive
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        self.path_params = path_params
        self.headers: dict[str, str] = {}
        for name, value in scope["headers"]:
            # The first of repeated headers counts, as in most servers.
            self.headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
        self._query: Query | None = None
        self._body: bytes | None = None
        self.caller: Any = None  # the authenticated user (accounts.permissions.Caller), once known
        self.upload: Any = None  # an upload's received file (uploads.jobs.UploadedBody)
        # The time window it asked for, when it ends at the time of the answer (its `end`,
        # and maybe its start, are filled in each time a kept answer is sent).
        self.window_ending_now: Window | None = None

    @property
    def query(self) -> Query:
        if self._query is None:
            raw = self.scope.get("query_string", b"").decode("latin-1")
            self._query = parse_query(raw)
        return self._query

    def base_url(self) -> str:
        """scheme://host[:port] as the client addressed this server."""
        host = self.headers.get("host")
        if host is None:
            server_host, port = self.scope.get("server") or ("localhost", 80)
            host = f"{server_host}:{port}"
        return f"{self.scope.get('scheme', 'http')}://{host}"

    def declares_no_body(self) -> bool:
        """Whether the headers declare no body (most requests: GETs)."""
        return self.headers.get("content-length", "0") == "0" and (
            "transfer-encoding" not in self.headers
        )

    def received_body(self) -> bytes:
        """The body, once `body` has read it."""
        assert self._body is not None, "the body is read before it is used"
        return self._body

    async def body(self) -> bytes:
        """The whole body, read as it arrives (see `chunks`)."""
        if self._body is None:
            if self.declares_no_body():
                # Nothing to wait for. Skipping the receive and its timer took 4% of a
                # signed read's time in the profile.
                self._body = b""
            else:
                self._body = b"".join([chunk async for chunk in self.chunks()])
        return self._body

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's pieces as they arrive; past `max_body` bytes, a 413 and no more is read
        (the server then closes the connection instead of draining it). A 408 ends a body that
        pauses longer than `body_timeout`, or that falls behind `min_rate` bytes a second
        after its first `body_timeout`: at the defaults a 16 KiB body has 11 s in all, and a
        client that sends a byte every few seconds is cut off after 10."""
        size = 0
        started = last = time.monotonic()
        while True:
            # When the body pauses too long, and when, at the minimum rate from its start,
            # it falls behind.
            stall_at = last + self.body_timeout
            behind_at = started + self.body_timeout + size / self.min_rate
            try:
                async with asyncio.timeout(max(min(stall_at, behind_at) - time.monotonic(), 0)):
                    message = await self.receive()
            except TimeoutError:
                # A few bytes then silence meets both limits at nearly the same time (which
                # first depends on how soon the first bytes were read): silent for nine
                # tenths of the pause limit is a stall.
                problem = (
                    f"stalled for {self.body_timeout:g} s"
                    if time.monotonic() - last >= 0.9 * self.body_timeout
                    else f"arrived slower than {self.min_rate} bytes a second"
                )
                raise ApiError(408, f"the request body {problem}", "body", CLOSE) from None
            if message["type"] != "http.request":
                raise ApiError(400, "the client closed the connection mid-body", "body", CLOSE)
            chunk = message.get("body", b"")
            last = time.monotonic()
            size += len(chunk)
            if size > self.max_body:
                raise body_too_large(self.max_body)
            if chunk:
                yield chunk
            if not message.get("more_body", False):
                return

    async def spool_body(self, spool: IO[bytes], signature: BodySink | None) -> int:
        """Write the body to `spool` as it arrives, feeding `signature` too; its size."""
        size = 0
        async for chunk in self.chunks():
            spool.write(chunk)
            if signature is not None:
                signature.update(chunk)
            size += len(chunk)
        spool.flush()
        return size


def parse_query(raw: str) -> Query:
    """A query string's parameters, blank ones kept, as parse_qs reads them. Without an
    escape ('%' or '+') there is nothing to decode, and splitting it here took 1.1 us where
    parse_qs took 4.5 (most of this API's queries)."""
    if "%" in raw or "+" in raw:
        return parse_qs(raw, keep_blank_values=True)
    query: Query = {}
    for field_ in raw.split("&"):
        if field_:
            name, _, value = field_.partition("=")
            query.setdefault(name, []).append(value)
    return query


class BodySink(Protocol):
    def update(self, chunk: bytes) -> None: ...


# A body left half read cannot be told from the next request: the connection ends.
CLOSE = {"Connection": "close"}
REQUEST_ID_KEY = "graphsvc.request_id"  # the scope key of the request's id
CALLER_KEY = "graphsvc.caller"  # of its caller, as its log line names it
OPERATION_KEY = "graphsvc.operation"  # of its operation's operationId


def decode_json(decoder: msgspec.json.Decoder[Any], raw: bytes, what: str) -> Any:
    """A request body as the struct it must be, or a 400 saying what is wrong with it."""
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise bad_request(f"invalid {what}: {exc}", "body") from None
    except msgspec.DecodeError:
        raise bad_request(f"{what} must be a JSON object", "body") from None
    except UnicodeDecodeError:
        raise bad_request(f"{what} must be UTF-8", "body") from None


def body_too_large(limit: int) -> ApiError:
    return ApiError(413, f"request body is larger than {limit} bytes", "body", CLOSE)


def declared_length(scope: Scope) -> int | None:
    """The Content-Length the client declared, if it declared a plain one."""
    for name, value in scope["headers"]:
        if name.lower() == b"content-length" and value.isdigit() and len(value) <= 18:
            return int(value)
    return None


@dataclass
class Response:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    content_type: bytes = b"application/json"  # every answer but the metrics


def json_response(
    body: msgspec.Struct, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(status, encode(body), headers or {})


def error_response(
    request_id: str, status: int, message: str, context: str, headers: dict[str, str] | None = None
) -> Response:
    """The spec's error body: one error, its status, when, and the request's id."""
    body = wire.ErrorBody(
        status, datetime.now(UTC), request_id, [wire.ErrorDetail(context, message)]
    )
    return json_response(body, status, headers)


async def send_response(send: Send, response: Response, request_id: str, head: bool) -> None:
    """Every answer carries the request's id; HEAD gets the headers only, and a 304 or an
    answer with no content (a 204, a 202 with no body) no content headers (a 304's
    Content-Length would have to be the 200's; the others have no content to describe)."""
    headers = response_headers(response, request_id)
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else response.body})


def response_headers(response: Response, request_id: str) -> list[tuple[bytes, bytes]]:
    headers = [
        (b"requestid", request_id.encode()),
        *((name.lower().encode(), value.encode()) for name, value in response.headers.items()),
    ]
    if response.status != 304 and not (response.status in (202, 204) and not response.body):
        headers += [
            (b"content-type", response.content_type),
            (b"content-length", str(len(response.body)).encode()),
        ]
    return headers


Endpoint = Callable[[Request], Awaitable[Response]]


@dataclass
class Route:
    pattern: re.Pattern[str]
    methods: dict[str, Endpoint]
    max_body: int  # the most body bytes a request to it may send
    operation_ids: dict[str, str]  # by method, for logs and metrics
    key: RouteKey  # see `route_key`


# A path's number of segments and its third one (`/api/v2/<this>/...`): a path matches only
# templates with the same (a parameter is one non-empty segment, and no template of this
# API has one there). Matching a request against its own few routes, not all 85 in order,
# took a computer's `controllers` list answered from memory (80th in order) from 39 to 36 us
# in process; the SAML provider (10th) stayed at 30.
RouteKey = tuple[int, str | None]
Routes = dict[RouteKey, list[Route]]


def route_key(path: str) -> RouteKey:
    segments = path.split("/", 4)
    return path.count("/") + 1, segments[3] if len(segments) > 3 else None


def route(
    template: str, methods: dict[str, Endpoint], max_body: int, operation_ids: dict[str, str]
) -> Route:
    """A route for a path like /a/{name}/b: each {name} matches one non-empty segment."""
    key = route_key(template)
    if key[1] is not None and "{" in key[1]:
        raise ValueError(f"{template}: a parameter in the third segment (see RouteKey)")
    pattern = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", template)
    return Route(
        re.compile(pattern),
        {method.upper(): e for method, e in methods.items()},
        max_body,
        operation_ids,
        key,
    )


def index_routes(routes: list[Route]) -> Routes:
    """The routes by key, each key's in their order."""
    index: Routes = {}
    for each in routes:
        index.setdefault(each.key, []).append(each)
    return index


def match_route(routes: Routes, path: str) -> tuple[Route, dict[str, str]] | None:
    for candidate in routes.get(route_key(path), ()):
        found = candidate.pattern.fullmatch(path)
        if found is not None:
            return candidate, found.groupdict()
    return None


# A slash the client encoded (%2F) is part of its segment (an object id may hold one), but
# the server's decoded path splits there: /groups/A%2Fmembers read as group A's members.
# Such a path is matched with its encoded slashes held as NUL (a character no id holds),
# each parameter getting its slashes back.
ENCODED_SLASH = "\x00"


def match_request(routes: Routes, scope: Scope) -> tuple[Route, dict[str, str]] | None:
    """The route of a request's path, and its path parameters, decoded."""
    raw: bytes | None = scope.get("raw_path")
    if raw is None or (b"%2F" not in raw and b"%2f" not in raw):
        return match_route(routes, scope["path"])
    path = "/".join(
        unquote(segment).replace("/", ENCODED_SLASH) for segment in raw.decode("latin-1").split("/")
    )
    found = match_route(routes, path)
    if found is None:
        return None
    matched, params = found
    return matched, {name: value.replace(ENCODED_SLASH, "/") for name, value in params.items()}
