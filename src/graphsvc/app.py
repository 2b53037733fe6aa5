"""The ASGI application: routes, the request path (rate limit, auth, Prefer, timeout) and
the one place failures become the spec's error body."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import msgspec

from graphsvc import models as m
from graphsvc import params, service, store
from graphsvc.auth import Authenticator, Identity
from graphsvc.crypto import KeyBox
from graphsvc.db import DATABASE_ERRORS, Connection, Database, create_database
from graphsvc.errors import ApiError, bad_request, not_found
from graphsvc.openapi import build_openapi
from graphsvc.ratelimit import RateLimiter, client_address, too_many_requests
from graphsvc.settings import Settings
from graphsvc.web import (
    Endpoint,
    Receive,
    Request,
    Response,
    Route,
    Scope,
    Send,
    encode,
    error_response,
    json_response,
    match_route,
    route,
    send_response,
)

log = logging.getLogger("graphsvc")
PREFER = re.compile(r"wait=(-1|[0-9]+)")
V2 = "/api/v2"


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
        self.openapi = encode(build_openapi())
        self.limiter = (
            RateLimiter(
                settings.rate_limit_per_second, settings.rate_limit_burst, settings.redis_url
            )
            if settings.rate_limit_per_second > 0
            else None
        )
        read = self.operation
        self.routes: list[Route] = [
            route("/health", get=self.health),
            route(f"{V2}/spec/openapi.json", get=self.openapi_document),
            route(f"{V2}/login", post=self.login),
            route(f"{V2}/logout", post=self.logout),
            route(
                f"{V2}/data-quality-stats-aggregations",
                get=read("graphdb/Read", get_aggregations),
            ),
            route(
                f"{V2}/azure-tenants/{{tenant_id}}/data-quality-stats",
                get=read("graphdb/Read", get_tenant_stats),
            ),
            route(
                f"{V2}/saml/providers/{{saml_provider_id}}",
                get=read("auth/ManageProviders", get_saml_provider),
            ),
            route(
                f"{V2}/clients/{{client_id}}",
                get=read("clients/Read", get_client, enterprise_only=True),
            ),
            route(
                f"{V2}/computers/{{object_id}}/dcom-rights",
                get=read("graphdb/Read", get_dcom_rights),
            ),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        request_id = str(uuid.uuid4())
        try:
            response = await self.respond(scope, receive)
        except ApiError as exc:
            response = error_response(request_id, exc.status, exc.message, exc.context, exc.headers)
        except Exception as exc:
            log.exception("unhandled error in request %s", request_id)
            if isinstance(exc, DATABASE_ERRORS):
                response = error_response(request_id, 500, "database error", "database")
            else:
                response = error_response(request_id, 500, "internal server error", "server")
        await send_response(send, response, request_id, head=scope["method"] == "HEAD")

    async def respond(self, scope: Scope, receive: Receive) -> Response:
        path = scope["path"]
        # Counted before anything else runs, so refused requests cost as little as possible.
        if self.limiter is not None and path != "/health":
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
        return await endpoint(Request(scope, receive, path_params))

    async def lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.db.open()
                    async with self.db.reading() as conn:
                        await self.auth.load(conn)
                except Exception as exc:
                    log.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.db.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # --- the request path of the five operations ----------------------------------------

    def operation(
        self, permission: str, handler: Handler, enterprise_only: bool = False
    ) -> Endpoint:
        """Authenticate, authorize, then run the handler under the request's timeout."""

        async def endpoint(request: Request) -> Response:
            if enterprise_only and self.settings.edition != "enterprise":
                raise not_found(
                    f"{request.method} {request.path}: this operation is available "
                    "in the Enterprise edition only",
                    "edition",
                )
            async with self.db.reading() as conn:
                identity = await self.auth.authenticate(conn, request)
                self.auth.authorize(identity, permission)
                prefer = request.headers.get("prefer")
                wait = parse_prefer(prefer, self.settings)
                try:
                    async with asyncio.timeout(wait):
                        body = await handler(request, conn, self.settings)
                except TimeoutError:
                    raise ApiError(
                        500, f"request timed out after {wait} seconds", "timeout"
                    ) from None
            await self.touch_token(identity)
            headers = {}
            if prefer is not None:
                headers["Preference-Applied"] = f"wait={-1 if wait is None else wait}"
            return json_response(body, headers=headers)

        return endpoint

    async def touch_token(self, identity: Identity) -> None:
        if identity.token_id and self.auth.token_needs_touch(identity.token_id):
            async with self.db.transaction() as conn:
                await store.touch_token(conn, identity.token_id, datetime.now(UTC))

    # --- sessions, health, the OpenAPI document -----------------------------------------

    async def login(self, request: Request) -> Response:
        try:
            body = login_decoder.decode(await request.body())
        except msgspec.ValidationError as exc:
            raise bad_request(f"invalid login body: {exc}", "body") from None
        except msgspec.DecodeError:
            raise bad_request("login body must be a JSON object", "body") from None
        lifetime = timedelta(seconds=self.settings.jwt_lifetime_seconds)
        async with self.db.transaction() as conn:
            reply = await service.log_in(conn, body, self.auth.jwt_key, lifetime)
        return json_response(reply)

    async def logout(self, request: Request) -> Response:
        async with self.db.transaction() as conn:
            identity = await self.auth.authenticate(conn, request)
            if identity.session_id is None or identity.principal is None:
                raise bad_request(
                    "logout ends a session: send the session's JWT as Bearer", "Authorization"
                )
            await store.delete_session(conn, identity.session_id)
        return json_response(m.LogoutResponse(m.LogoutData(identity.principal.user_id, True)))

    async def health(self, request: Request) -> Response:
        try:
            async with asyncio.timeout(5), self.db.reading() as conn:
                await store.ping(conn)
        except Exception as exc:
            log.warning("health check: database unreachable: %s", exc)
            raise ApiError(503, "database is unreachable", "database") from None
        return json_response(m.HealthResponse(m.HealthData("ok", self.db.dialect)))

    async def openapi_document(self, request: Request) -> Response:
        return Response(200, self.openapi)


def create_app(settings: Settings, database: Database | None = None) -> App:
    return App(settings, database)


Handler = Callable[[Request, Connection, Settings], Awaitable[msgspec.Struct]]
login_decoder = msgspec.json.Decoder(m.LoginRequest)


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


# --- operations -------------------------------------------------------------------------

TIME_SORT = {"created_at", "updated_at"}
NEWEST_FIRST = [("created_at", True)]
NODE_SORT = {"name", "objectid", "label"}
BY_NAME = [("name", False), ("objectid", False)]
DEFAULT_LIMIT = 1000
DCOM_DEFAULT_LIMIT = 10


async def get_aggregations(
    request: Request, conn: Connection, settings: Settings
) -> msgspec.Struct:
    q = request.query
    return await service.get_aggregations(
        conn,
        environment_kind_id=params.required_int32(q, "schema_environment_kind_id"),
        extension_id=params.optional_int32(q, "schema_extension_id"),
        window=params.parse_window(q, datetime.now(UTC)),
        sort=params.parse_sort(q, TIME_SORT, NEWEST_FIRST),
        page=params.parse_page(q, DEFAULT_LIMIT, settings.max_limit),
    )


async def get_tenant_stats(
    request: Request, conn: Connection, settings: Settings
) -> msgspec.Struct:
    q = request.query
    return await service.get_tenant_stats(
        conn,
        params.parse_uuid(request.path_params["tenant_id"], "tenant_id"),
        window=params.parse_window(q, datetime.now(UTC)),
        sort=params.parse_sort(q, TIME_SORT, NEWEST_FIRST),
        page=params.parse_page(q, DEFAULT_LIMIT, settings.max_limit),
    )


async def get_saml_provider(
    request: Request, conn: Connection, settings: Settings
) -> msgspec.Struct:
    provider_id = params.parse_int32(
        request.path_params["saml_provider_id"], "saml_provider_id", "path parameter"
    )
    base = settings.public_url or request.base_url()
    return await service.get_saml_provider(conn, provider_id, base)


async def get_client(request: Request, conn: Connection, settings: Settings) -> msgspec.Struct:
    client_id = params.parse_uuid(request.path_params["client_id"], "client_id")
    return await service.get_client(conn, client_id)


async def get_dcom_rights(request: Request, conn: Connection, settings: Settings) -> msgspec.Struct:
    q = request.query
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
