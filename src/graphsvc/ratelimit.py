"""Per-client rate limiting before authentication, shared across replicas through Redis.

Two moving windows must both admit a request: at most `rate + burst` in any one second,
and at most `10 * rate` in any ten seconds, so a client gets its rate with a small burst
on top. The counting is the `limits` library's; this module chooses the storage: Redis
when configured, process memory otherwise, and memory for as long as Redis is unreachable.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from limits import RateLimitItem, RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage, RedisStorage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.errors import StorageError
from starlette.types import ASGIApp, Receive, Scope, Send

from graphsvc.responses import error_response

log = logging.getLogger("graphsvc.ratelimit")
REDIS_RETRY_SECONDS = 5.0
SUSTAINED_WINDOW_SECONDS = 10
# How long a Redis call may take before the limiter counts in memory instead.
REDIS_TIMEOUT_SECONDS = 0.5


@dataclass(frozen=True)
class Verdict:
    admitted: bool
    limit: int = 0
    window_seconds: int = 0
    remaining: int = 0
    reset_seconds: int = 0


class RateLimiter:
    def __init__(self, per_second: int, burst: int, redis_url: str | None) -> None:
        self.windows: list[RateLimitItem] = [
            RateLimitItemPerSecond(per_second + burst, 1),
            RateLimitItemPerSecond(per_second * SUSTAINED_WINDOW_SECONDS, SUSTAINED_WINDOW_SECONDS),
        ]
        self.memory = MovingWindowRateLimiter(MemoryStorage())
        self.redis: MovingWindowRateLimiter | None = None
        if redis_url:
            storage = RedisStorage(
                "async+" + redis_url,
                wrap_exceptions=True,
                key_prefix="graphsvc",
                connect_timeout=REDIS_TIMEOUT_SECONDS,
                stream_timeout=REDIS_TIMEOUT_SECONDS,
            )
            self.redis = MovingWindowRateLimiter(storage)
        self.redis_failed_at: float | None = None

    def active(self) -> tuple[MovingWindowRateLimiter, bool]:
        """The limiter to count with now, and whether it is Redis."""
        if self.redis is None:
            return self.memory, False
        failed = self.redis_failed_at
        if failed is not None and time.monotonic() - failed < REDIS_RETRY_SECONDS:
            return self.memory, False
        return self.redis, True

    async def check(self, client: str) -> Verdict:
        limiter, is_redis = self.active()
        try:
            verdict = await self.count(limiter, client)
        except StorageError as exc:
            if self.redis_failed_at is None:
                log.warning("Redis is unreachable (%s): rate limits are per process until it is "
                            "back", exc.storage_error)  # fmt: skip
            self.redis_failed_at = time.monotonic()
            return await self.count(self.memory, client)
        if is_redis and self.redis_failed_at is not None:
            log.warning("Redis is reachable again: rate limits are shared again")
            self.redis_failed_at = None
        return verdict

    async def count(self, limiter: MovingWindowRateLimiter, client: str) -> Verdict:
        for window in self.windows:
            if not await limiter.hit(window, client):
                stats = await limiter.get_window_stats(window, client)
                reset = max(1, math.ceil(stats.reset_time - time.time()))
                return Verdict(False, window.amount, window.get_expiry(), stats.remaining, reset)
        return Verdict(True)


def client_address(scope: Scope, trusted_proxies: int) -> str:
    """The caller's IP: the peer, or with N trusted proxies the address N hops back in
    X-Forwarded-For (anything further left was written by the client and is not trusted)."""
    peer = (scope.get("client") or ("unknown", 0))[0]
    if trusted_proxies <= 0:
        return str(peer)
    forwarded: list[str] = []
    for name, value in scope.get("headers", []):
        if name == b"x-forwarded-for":
            forwarded += [a.strip() for a in value.decode("latin-1").split(",") if a.strip()]
    chain = [*forwarded, str(peer)]
    return chain[max(0, len(chain) - 1 - trusted_proxies)]


class RateLimit:
    """ASGI middleware: every request but /health is counted before anything else runs."""

    def __init__(self, app: ASGIApp, limiter: RateLimiter, trusted_proxies: int) -> None:
        self.app = app
        self.limiter = limiter
        self.trusted_proxies = trusted_proxies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == "/health":
            await self.app(scope, receive, send)
            return
        verdict = await self.limiter.check(client_address(scope, self.trusted_proxies))
        if verdict.admitted:
            await self.app(scope, receive, send)
            return
        request_id = str(scope.get("state", {}).get("request_id", ""))
        response = error_response(
            request_id,
            429,
            f"too many requests: at most {verdict.limit} in {verdict.window_seconds} s; "
            f"retry after {verdict.reset_seconds} s",
            "rate_limit",
            {
                "Retry-After": str(verdict.reset_seconds),
                "RateLimit-Limit": str(verdict.limit),
                "RateLimit-Remaining": str(verdict.remaining),
                "RateLimit-Reset": str(verdict.reset_seconds),
            },
        )
        await response(scope, receive, send)
