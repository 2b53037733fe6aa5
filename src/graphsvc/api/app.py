"""The ASGI application: the router built from the operations table, the request path of a
read (rate limit, auth, Prefer, timeout) and the one place failures become the spec's error
body."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from datetime import UTC, datetime
from functools import partial
from typing import Any

import msgspec

from graphsvc.access import Caller
from graphsvc.api.auth import Authenticator, Identity
from graphsvc.api.handlers import PASSWORD_CHECKS_AT_ONCE, Context
from graphsvc.api.metrics import Metrics
from graphsvc.api.openapi import build_openapi
from graphsvc.api.operations import OPERATIONS, Operation
from graphsvc.api.ratelimit import (
    RateLimiter,
    client_address,
    login_failure_windows,
    request_windows,
    too_many_requests,
)
from graphsvc.api.web import (
    Endpoint,
    Receive,
    Request,
    Response,
    Route,
    Scope,
    Send,
    body_too_large,
    declared_length,
    decode_json,
    encode,
    error_response,
    json_response,
    match_route,
    route,
    send_response,
)
from graphsvc.crypto import KeyBox
from graphsvc.errors import ApiError, bad_request, not_found
from graphsvc.logs import REQUESTS, audit
from graphsvc.settings import Settings
from graphsvc.store import accounts
from graphsvc.store.db import DATABASE_ERRORS, Database, create_database, redact_url

log = logging.getLogger("graphsvc")
PREFER = re.compile(r"wait=(-1|[0-9]{1,18})")  # bounded: int() of thousands of digits fails
BARE_NUMBER = re.compile(r"-?[0-9]{1,18}")


class App:
    """The ASGI app for one set of settings; the database opens at startup (lifespan)."""

    def __init__(self, settings: Settings, database: Database | None = None) -> None:
        self.settings = settings
        self.db = database or create_database(
            settings.resolved_database_url(), settings.db_pool_size
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
        self.metrics = Metrics(self.db, self.limiter)
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
        )
        by_path: dict[str, list[Operation]] = {}
        for op in OPERATIONS:
            by_path.setdefault(op.path, []).append(op)
        self.routes: list[Route] = [
            route(
                path,
                {op.method: self.endpoint(op) for op in ops},
                max(op.max_body_bytes or settings.max_body_bytes for op in ops),
                {op.method: op.operation_id for op in ops},
            )
            for path, ops in by_path.items()
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        request_id = incoming_request_id(scope) or str(uuid.uuid4())
        error: ApiError | None = None
        try:
            response = await self.respond(scope, receive)
        except ApiError as exc:
            error = exc
        except Exception as exc:
            log.exception("unhandled error in request %s", request_id)
            if isinstance(exc, DATABASE_ERRORS):
                error = ApiError(500, "database error", "database")
            else:
                error = ApiError(500, "internal server error", "server")
        if error is not None:
            response = error_response(
                request_id, error.status, error.message, error.context, error.headers
            )
        await send_response(send, response, request_id, head=scope["method"] == "HEAD")
        self.log_request(scope, request_id, response.status, started, error)

    def log_request(
        self, scope: Scope, request_id: str, status: int, started: float, error: ApiError | None
    ) -> None:
        """One line per request; a refused one is an audit event too."""
        caller = scope.get(CALLER, {})
        operation = scope.get(OPERATION, "unknown")
        seconds = time.perf_counter() - started
        fields = {
            "request_id": request_id,
            "method": scope["method"],
            "path": scope["path"],  # never the query: it can carry what a client should not log
            "status": status,
            "duration_ms": round(seconds * 1000, 2),
            "operation": operation,
            "client": client_address(scope, self.settings.trusted_proxies),
            **caller,
        }
        if error is not None:
            fields["error_context"], fields["error"] = error.context, error.message
        self.metrics.observe(operation, status, seconds, None if error is None else error.message)
        REQUESTS.log(
            logging.WARNING if status >= 500 else logging.INFO, "request", extra={"fields": fields}
        )
        # A refused login is audited by the login itself, with the user name tried.
        login = scope["path"] == LOGIN_PATH and status != 429
        if error is not None and status in AUDITED and not login:
            event, what = AUDITED[status]
            audit(event, f"{what}: {error.message}", reason=error.message, **fields)

    async def respond(self, scope: Scope, receive: Receive) -> Response:
        path = scope["path"]
        # Counted before anything else runs, so refused requests cost as little as possible.
        if self.limiter is not None and path not in UNLIMITED:
            verdict = await self.limiter.check(client_address(scope, self.settings.trusted_proxies))
            if not verdict.admitted:
                raise too_many_requests(verdict)
        found = match_route(self.routes, path)
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
        scope[OPERATION] = matched.operation_ids["GET" if method == "HEAD" else method]
        request = Request(
            scope, receive, path_params, matched.max_body, self.settings.body_timeout_seconds
        )
        return await endpoint(request)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.db.open()
                    async with self.db.reading() as conn:
                        await self.auth.load(conn)
                    await self.warn_if_redis_is_silent()
                except Exception as exc:
                    log.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.db.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def warn_if_redis_is_silent(self) -> None:
        if self.limiter is not None and not await self.limiter.redis_answers():
            log.warning(
                "Redis at %s does not answer: rate limits and the login throttle count per "
                "process until it does",
                redact_url(self.settings.redis_url or ""),
            )

    # --- the request path of an operation ----------------------------------------------------

    def endpoint(self, op: Operation) -> Endpoint:
        if op.authentication != "any":
            return partial(op.handler, self.context)
        return self.served_endpoint(op)

    def served_endpoint(self, op: Operation) -> Endpoint:
        """Authenticate, authorize, decode the body and parse the parameters, then run the
        handler under the request's timeout."""
        decoder = msgspec.json.Decoder(op.request_body) if op.request_body else None
        connect = self.db.transaction if op.writes else self.db.reading

        async def endpoint(request: Request) -> Response:
            if op.enterprise_only and self.settings.edition != "enterprise":
                raise not_found(
                    f"{request.method} {request.path}: this operation is available "
                    "in the Enterprise edition only",
                    "edition",
                )
            async with connect() as conn:
                identity = await self.auth.authenticate(conn, request)
                request.scope[CALLER] = caller_fields(identity)
                principal = self.auth.authorize(identity, op.permission)
                request.caller = Caller(
                    principal, identity.token_id, self.auth.permissions_of(principal)
                )
                prefer = request.headers.get("prefer")
                wait = parse_prefer(prefer, self.settings)
                arguments: dict[str, Any] = {}
                if decoder is not None:
                    arguments["body"] = decode_json(decoder, await request.body(), "body")
                for parameter in op.parameters:
                    value = parameter.parse(request, self.context)
                    if parameter.argument is not None:
                        arguments[parameter.argument] = value
                try:
                    async with asyncio.timeout(wait):
                        body = await op.handler(conn, **arguments)
                except TimeoutError:
                    raise ApiError(
                        500, f"request timed out after {wait} seconds", "timeout"
                    ) from None
            await self.touch_token(identity)
            headers = {}
            if prefer is not None and prefer.strip().startswith("wait="):
                headers["Preference-Applied"] = f"wait={-1 if wait is None else wait}"
            return json_response(body, headers=headers)

        return endpoint

    async def touch_token(self, identity: Identity) -> None:
        if identity.token_id and self.auth.token_needs_touch(identity.token_id):
            async with self.db.transaction() as conn:
                await accounts.touch_token(conn, identity.token_id, datetime.now(UTC))


UNLIMITED = ("/health", "/ready", "/metrics")  # probes and scrapes, sent often
CALLER = "graphsvc.caller"  # the scope key the request path notes its caller under
OPERATION = "graphsvc.operation"  # and the operationId it is
LOGIN_PATH = "/api/v2/login"  # its failures are audited with the user name tried
AUDITED = {
    401: ("auth.failed", "authentication failed"),
    403: ("auth.forbidden", "permission refused"),
    429: ("rate_limited", "rate limit reached"),
}
REQUEST_ID = re.compile(rb"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


def incoming_request_id(scope: Scope) -> str | None:
    """A client's X-Request-ID, when it is a UUID (the error body's request_id is one)."""
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            return value.decode().lower() if REQUEST_ID.fullmatch(value) else None
    return None


def caller_fields(identity: Identity) -> dict[str, str]:
    fields = {}
    if identity.principal is not None:
        fields["user_id"] = identity.principal.user_id
    if identity.token_id is not None:
        fields["token_id"] = identity.token_id
    return fields


def create_app(settings: Settings, database: Database | None = None) -> App:
    return App(settings, database)


def parse_prefer(header: str | None, settings: Settings) -> int | None:
    """Seconds the request may take; None means no limit (wait=-1, when allowed)."""
    if header is None:
        return settings.default_wait_seconds
    if settings.sdk_compatibility and BARE_NUMBER.fullmatch(header.strip()):
        # The reference SDK sends `Prefer: 0` on every call; older reference servers took a
        # bare number as no preference.
        return settings.default_wait_seconds
    match = PREFER.fullmatch(header.strip())
    if match is None:
        raise bad_request(
            f"Prefer header must be 'wait=<seconds>' or 'wait=-1', got {header!r}", "Prefer"
        )
    wait = int(match.group(1))
    if wait == -1:
        if not settings.allow_unlimited_wait:
            raise bad_request("Prefer: wait=-1 (no timeout) is disabled on this server", "Prefer")
        return None
    if wait == 0:
        return settings.default_wait_seconds
    return min(wait, settings.max_wait_seconds)
