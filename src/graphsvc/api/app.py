"""The ASGI application: its lifespan, the router built from the operations table (each
operation served by the read path, api/reads.py, the write path, api/writes.py, or its own
handler), the rate limit every request counts against, and the one place failures become
the spec's error body."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from functools import partial

from graphsvc.api.admission import Admission
from graphsvc.api.answers import AnswerCache
from graphsvc.api.auth import Authenticator, LastAccess
from graphsvc.api.context import Context
from graphsvc.api.login import PASSWORD_CHECKS_AT_ONCE
from graphsvc.api.metrics import Metrics
from graphsvc.api.openapi import build_openapi
from graphsvc.api.ratelimit import (
    RateLimiter,
    client_address,
    login_failure_windows,
    request_windows,
    too_many_requests,
)
from graphsvc.api.reads import Reads
from graphsvc.api.request_lines import RequestLines
from graphsvc.api.routes import OPERATIONS, Operation
from graphsvc.api.web import (
    OPERATION_KEY,
    REQUEST_ID_KEY,
    Endpoint,
    Receive,
    Request,
    Response,
    Scope,
    Send,
    body_too_large,
    declared_length,
    encode,
    error_response,
    index_routes,
    match_request,
    new_request_id,
    response_headers,
    route,
    send_response,
)
from graphsvc.api.writes import Stopping, Writes
from graphsvc.console.assets import load_console_files
from graphsvc.crypto import KeyBox
from graphsvc.cypher.graph import NodeTables
from graphsvc.cypher.service import CypherEngine, cypher_caps
from graphsvc.errors import ApiError
from graphsvc.graph.paths import PathIndex
from graphsvc.settings import Settings
from graphsvc.store.db import (
    Database,
    NoFreeConnection,
    create_database,
    database_errors,
    is_store_busy,
    redact_url,
)
from graphsvc.uploads.ingester import JobIngester, start_ingester

log = logging.getLogger("graphsvc")


class App:
    """The ASGI app for one set of settings; the database opens at startup (lifespan)."""

    def __init__(self, settings: Settings, database: Database | None = None) -> None:
        self.settings = settings
        self.db = database or create_database(
            settings.resolved_database_url(),
            settings.db_pool_size,
            settings.db_acquire_timeout_seconds,
        )
        self.auth = Authenticator(
            settings,
            settings.resolved_jwt_secret(),
            KeyBox(settings.resolved_token_encryption_key()),
        )
        self.limiter = (
            RateLimiter(
                request_windows(settings.rate_limit_per_second, settings.rate_limit_burst),
                settings.redis_url,
            )
            if settings.rate_limit_per_second > 0
            else None
        )
        self.answers = AnswerCache(settings.answer_cache_bytes)
        self.metrics = Metrics(self.db, self.limiter, self.answers, settings.metrics != "off")
        self.request_lines = RequestLines(settings, self.metrics)
        self.ingester: JobIngester | None = None  # started with the app, when configured
        self.last_access = LastAccess(self.db)
        paths = PathIndex(self.db, settings.resolved_path_index_folder())
        self.context = Context(
            settings,
            self.db,
            self.auth,
            self.metrics,
            encode(build_openapi(OPERATIONS)),
            RateLimiter(
                login_failure_windows(settings.login_failures_per_minute), settings.redis_url
            ),
            asyncio.Semaphore(PASSWORD_CHECKS_AT_ONCE),
            paths,
            CypherEngine(paths, NodeTables(), cypher_caps(settings)),
            load_console_files() if settings.console == "on" else None,
        )
        admission = Admission(settings, self.auth, self.context, OPERATIONS)
        self.reads = Reads(
            settings,
            self.db,
            self.auth,
            admission,
            self.limiter,
            self.metrics,
            self.last_access,
            self.answers,
            OPERATIONS,
        )
        self.stopping = Stopping()
        self.writes = Writes(
            settings, self.db, self.auth, admission, self.context, self.last_access, self.stopping
        )
        by_path: dict[str, list[Operation]] = {}
        for op in OPERATIONS:
            by_path.setdefault(op.path, []).append(op)
        self.routes = index_routes(
            [
                route(
                    path,
                    {op.method: self.endpoint(op) for op in ops},
                    max(body_limit(op, settings) for op in ops),
                    {op.method: op.operation_id for op in ops},
                )
                for path, ops in by_path.items()
            ]
        )

    def endpoint(self, op: Operation) -> Endpoint:
        if op.authentication != "any":
            return partial(op.handler, self.context)
        if op.upload or op.writes:
            return self.writes.endpoint(op)
        return self.reads.endpoint(op)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        request_id = incoming_request_id(scope) or new_request_id()
        scope[REQUEST_ID_KEY] = request_id
        error: ApiError | None = None
        try:
            response = await self.respond(scope, receive)
        except ApiError as exc:
            error = exc
        except Exception as exc:
            error = self.classify_failure(exc, request_id)
        if error is not None:
            response = error_response(
                request_id, error.status, error.message, error.context, error.headers
            )
        await send_response(send, response, request_id, head=scope["method"] == "HEAD")
        self.request_lines.log(scope, request_id, response.status, started, error)

    def answer_whole(self, scope: Scope) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
        """A read that memory answers (`Reads.answer_at_once`), as the server writes it (its
        status, headers and body), the request logged as `__call__` logs it; None: the
        request takes the ASGI path."""
        started = time.perf_counter()
        if scope["method"] not in ("GET", "HEAD"):
            return None
        # Nothing kept and no tag named, as on the first requests after a change of the
        # data: nothing memory can answer, told before the route and key are found, which
        # cost such a miss 5 of its 6 us in process.
        if not self.answers.entries and not names_a_tag(scope["headers"]):
            return None
        found = match_request(self.routes, scope)
        if found is None:
            return None
        matched, path_params = found
        operation_id = matched.operation_ids.get("GET")
        if operation_id is None:
            return None
        response = self.reads.answer_at_once(scope, operation_id, path_params)
        if response is None:
            return None
        request_id = incoming_request_id(scope) or new_request_id()
        scope[REQUEST_ID_KEY] = request_id
        self.request_lines.log(scope, request_id, response.status, started, None)
        body = b"" if scope["method"] == "HEAD" else response.body
        return response.status, response_headers(response, request_id), body

    def classify_failure(self, exc: Exception, request_id: str) -> ApiError:
        """An unexpected failure as the error it is answered with; logged, unless the
        store was only busy."""
        if is_store_busy(exc):
            # SQLite has one writer: a write that waited out the busy timeout behind an
            # ingest is worth retrying, not a server fault.
            return ApiError(
                503,
                "the store is busy with another write (an ingest); try again shortly",
                "database",
                {"Retry-After": str(BUSY_RETRY_SECONDS)},
                code="store_busy",
            )
        if isinstance(exc, NoFreeConnection):
            return ApiError(
                503,
                f"every database connection stayed in use for "
                f"{self.settings.db_acquire_timeout_seconds:g} s; try again shortly",
                "database",
                {"Retry-After": str(NO_CONNECTION_RETRY_SECONDS)},
                code="no_free_connection",
            )
        log.exception("unhandled error in request %s", request_id)
        if isinstance(exc, database_errors()):
            return ApiError(500, "database error", "database", code="database_error")
        return ApiError(500, "internal server error", "server")

    async def respond(self, scope: Scope, receive: Receive) -> Response:
        path = scope["path"]
        # Counted before anything else runs, so refused requests cost as little as possible.
        if self.limiter is not None and path not in UNLIMITED:
            verdict = await self.limiter.record_hit(
                client_address(scope, self.settings.trusted_proxies)
            )
            if not verdict.admitted:
                raise too_many_requests(verdict)
        found = match_request(self.routes, scope)
        if found is None:
            raise ApiError(404, f"no route {path}", "route")
        matched, path_params = found
        method = scope["method"]
        endpoint = matched.methods.get("GET" if method == "HEAD" else method)
        if endpoint is None:
            raise ApiError(
                405,
                f"method {method} is not allowed on {path}",
                "method",
                {"Allow": ", ".join(matched.methods)},
            )
        length = declared_length(scope)
        if length is not None and length > matched.max_body:
            raise body_too_large(matched.max_body)
        scope[OPERATION_KEY] = matched.operation_ids["GET" if method == "HEAD" else method]
        request = Request(
            scope,
            receive,
            path_params,
            matched.max_body,
            self.settings.body_timeout_seconds,
            self.settings.body_min_bytes_per_second,
        )
        return await endpoint(request)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.db.open()
                    await self.db.follow_data_version()
                    async with self.db.reading() as conn:
                        await self.auth.load(conn)
                    await self.warn_if_redis_is_silent()
                    if self.settings.ingester:
                        self.ingester = start_ingester(self.settings)
                except Exception as exc:
                    log.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.ingester is not None:
                    await asyncio.to_thread(self.ingester.stop)
                await self.last_access.stop()
                await self.context.paths.stop()
                await self.db.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def warn_if_redis_is_silent(self) -> None:
        problem = await self.context.login_failures.find_redis_problem()
        if problem is not None:
            answered, reason = problem
            # Said once here: the limiters count in memory from the start, and say nothing
            # more until Redis answers again.
            for limiter in (self.limiter, self.context.login_failures):
                if limiter is not None:
                    limiter.note_redis_unreachable()
            log.warning(
                "Redis at %s %s (%s): rate limits and the login throttle count per process "
                "until it answers",
                redact_url(self.settings.redis_url or ""),
                "refuses graphsvc's requests" if answered else "does not answer",
                reason,
            )


BUSY_RETRY_SECONDS = 5
NO_CONNECTION_RETRY_SECONDS = 1
UNLIMITED = ("/health", "/ready", "/metrics")  # probes and scrapes, sent often
REQUEST_ID = re.compile(rb"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


def names_a_tag(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a request's raw headers hold an If-None-Match."""
    return any(name == b"if-none-match" for name, _ in headers)


def incoming_request_id(scope: Scope) -> str | None:
    """A client's X-Request-ID, when it is a UUID (the error body's request_id is one)."""
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            return value.decode().lower() if REQUEST_ID.fullmatch(value) else None
    return None


def body_limit(op: Operation, settings: Settings) -> int:
    if op.max_body_bytes is not None:
        return op.max_body_bytes
    return settings.max_upload_bytes if op.upload else settings.max_body_bytes


def create_app(settings: Settings, database: Database | None = None) -> App:
    return App(settings, database)
