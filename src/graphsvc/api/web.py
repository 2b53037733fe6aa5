"""The few HTTP pieces graphsvc needs on top of ASGI: requests, JSON responses, routes.

A framework would add a request object, middleware layers and exception plumbing to every
call; at this API's size they cost more than the work of a request, so the app speaks ASGI
directly and this module holds what it needs.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

import msgspec

from graphsvc import wire

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Query = dict[str, list[str]]

encode = msgspec.json.Encoder().encode


class Request:
    """One HTTP request: method, path, headers (lower-case names), path and query parameters."""

    def __init__(self, scope: Scope, receive: Receive, path_params: dict[str, str]) -> None:
        self.scope = scope
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

    @property
    def query(self) -> Query:
        if self._query is None:
            raw = self.scope.get("query_string", b"").decode("latin-1")
            self._query = parse_qs(raw, keep_blank_values=True)
        return self._query

    def base_url(self) -> str:
        """scheme://host[:port] as the client addressed this server."""
        host = self.headers.get("host")
        if host is None:
            server_host, port = self.scope.get("server") or ("localhost", 80)
            host = f"{server_host}:{port}"
        return f"{self.scope.get('scheme', 'http')}://{host}"

    async def body(self) -> bytes:
        if self._body is None:
            chunks = []
            while True:
                message = await self.receive()
                if message["type"] != "http.request":
                    break
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
            self._body = b"".join(chunks)
        return self._body


@dataclass
class Response:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


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
    """Every answer is JSON and carries the request's id; HEAD gets the headers only."""
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(response.body)).encode()),
        (b"requestid", request_id.encode()),
        *((name.lower().encode(), value.encode()) for name, value in response.headers.items()),
    ]
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else response.body})


Endpoint = Callable[[Request], Awaitable[Response]]


@dataclass
class Route:
    pattern: re.Pattern[str]
    methods: dict[str, Endpoint]


def route(template: str, methods: dict[str, Endpoint]) -> Route:
    """A route for a path like /a/{name}/b: each {name} matches one non-empty segment."""
    pattern = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", template)
    return Route(re.compile(pattern), {method.upper(): e for method, e in methods.items()})


def match_route(routes: list[Route], path: str) -> tuple[Route, dict[str, str]] | None:
    for candidate in routes:
        found = candidate.pattern.fullmatch(path)
        if found is not None:
            return candidate, found.groupdict()
    return None
