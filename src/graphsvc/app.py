"""The ASGI application: routes, the request path (auth, Prefer, timeout) and the error body."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from graphsvc import models as m
from graphsvc import params, service, store
from graphsvc.auth import Authenticator, Identity
from graphsvc.crypto import KeyBox
from graphsvc.db import DATABASE_ERRORS, Connection, Database, create_database
from graphsvc.errors import ApiError, bad_request, not_found
from graphsvc.openapi import build_openapi
from graphsvc.ratelimit import RateLimit, RateLimiter
from graphsvc.responses import encode, error_response, json_response
from graphsvc.settings import Settings

log = logging.getLogger("graphsvc")
PREFER = re.compile(r"wait=(-1|[0-9]+)")


@dataclass
class Api:
    """Everything the request path needs, built once per app."""

    settings: Settings
    db: Database
    auth: Authenticator
    openapi: bytes


def request_id_of(request: Request) -> str:
    return str(request.scope.get("state", {}).get("request_id", uuid.uuid4()))


async def on_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(request_id_of(request), exc.status, exc.message, exc.context)


async def on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message, context = f"no route {request.url.path}", "route"
    elif exc.status_code == 405:
        message, context = f"method {request.method} is not allowed on {request.url.path}", "method"
    else:
        message, context = str(exc.detail), "request"
    return error_response(
        request_id_of(request), exc.status_code, message, context, dict(exc.headers or {})
    )


class RequestContext:
    """Gives each request a fresh id, sent as `RequestID`, and turns crashes into a 500 body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = str(uuid.uuid4())
        scope.setdefault("state", {})["request_id"] = request_id
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", []))
                if not any(k.lower() == b"requestid" for k, _ in headers):
                    headers.append((b"requestid", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            log.exception("unhandled error in request %s", request_id)
            if started:
                raise
            if isinstance(exc, DATABASE_ERRORS):
                response = error_response(request_id, 500, "database error", "database")
            else:
                response = error_response(request_id, 500, "internal server error", "server")
            await response(scope, receive, send)


# --- the request path -------------------------------------------------------------------

Handler = Callable[[Request, Connection], Awaitable[msgspec.Struct]]


def parse_prefer(header: str | None, settings: Settings) -> int | None:
    """Seconds the request may take; None means no limit (wait=-1, when allowed)."""
    if header is None:
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


def operation(
    permission: str, handler: Handler, enterprise_only: bool = False
) -> Callable[[Request], Awaitable[Response]]:
    """Authenticate, authorize, then run the handler under the request's timeout."""

    async def endpoint(request: Request) -> Response:
        api: Api = request.app.state.api
        if enterprise_only and api.settings.edition != "enterprise":
            raise not_found(
                f"{request.method} {request.url.path}: this operation is available "
                "in the Enterprise edition only",
                "edition",
            )
        async with api.db.reading() as conn:
            identity = await api.auth.authenticate(conn, request)
            api.auth.authorize(identity, permission)
            wait = parse_prefer(request.headers.get("prefer"), api.settings)
            try:
                async with asyncio.timeout(wait):
                    body = await handler(request, conn)
            except TimeoutError:
                raise ApiError(500, f"request timed out after {wait} seconds", "timeout") from None
        await touch_token(api, identity)
        headers = {}
        if "prefer" in request.headers:
            headers["Preference-Applied"] = f"wait={-1 if wait is None else wait}"
        return json_response(body, headers=headers)

    return endpoint


async def touch_token(api: Api, identity: Identity) -> None:
    if identity.token_id and api.auth.token_needs_touch(identity.token_id):
        async with api.db.transaction() as conn:
            await store.touch_token(conn, identity.token_id, datetime.now(UTC))


# --- operations -------------------------------------------------------------------------

TIME_SORT = {"created_at", "updated_at"}
NEWEST_FIRST = [("created_at", True)]
NODE_SORT = {"name", "objectid", "label"}
BY_NAME = [("name", False), ("objectid", False)]
DEFAULT_LIMIT = 1000
DCOM_DEFAULT_LIMIT = 10


def settings_of(request: Request) -> Settings:
    api: Api = request.app.state.api
    return api.settings


async def get_aggregations(request: Request, conn: Connection) -> msgspec.Struct:
    q, settings = request.query_params, settings_of(request)
    return await service.get_aggregations(
        conn,
        environment_kind_id=params.required_int32(q, "schema_environment_kind_id"),
        extension_id=params.optional_int32(q, "schema_extension_id"),
        window=params.parse_window(q, datetime.now(UTC)),
        sort=params.parse_sort(q, TIME_SORT, NEWEST_FIRST),
        page=params.parse_page(q, DEFAULT_LIMIT, settings.max_limit),
    )


async def get_tenant_stats(request: Request, conn: Connection) -> msgspec.Struct:
    q, settings = request.query_params, settings_of(request)
    return await service.get_tenant_stats(
        conn,
        params.parse_uuid(request.path_params["tenant_id"], "tenant_id"),
        window=params.parse_window(q, datetime.now(UTC)),
        sort=params.parse_sort(q, TIME_SORT, NEWEST_FIRST),
        page=params.parse_page(q, DEFAULT_LIMIT, settings.max_limit),
    )


async def get_saml_provider(request: Request, conn: Connection) -> msgspec.Struct:
    provider_id = params.parse_int32(
        request.path_params["saml_provider_id"], "saml_provider_id", "path parameter"
    )
    base = settings_of(request).public_url or f"{request.url.scheme}://{request.url.netloc}"
    return await service.get_saml_provider(conn, provider_id, base)


async def get_client(request: Request, conn: Connection) -> msgspec.Struct:
    client_id = params.parse_uuid(request.path_params["client_id"], "client_id")
    return await service.get_client(conn, client_id)


async def get_dcom_rights(request: Request, conn: Connection) -> msgspec.Struct:
    q, settings = request.query_params, settings_of(request)
    kind = params.single(q, "type")
    if kind == "graph":
        raise bad_request("type=graph is not supported: only type=list is", "type")
    if kind not in (None, "list"):
        raise bad_request(f"type must be 'list', got {kind!r}", "type")
    return await service.get_dcom_rights(
        conn,
        request.path_params["object_id"],
        sort=params.parse_sort(q, NODE_SORT, BY_NAME),
        page=params.parse_page(q, DCOM_DEFAULT_LIMIT, settings.max_limit),
    )


# --- sessions, health, the OpenAPI document ---------------------------------------------

login_decoder = msgspec.json.Decoder(m.LoginRequest)


async def login(request: Request) -> Response:
    api: Api = request.app.state.api
    try:
        body = login_decoder.decode(await request.body())
    except msgspec.ValidationError as exc:
        raise bad_request(f"invalid login body: {exc}", "body") from None
    except msgspec.DecodeError:
        raise bad_request("login body must be a JSON object", "body") from None
    async with api.db.transaction() as conn:
        reply = await service.log_in(
            conn, body, api.auth.jwt_key, timedelta(seconds=api.settings.jwt_lifetime_seconds)
        )
    return json_response(reply)


async def logout(request: Request) -> Response:
    api: Api = request.app.state.api
    async with api.db.transaction() as conn:
        identity = await api.auth.authenticate(conn, request)
        if identity.session_id is None or identity.principal is None:
            raise bad_request(
                "logout ends a session: send the session's JWT as Bearer", "Authorization"
            )
        await store.delete_session(conn, identity.session_id)
    return json_response(m.LogoutResponse(m.LogoutData(identity.principal.user_id, True)))


async def health(request: Request) -> Response:
    api: Api = request.app.state.api
    try:
        async with asyncio.timeout(5), api.db.reading() as conn:
            await store.ping(conn)
    except Exception as exc:
        log.warning("health check: database unreachable: %s", exc)
        raise ApiError(503, "database is unreachable", "database") from None
    return json_response(m.HealthResponse(m.HealthData("ok", api.db.dialect)))


async def openapi_document(request: Request) -> Response:
    api: Api = request.app.state.api
    return Response(api.openapi, media_type="application/json")


def create_app(settings: Settings, database: Database | None = None) -> Starlette:
    """The app for these settings; the database opens at startup and closes at shutdown."""
    db = database or create_database(settings.resolved_database_url(), settings.db_pool_size)
    auth = Authenticator(
        settings, settings.resolved_jwt_secret(), KeyBox(settings.resolved_token_encryption_key())
    )
    api = Api(settings, db, auth, encode(build_openapi()))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await db.open()
        async with db.reading() as conn:
            await auth.load(conn)
        try:
            yield
        finally:
            await db.close()

    v2 = "/api/v2"
    routes = [
        Route("/health", health, methods=["GET"]),
        Route(f"{v2}/spec/openapi.json", openapi_document, methods=["GET"]),
        Route(f"{v2}/login", login, methods=["POST"]),
        Route(f"{v2}/logout", logout, methods=["POST"]),
        Route(
            f"{v2}/data-quality-stats-aggregations",
            operation("graphdb/Read", get_aggregations),
            methods=["GET"],
        ),
        Route(
            f"{v2}/azure-tenants/{{tenant_id}}/data-quality-stats",
            operation("graphdb/Read", get_tenant_stats),
            methods=["GET"],
        ),
        Route(
            f"{v2}/saml/providers/{{saml_provider_id}}",
            operation("auth/ManageProviders", get_saml_provider),
            methods=["GET"],
        ),
        Route(
            f"{v2}/clients/{{client_id}}",
            operation("clients/Read", get_client, enterprise_only=True),
            methods=["GET"],
        ),
        Route(
            f"{v2}/computers/{{object_id}}/dcom-rights",
            operation("graphdb/Read", get_dcom_rights),
            methods=["GET"],
        ),
    ]
    handlers: dict[Any, Any] = {ApiError: on_api_error, HTTPException: on_http_exception}
    app = Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan)
    # A redirect would have an empty body and change the URI a signature covers: 404 instead.
    app.router.redirect_slashes = False
    app.state.api = api
    if settings.rate_limit_per_second > 0:
        limiter = RateLimiter(
            settings.rate_limit_per_second, settings.rate_limit_burst, settings.redis_url
        )
        app.add_middleware(RateLimit, limiter=limiter, trusted_proxies=settings.trusted_proxies)
    app.add_middleware(RequestContext)  # added last, so outermost: 429s carry a request id too
    return app
