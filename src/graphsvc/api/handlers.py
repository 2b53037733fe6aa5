"""The operations that take the request itself and answer it: login (with its throttle and
its password checks off the event loop), logout, health, and the OpenAPI document."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

import msgspec

from graphsvc import service, wire
from graphsvc.api.auth import Authenticator
from graphsvc.api.metrics import Metrics
from graphsvc.api.ratelimit import RateLimiter, client_address, too_many_requests
from graphsvc.api.web import Request, Response, decode_json, json_response
from graphsvc.crypto import KeyBox
from graphsvc.errors import ApiError, bad_request, unauthorized
from graphsvc.logs import audit
from graphsvc.settings import Settings
from graphsvc.store import accounts, graph
from graphsvc.store.db import Database, ping

log = logging.getLogger("graphsvc")
# Password checks run at most this many at a time (the cores of a small machine); a login
# waits this long for its turn.
PASSWORD_CHECKS_AT_ONCE = 2
LOGIN_QUEUE_SECONDS = 2.0
READY_TIMEOUT_SECONDS = 2.0
METRICS_MEDIA_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Context:
    """What the operations (and the parameters they parse) answer from."""

    settings: Settings
    db: Database
    auth: Authenticator
    metrics: Metrics
    openapi: bytes  # the encoded OpenAPI document
    login_failures: RateLimiter  # counted per user name and per address
    password_checks: asyncio.Semaphore  # how many run at once

    @property
    def keys(self) -> KeyBox:
        """The key that seals API token keys at rest: the authenticator's."""
        return self.auth.keys


login_decoder = msgspec.json.Decoder(wire.LoginRequest)


async def log_in(ctx: Context, request: Request) -> Response:
    body = decode_json(login_decoder, await request.body(), "login body")
    async with ctx.db.reading() as conn:
        user = await service.find_login(conn, body)
    address = client_address(request.scope, ctx.settings.trusted_proxies)
    keys = [f"login:user:{body.username}", f"login:address:{address}"]
    await refuse_throttled(ctx.login_failures, keys)
    async with password_check_slot(ctx.password_checks):
        # Again: logins that failed while this one waited count too.
        await refuse_throttled(ctx.login_failures, keys)
        try:
            user = await asyncio.to_thread(service.check_login, user, body.secret)
        except ApiError as exc:
            if exc.status == 401:
                for key in keys:
                    await ctx.login_failures.check(key)
            audit(
                "login.failed",
                f"login as {body.username!r} refused: {exc.message}",
                user=body.username,
                client=address,
                reason=exc.message,
            )
            raise
    lifetime = timedelta(seconds=ctx.settings.jwt_lifetime_seconds)
    async with ctx.db.transaction() as conn:
        reply = await service.open_session(conn, user, ctx.auth.jwt_key, lifetime)
    audit("login", f"user {body.username} logged in", user=body.username, client=address)
    return json_response(reply)


async def refuse_throttled(failures: RateLimiter, keys: list[str]) -> None:
    for key in keys:
        verdict = await failures.peek(key)
        if not verdict.admitted:
            raise too_many_requests(verdict, "failed logins")


@contextlib.asynccontextmanager
async def password_check_slot(slots: asyncio.Semaphore) -> AsyncIterator[None]:
    """Password checks run in a worker thread, a few at a time: each costs about 0.2 s of
    CPU, and on the event loop eight at once took /health from 2 ms to 250 ms. A login that
    gets no slot within LOGIN_QUEUE_SECONDS is a 503."""
    try:
        async with asyncio.timeout(LOGIN_QUEUE_SECONDS):
            await slots.acquire()
    except TimeoutError:
        raise ApiError(
            503, "too many logins at once: retry shortly", "login", {"Retry-After": "1"}
        ) from None
    try:
        yield
    finally:
        slots.release()


async def log_out(ctx: Context, request: Request) -> Response:
    async with ctx.db.transaction() as conn:
        identity = await ctx.auth.authenticate(conn, request)
        if identity.session_id is None or identity.principal is None:
            raise bad_request(
                "logout ends a session: send the session's JWT as Bearer", "Authorization"
            )
        await accounts.delete_session(conn, identity.session_id)
    audit(
        "logout",
        f"user {identity.principal.user_id} logged out",
        user_id=identity.principal.user_id,
    )
    return json_response(wire.LogoutResponse(wire.LogoutData(identity.principal.user_id, True)))


async def check_health(ctx: Context, request: Request) -> Response:
    try:
        async with asyncio.timeout(5), ctx.db.reading() as conn:
            await ping(conn)
    except Exception as exc:
        log.warning("health check: database unreachable: %s", exc)
        raise ApiError(503, "database is unreachable", "database") from None
    return json_response(wire.HealthResponse(wire.HealthData("ok", ctx.db.dialect)))


async def check_readiness(ctx: Context, request: Request) -> Response:
    """Whether this replica can serve: its database answers within READY_TIMEOUT_SECONDS
    (else 503); Redis, when configured, is reported but does not decide, since without it
    the replica still serves, counting its limits alone."""
    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS), ctx.db.reading() as conn:
            await ping(conn)
    except Exception as exc:
        log.warning("readiness: database unreachable: %s", exc)
        raise ApiError(503, "database is unreachable", "database") from None
    redis: Literal["ok", "unreachable", "none"] = "none"
    if ctx.settings.redis_url:
        redis = "ok" if await ctx.login_failures.redis_answers() else "unreachable"
    return json_response(wire.ReadyResponse(wire.ReadyData("ready", ctx.db.dialect, redis)))


async def serve_metrics(ctx: Context, request: Request) -> Response:
    """Prometheus text, if GRAPHSVC_METRICS allows: off by default, since the figures tell
    an outsider about the traffic and the failures; a scraper sends the token as Bearer."""
    if ctx.settings.metrics == "off":
        raise ApiError(404, "metrics are off: set GRAPHSVC_METRICS to open or token", "route")
    if ctx.settings.metrics == "token":
        assert ctx.settings.metrics_token is not None
        expected = f"Bearer {ctx.settings.metrics_token.get_secret_value()}"
        if not hmac.compare_digest(request.headers.get("authorization", ""), expected):
            raise unauthorized(
                "GET /metrics needs 'Authorization: Bearer <GRAPHSVC_METRICS_TOKEN>'"
            )
    async with ctx.db.reading() as conn:
        ctx.metrics.record_ingests(await graph.summarize_ingest_runs(conn))
    return Response(200, ctx.metrics.exposition(), content_type=METRICS_MEDIA_TYPE.encode())


async def serve_openapi(ctx: Context, request: Request) -> Response:
    return Response(200, ctx.openapi)
