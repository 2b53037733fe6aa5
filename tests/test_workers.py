"""`graphsvc serve --workers N`: several processes on one port, one rate limit (in Redis)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.conftest import free_port, served, server_environment, wait_until

RATE, BURST = 20, 5


def children_of(pid: int) -> list[int]:
    found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in found]


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_two_workers_share_one_port_and_one_rate_limit(
    database_url: str, redis_url: str, tmp_path: Path
) -> None:
    environment = server_environment(
        database_url,
        tmp_path,
        redis_url=redis_url,
        rate_limit_per_second=str(RATE),
        rate_limit_burst=str(BURST),
        metrics="open",
    )
    with served(environment, "--workers", "2") as (base, process):
        workers = children_of(process.pid)
        assert len(workers) == 2
        # Each scrape on a new connection, answered by either worker, sees the scrapes both
        # answered: the counts rise (a worker's own would go 1, 0, 2, 1...).
        scrapes = 'graphsvc_requests_total{operation="Metrics",status="200"}'
        seen = [metric(base, scrapes) or 0.0 for _ in range(40)]
        assert seen == sorted(seen) and seen[-1] >= 38, seen
        scraped_by = {metric(base, "process_start_time_seconds") for _ in range(10)}
        assert scraped_by == {None}, "no one worker's process figures, under --workers"

        # Nothing so far counted against the limit (/health and /metrics are not limited):
        # the burst meets empty windows.

        def send(i: int) -> int:
            # A connection of its own each: the kernel hands it to either worker.
            return httpx.get(f"{base}/api/v2/self", timeout=10).status_code

        started = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            statuses = list(pool.map(send, range(200)))
        elapsed = time.monotonic() - started
        admitted = sum(s != 429 for s in statuses)  # 401s: admitted, then unauthenticated
        seconds = max(1, math.ceil(elapsed))
        # One limit across both workers: per worker, twice as many would get through.
        assert RATE + BURST <= admitted <= (RATE + BURST) * seconds, (admitted, elapsed)
        assert admitted < 2 * (RATE + BURST) * elapsed, (admitted, elapsed)
        # Every request counted once, whichever worker answered it and the scrape.
        scrape = httpx.get(f"{base}/metrics", timeout=5).text
        answered = [
            float(line.rsplit(" ", 1)[1])
            for line in scrape.splitlines()
            if line.startswith("graphsvc_requests_total{")
            and ('status="401"' in line or 'status="429"' in line)
        ]
        assert sum(answered) == 200, answered
        assert metric(base, "graphsvc_rate_limited_total") == 200 - admitted

        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        assert not any(Path(f"/proc/{pid}").exists() for pid in workers)


def metric(base: str, name: str) -> float | None:
    """One sample's value in a scrape of /metrics (None: not there)."""
    scrape = httpx.get(f"{base}/metrics", timeout=5).text
    found = [line.rsplit(" ", 1)[1] for line in scrape.splitlines() if line.startswith(name + " ")]
    return float(found[0]) if found else None


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_several_workers_without_redis_are_refused_while_limits_are_on(
    database_url: str, tmp_path: Path
) -> None:
    environment = server_environment(database_url, tmp_path, rate_limit_per_second="55")
    refused = subprocess.run(
        [sys.executable, "-m", "graphsvc", "serve", "--port", str(free_port()), "--workers", "2"],
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1
    assert "set GRAPHSVC_REDIS_URL" in refused.stderr and refused.stderr.count("\n") == 1
    wrong = subprocess.run(
        [sys.executable, "-m", "graphsvc", "serve", "--workers", "many"],
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrong.returncode == 1 and "--workers 'many' must be a number" in wrong.stderr


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_worker_that_dies_is_replaced(database_url: str, tmp_path: Path) -> None:
    environment = server_environment(
        database_url, tmp_path, rate_limit_per_second="0", log_level="info", log_format="json"
    )
    with served(environment, "--workers", "2") as (base, process):
        first, second = children_of(process.pid)
        os.kill(first, signal.SIGKILL)

        def replaced() -> list[int] | None:
            now = children_of(process.pid)
            return now if len(now) == 2 and first not in now else None

        now = wait_until(replaced, timeout=20, what="the killed worker to be replaced")
        assert second in now
        (third,) = set(now) - {second}
        for _ in range(10):
            assert httpx.get(f"{base}/health", timeout=5).status_code == 200
    # Every line names its process, and a worker's its number, which the replacement takes
    # over from the worker it replaces (each worker says so as it starts: the requests
    # above may all have gone to one).
    lines = [json.loads(line) for line in process.stderr.read().decode().splitlines()]  # type: ignore[union-attr]
    exited = next(r for r in lines if " exited " in str(r["message"]))
    assert exited["pid"] == process.pid and "worker" not in exited
    number = int(str(exited["message"]).split()[1])
    assert f"(pid {first}) exited" in str(exited["message"])
    numbers = {r["pid"]: r.get("worker") for r in lines if r["pid"] != process.pid}
    assert numbers.get(third) == number and numbers.get(second) == 3 - number, numbers
