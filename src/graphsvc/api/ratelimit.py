"""Per-client rate limiting before authentication, shared across replicas through Redis.

Two moving windows must both admit a request: at most `rate + burst` in any one second,
and at most `10 * rate` in any ten seconds, so a client gets its rate with a small burst
on top. With Redis configured the counting is the `limits` library's moving window, shared
by every replica; without Redis, and for as long as it is unreachable, each process counts
the same windows in its own memory (`MemoryWindows`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from coredis.exceptions import ResponseError
from limits import RateLimitItem, RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.aio.storage import RedisStorage, Storage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.errors import StorageError

from graphsvc.api.web import Scope
from graphsvc.errors import ApiError

log = logging.getLogger("graphsvc.api.ratelimit")
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


ADMITTED = Verdict(True)


class MemoryWindows:
    """The same moving windows counted in this process: per client and window, the times of
    the requests admitted within it (the limits library's memory storage hands work to a
    thread on every request, which costs more than the request)."""

    def __init__(self, windows: list[RateLimitItem]) -> None:
        self.windows = [(w.amount, w.get_expiry()) for w in windows]
        self.longest = max(seconds for _, seconds in self.windows)
        self.hits: dict[str, tuple[deque[float], ...]] = {}
        self.next_sweep = 0.0

    def peek(self, client: str, now: float) -> Verdict:
        """Whether one more would be admitted, counting nothing."""
        for (limit, seconds), times in zip(self.windows, self.hits.get(client, ()), strict=False):
            recent = [t for t in times if t > now - seconds]
            if len(recent) >= limit:
                reset = recent[len(recent) - limit] + seconds - now
                return Verdict(False, limit, seconds, 0, max(1, math.ceil(reset)))
        return ADMITTED

    def record_hit(self, client: str, now: float) -> Verdict:
        queues = self.hits.get(client)
        if queues is None:
            queues = self.hits[client] = tuple(deque() for _ in self.windows)
        for (limit, seconds), times in zip(self.windows, queues, strict=True):
            while times and times[0] <= now - seconds:
                times.popleft()
            if len(times) >= limit:
                reset = times[len(times) - limit] + seconds - now
                return Verdict(False, limit, seconds, 0, max(1, math.ceil(reset)))
        for times in queues:
            times.append(now)
        if now >= self.next_sweep:
            self.forget_idle(now)
        return ADMITTED

    def forget_idle(self, now: float) -> None:
        """Drop clients with no request inside the longest window, so memory stays bounded."""
        idle = [c for c, queues in self.hits.items() if queues[-1][-1] <= now - self.longest]
        for client in idle:
            del self.hits[client]
        self.next_sweep = now + self.longest


def login_failure_windows(per_minute: int) -> list[RateLimitItem]:
    return [RateLimitItemPerMinute(per_minute, 1)]


def request_windows(per_second: int, burst: int) -> list[RateLimitItem]:
    return [
        RateLimitItemPerSecond(per_second + burst, 1),
        RateLimitItemPerSecond(per_second * SUSTAINED_WINDOW_SECONDS, SUSTAINED_WINDOW_SECONDS),
    ]


def connect_redis(url: str) -> RedisStorage:
    """The counters' storage in the Redis at `url` (connected at its first use)."""
    return RedisStorage(
        "async+" + url,
        wrap_exceptions=True,
        key_prefix="graphsvc",
        connect_timeout=REDIS_TIMEOUT_SECONDS,
        stream_timeout=REDIS_TIMEOUT_SECONDS,
    )


async def find_redis_problem(storage: Storage) -> tuple[bool, str] | None:
    """What is wrong with a Redis, if anything: (whether it answered, and what it said or
    why it could not). An answer that is an error (a database index out of range, a wrong
    password) is a configuration to fix; no answer may pass."""
    try:
        async with asyncio.timeout(REDIS_TIMEOUT_SECONDS * 2):
            await storage.get("graphsvc-probe")
    except StorageError as exc:
        answered = isinstance(exc.storage_error, ResponseError)
        return answered, str(exc.storage_error) or type(exc.storage_error).__name__
    except (TimeoutError, OSError) as exc:
        return False, str(exc) or "no answer in time"
    return None


class RateLimiter:
    """Moving windows per key, in Redis when configured (else, or while it is down, in
    this process)."""

    def __init__(self, windows: list[RateLimitItem], redis_url: str | None) -> None:
        self.windows = windows
        self.memory = MemoryWindows(self.windows)
        self.redis: MovingWindowRateLimiter | None = None
        if redis_url:
            self.redis = MovingWindowRateLimiter(connect_redis(redis_url))
        self.redis_failed_at: float | None = None

    async def find_redis_problem(self) -> tuple[bool, str] | None:
        """What is wrong with the configured Redis, if anything (see find_redis_problem)."""
        return None if self.redis is None else await find_redis_problem(self.redis.storage)

    def note_redis_unreachable(self) -> None:
        """Count in memory from now on, as if a request had found Redis silent (and warned)."""
        if self.redis is not None:
            self.redis_failed_at = time.monotonic()

    def redis_failing(self) -> bool:
        """Redis is configured but has stopped answering: limits are counted in memory."""
        return self.redis is not None and self.redis_failed_at is not None

    def redis_usable(self) -> bool:
        failed = self.redis_failed_at
        return failed is None or time.monotonic() - failed >= REDIS_RETRY_SECONDS

    async def record_hit(self, client: str) -> Verdict:
        """Count one more for `client` and judge it."""
        return await self.judge(client, count=True)

    async def peek(self, client: str) -> Verdict:
        """Judge one more for `client` without counting it."""
        return await self.judge(client, count=False)

    def counts_here(self) -> bool:
        """Whether this process counts (no Redis, or one that stopped answering lately)."""
        return self.redis is None or not self.redis_usable()

    def record_hit_in_memory(self, client: str) -> Verdict | None:
        """`record_hit` where this process counts; None where Redis does (an await)."""
        return self.memory.record_hit(client, time.monotonic()) if self.counts_here() else None

    async def judge(self, client: str, count: bool) -> Verdict:
        in_memory = self.memory.record_hit if count else self.memory.peek
        if self.counts_here():
            return in_memory(client, time.monotonic())
        assert self.redis is not None
        try:
            verdict = await self.judge_in_redis(self.redis, client, count)
        except StorageError as exc:
            if self.redis_failed_at is None:
                log.warning(
                    "Redis is unreachable (%s): rate limits are per process until it is back",
                    exc.storage_error,
                )
            self.redis_failed_at = time.monotonic()
            return in_memory(client, time.monotonic())
        if self.redis_failed_at is not None:
            log.warning("Redis is reachable again: rate limits are shared again")
            self.redis_failed_at = None
        return verdict

    async def judge_in_redis(
        self, limiter: MovingWindowRateLimiter, client: str, count: bool
    ) -> Verdict:
        for window in self.windows:
            admitted = await (limiter.hit if count else limiter.test)(window, client)
            if not admitted:
                stats = await limiter.get_window_stats(window, client)
                reset = max(1, math.ceil(stats.reset_time - time.time()))
                return Verdict(False, window.amount, window.get_expiry(), stats.remaining, reset)
        return ADMITTED


def too_many_requests(verdict: Verdict, what: str = "requests") -> ApiError:
    return ApiError(
        429,
        f"too many {what}: at most {verdict.limit} in {verdict.window_seconds} s; "
        f"retry after {verdict.reset_seconds} s",
        "rate_limit",
        {
            "Retry-After": str(verdict.reset_seconds),
            "RateLimit-Limit": str(verdict.limit),
            "RateLimit-Remaining": str(verdict.remaining),
            "RateLimit-Reset": str(verdict.reset_seconds),
        },
        code="rate_limited",
    )


def client_address(scope: Scope, trusted_proxies: int) -> str:
    """The caller's IP: the peer, or with N trusted proxies the address N hops back in
    X-Forwarded-For (anything further left was written by the client and is not trusted)."""
    return forwarded_client(scope.get("headers", []), scope.get("client"), trusted_proxies)


def forwarded_client(
    headers: Iterable[tuple[bytes, bytes]], peer: tuple[str, int] | None, trusted_proxies: int
) -> str:
    """`client_address` from a request's raw headers and its connection's peer."""
    address = str((peer or ("unknown", 0))[0])
    if trusted_proxies <= 0:
        return address
    forwarded: list[str] = []
    for name, value in headers:
        if name == b"x-forwarded-for":
            forwarded += [a.strip() for a in value.decode("latin-1").split(",") if a.strip()]
    chain = [*forwarded, address]
    return chain[max(0, len(chain) - 1 - trusted_proxies)]
