"""The probes and documents served without credentials: health, readiness, the Prometheus
metrics and the OpenAPI document."""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import Literal

from graphsvc import wire
from graphsvc.api.context import Context
from graphsvc.api.web import Request, Response, json_response
from graphsvc.errors import ApiError, unauthorized
from graphsvc.store import graph
from graphsvc.store.db import ping

log = logging.getLogger("graphsvc")
READY_TIMEOUT_SECONDS = 2.0
METRICS_MEDIA_TYPE = "text/plain; version=0.0.4; charset=utf-8"


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
        redis = "ok" if await ctx.login_failures.find_redis_problem() is None else "unreachable"
    return json_response(wire.ReadyResponse(wire.ReadyData("ready", ctx.db.dialect, redis)))


async def serve_metrics(ctx: Context, request: Request) -> Response:
    """Prometheus text, if GRAPHSVC_METRICS allows: off by default, since the figures tell
    an outsider about the traffic and the failures; a scraper sends the token as Bearer."""
    if ctx.settings.metrics == "off":
        raise ApiError(404, "metrics are off: set GRAPHSVC_METRICS to open or token", "route")
    if ctx.settings.metrics == "token":
        assert ctx.settings.metrics_token is not None
        expected = f"Bearer {ctx.settings.metrics_token.reveal()}".encode()
        # Compared as the bytes sent (headers are read as latin-1): compare_digest refuses
        # str holding anything but ASCII, and a header may hold any byte.
        sent = request.headers.get("authorization", "").encode("latin-1")
        if not hmac.compare_digest(sent, expected):
            raise unauthorized(
                "GET /metrics needs 'Authorization: Bearer <GRAPHSVC_METRICS_TOKEN>'",
                "metrics_token",
            )
    async with ctx.db.reading() as conn:
        ctx.metrics.record_ingests(await graph.summarize_ingest_runs(conn))
    return Response(200, ctx.metrics.exposition(), content_type=METRICS_MEDIA_TYPE.encode())


async def serve_openapi(ctx: Context, request: Request) -> Response:
    return Response(200, ctx.openapi)
