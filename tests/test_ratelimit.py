"""Rate limiting (spec 8, decisions): per client IP, before authentication, JSON 429 with retry
headers, shared through Redis, and per-process while Redis is down."""

from __future__ import annotations

import asyncio
import logging
import math
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import cast

import pytest
from coredis import Redis

from graphsvc.api import ratelimit
from graphsvc.api.app import App
from graphsvc.api.ratelimit import MemoryWindows, RateLimiter, client_address, request_windows
from tests.conftest import REQUIRE_SERVICES, Env, free_port, wait_until

AGG = "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"
EnvFactory = Callable[..., Env]


def limited_env(make_env: EnvFactory, admin: bool = True, **overrides: object) -> Env:
    env = make_env(**{"rate_limit_per_second": 5, "rate_limit_burst": 2, **overrides})
    if admin:
        env.create_admin()
    return env


def burst(env: Env, count: int, headers: dict[str, str] | None = None) -> tuple[list[int], float]:
    started = time.monotonic()
    statuses = [env.get(AGG, headers=headers).status_code for _ in range(count)]
    return statuses, time.monotonic() - started


def admitted_bounds(rate: int, burst_size: int, elapsed: float) -> tuple[int, int]:
    """What the two moving windows allow to a saturating client over `elapsed` seconds."""
    seconds = max(1, math.ceil(elapsed))
    return rate + burst_size, min(rate * 10, (rate + burst_size) * seconds)


def test_burst_of_200_admits_the_configured_number(make_env: EnvFactory) -> None:
    env = make_env(rate_limit_per_second=55, rate_limit_burst=10)
    env.create_admin()
    statuses, elapsed = burst(env, 200)
    admitted = statuses.count(200)
    low, high = admitted_bounds(55, 10, elapsed)
    assert low <= admitted <= high, (admitted, elapsed)
    assert statuses.count(429) == 200 - admitted
    assert statuses[:low] == [200] * low


def test_429_is_the_json_error_body_with_retry_headers(make_env: EnvFactory) -> None:
    env = limited_env(make_env)
    statuses, _ = burst(env, 7)
    assert statuses == [200] * 7
    response = env.get(AGG)
    assert response.status_code == 429
    body = response.json()
    assert body["http_status"] == 429 and body["request_id"] == response.headers["requestid"]
    assert body["errors"][0]["context"] == "rate_limit"
    assert "at most 7 in 1 s" in body["errors"][0]["message"]
    retry_after = int(response.headers["retry-after"])
    assert 1 <= retry_after <= 1
    assert response.headers["ratelimit-limit"] == "7"
    assert response.headers["ratelimit-remaining"] == "0"
    assert int(response.headers["ratelimit-reset"]) == retry_after


def test_waiting_retry_after_is_enough(make_env: EnvFactory) -> None:
    env = limited_env(make_env)
    statuses, _ = burst(env, 10)
    rejected = env.get(AGG)
    assert rejected.status_code == 429 and statuses.count(429) >= 3
    time.sleep(int(rejected.headers["retry-after"]))  # not an event: what is tested
    assert env.get(AGG).status_code == 200


def test_the_ten_second_window_holds_the_average(make_env: EnvFactory) -> None:
    env = limited_env(make_env, rate_limit_per_second=2, rate_limit_burst=2)
    admitted = 0
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        admitted += env.get(AGG).status_code == 200
        time.sleep(0.05)  # not an event: a client's pace, six seconds of it
    # Six seconds at 4 a second would be 24; the ten-second window allows 20 in all.
    assert admitted <= 20
    # Not an event: the one-second window empties as time passes; the ten-second one is
    # still full.
    time.sleep(1.1)
    response = env.get(AGG)
    assert response.status_code == 429 and response.headers["ratelimit-limit"] == "20"


def test_unauthenticated_floods_are_limited_too(make_env: EnvFactory) -> None:
    env = limited_env(make_env)
    statuses = [env.request("GET", AGG).status_code for _ in range(12)]
    assert statuses[:7] == [401] * 7 and statuses[7:] == [429] * 5


def test_health_is_not_limited(make_env: EnvFactory) -> None:
    env = limited_env(make_env)
    burst(env, 10)
    assert env.get(AGG).status_code == 429
    assert all(env.request("GET", "/health").status_code == 200 for _ in range(20))


def test_forwarded_for_is_ignored_without_trusted_proxies(make_env: EnvFactory) -> None:
    env = limited_env(make_env)
    statuses = [
        env.get(AGG, headers={"X-Forwarded-For": f"10.0.0.{i}"}).status_code for i in range(10)
    ]
    assert statuses.count(429) == 3


def test_forwarded_for_from_a_trusted_proxy_separates_clients(make_env: EnvFactory) -> None:
    env = limited_env(make_env, trusted_proxies=1)
    for client in ("10.0.0.1", "10.0.0.2"):
        statuses, _ = burst(env, 7, headers={"X-Forwarded-For": client})
        assert statuses == [200] * 7, client
    assert env.get(AGG, headers={"X-Forwarded-For": "10.0.0.1"}).status_code == 429
    # A client cannot escape by writing its own X-Forwarded-For entries before the proxy's.
    spoofed = env.get(AGG, headers={"X-Forwarded-For": "1.2.3.4, 10.0.0.1"})
    assert spoofed.status_code == 429


@pytest.mark.parametrize(
    ("forwarded", "proxies", "expected"),
    [
        (None, 0, "192.0.2.9"),
        ("203.0.113.5", 0, "192.0.2.9"),
        ("203.0.113.5", 1, "203.0.113.5"),
        ("198.51.100.1, 203.0.113.5", 1, "203.0.113.5"),
        ("198.51.100.1, 203.0.113.5", 2, "198.51.100.1"),
        ("203.0.113.5", 3, "203.0.113.5"),
    ],
)
def test_client_address(forwarded: str | None, proxies: int, expected: str) -> None:
    headers = [(b"x-forwarded-for", forwarded.encode())] if forwarded else []
    scope = {"type": "http", "client": ("192.0.2.9", 5555), "headers": headers}
    assert client_address(scope, proxies) == expected


def memory_windows(per_second: int, burst: int) -> MemoryWindows:
    return RateLimiter(request_windows(per_second, burst), None).memory


def test_memory_windows_admit_rate_plus_burst_in_one_second() -> None:
    windows = memory_windows(5, 2)
    verdicts = [windows.record_hit("a", 100.0 + i * 0.01) for i in range(10)]
    assert [v.admitted for v in verdicts] == [True] * 7 + [False] * 3
    refused = verdicts[7]
    assert (refused.limit, refused.window_seconds, refused.remaining) == (7, 1, 0)
    assert refused.reset_seconds == 1
    assert windows.record_hit("b", 100.1).admitted, "each client counts alone"
    # The first request leaves the one-second window at 101.0; one more is then admitted.
    assert windows.record_hit("a", 101.005).admitted
    assert not windows.record_hit("a", 101.006).admitted


def test_memory_windows_hold_the_ten_second_average() -> None:
    windows = memory_windows(5, 2)
    admitted = sum(windows.record_hit("a", 200.0 + i * 0.05).admitted for i in range(200))
    assert admitted == 50, "ten seconds of rate 5 is 50 requests, however they are spread"
    refused = windows.record_hit("a", 209.99)
    assert (refused.admitted, refused.limit, refused.window_seconds) == (False, 50, 10)
    assert windows.record_hit("a", 210.01).admitted, "the first request has left the window"


def test_memory_windows_forget_idle_clients() -> None:
    windows = memory_windows(5, 2)
    windows.record_hit("idle", 300.0)
    windows.record_hit("busy", 309.0)
    windows.record_hit("busy", 311.0)
    assert set(windows.hits) == {"busy"}


def test_two_apps_share_one_limit_through_redis(make_env: EnvFactory, redis_url: str) -> None:
    first = limited_env(make_env, redis_url=redis_url)
    second = limited_env(make_env, admin=False, redis_url=redis_url)
    second.token = first.token
    statuses = [(first if i % 2 else second).get(AGG).status_code for i in range(14)]
    assert statuses.count(200) == 7 and statuses.count(429) == 7


# --- Redis outage -----------------------------------------------------------------------


class PrivateRedis:
    """A redis-server of the test's own, to stop and start at will."""

    def __init__(self) -> None:
        self.binary = shutil.which("redis-server")
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert self.binary is not None
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
        )

        def answers() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        wait_until(answers, timeout=10, what="the private redis-server to listen")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None

    def keys(self) -> list[bytes]:
        async def read() -> list[bytes]:
            client = Redis(port=self.port)
            return list(await client.keys("*"))

        return asyncio.run(read())


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis()
    if server.binary is None:
        if REQUIRE_SERVICES:
            pytest.fail("redis-server is not installed")
        pytest.skip("redis-server is not installed")
    server.start()
    yield server
    server.stop()


def test_redis_outage_falls_back_and_recovers(
    make_env: EnvFactory,
    private_redis: PrivateRedis,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The limiter tries Redis again this long after it last failed: 5 s, 1 s here.
    monkeypatch.setattr(ratelimit, "REDIS_RETRY_SECONDS", 1.0)
    env = limited_env(
        make_env,
        rate_limit_per_second=50,
        rate_limit_burst=0,
        redis_url=f"redis://127.0.0.1:{private_redis.port}/0",
    )
    assert env.get(AGG).status_code == 200
    assert private_redis.keys(), "counters live in Redis while it is up"

    private_redis.stop()
    with caplog.at_level(logging.WARNING, logger="graphsvc.api.ratelimit"):
        statuses = [env.get(AGG).status_code for _ in range(5)]
    assert statuses == [200] * 5, "the server keeps serving without Redis"
    unreachable = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(unreachable) == 1, "the outage is logged once"

    private_redis.start()
    assert private_redis.keys() == []
    limiter = cast(App, env.client.app).limiter
    assert limiter is not None
    wait_until(limiter.redis_usable, timeout=10, what="the limiter's time to try Redis again")
    with caplog.at_level(logging.WARNING, logger="graphsvc.api.ratelimit"):
        assert env.get(AGG).status_code == 200
    assert private_redis.keys(), "counting returned to Redis"
    assert any("reachable again" in r.getMessage() for r in caplog.records)


def test_a_redis_that_does_not_answer_is_reported_at_start(
    make_env: EnvFactory, caplog: pytest.LogCaptureFixture
) -> None:
    silent = f"redis://127.0.0.1:{free_port()}/0"
    with caplog.at_level(logging.WARNING, logger="graphsvc"):
        env = limited_env(make_env, rate_limit_per_second=50, redis_url=silent)
    assert any("does not answer" in r.getMessage() for r in caplog.records)
    assert env.get(AGG).status_code == 200  # it serves, limiting per process
