"""Prometheus metrics of the server (prometheus_client, a registry per app): requests by
operation and status, their latency, rate-limit refusals, authentication failures by reason,
database connections in use, answers from memory, and whether Redis has been given up for
memory.

Under `serve --workers N` every worker counts into files of a folder the supervisor makes
(prometheus_client's multiprocess mode, `shared_metrics_folder`), and a scrape, whichever
worker answers it, reads them all: counts are the server's, not one worker's."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
    multiprocess,
    values,
)

from graphsvc.store.graph import IngestSummary

# prometheus_client's own variable: where a process's counts are kept in multiprocess mode.
SHARED_FOLDER_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"

if TYPE_CHECKING:
    from graphsvc.api.answers import AnswerCache
    from graphsvc.api.ratelimit import RateLimiter
    from graphsvc.store.db import Database


class Metrics:
    def __init__(
        self, db: Database, limiter: RateLimiter | None, answers: AnswerCache, counting: bool
    ) -> None:
        # Off (GRAPHSVC_METRICS=off), nothing can read the counts: requests do not pay for
        # them (the counter and histogram under their locks were 2% of a warm answer).
        self.counting = counting
        self.registry = CollectorRegistry()
        self.shared_folder = os.environ.get(SHARED_FOLDER_VARIABLE)
        # The values of this process's gauges, set as requests are answered (a worker's
        # gauges are read from its files, not asked of it at the scrape).
        self.gauges: list[tuple[Gauge, Callable[[], float]]] = []
        self.scrape_registry = self.registry
        if self.shared_folder is not None:
            values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
            self.scrape_registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(self.scrape_registry, path=self.shared_folder)  # type: ignore[no-untyped-call]
        else:
            # The process's own memory, CPU, open files and start time (one worker's would
            # mislead under `--workers`: not shown there).
            ProcessCollector(registry=self.registry)
        self.requests = Counter(
            "graphsvc_requests",
            "Requests answered, by operation and status",
            ["operation", "status"],
            registry=self.registry,
        )
        # The labelled children by (operation, status): labels() takes a lock and builds a
        # key each time, a third of what counting a request cost.
        self.answered: dict[tuple[str, int], tuple[Any, Any]] = {}
        self.latency = Histogram(
            "graphsvc_request_duration_seconds",
            "Time from a request's arrival to its answer, by operation",
            ["operation"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.rate_limited = Counter(
            "graphsvc_rate_limited", "Requests refused by the rate limit", registry=self.registry
        )
        self.auth_failures = Counter(
            "graphsvc_auth_failures",
            "Requests refused for their credentials (401) or permissions (403), by error code",
            ["reason"],
            registry=self.registry,
        )
        self.gauge(
            "graphsvc_db_connections_in_use",
            "Database connections in use",
            db.connections_in_use,
            "livesum",
        )
        lookups = Counter(
            "graphsvc_answer_cache_lookups",
            "Reads that could be answered from memory, by whether they were (hit) or not (miss)",
            ["result"],
            registry=self.registry,
        )
        self.answer_lookups = {True: lookups.labels("hit"), False: lookups.labels("miss")}
        self.gauge(
            "graphsvc_answer_cache_bytes",
            "Memory the answers kept take (each process's counted against its cap)",
            lambda: answers.size,
            "livesum",
        )
        self.gauge(
            "graphsvc_redis_fallback",
            "1 while Redis does not answer and limits are counted in a process",
            lambda: int(limiter is not None and limiter.redis_failing()),
            "livemax",
        )

        self.ingest_runs = Gauge(
            "graphsvc_ingest_runs",
            "Collection runs ingested into the store (by any process)",
            registry=self.registry,
            multiprocess_mode="mostrecent",
        )
        self.last_ingest_time = Gauge(
            "graphsvc_last_ingest_timestamp_seconds",
            "When the newest run was collected (Unix time)",
            registry=self.registry,
            multiprocess_mode="mostrecent",
        )
        self.last_ingest_objects = Gauge(
            "graphsvc_last_ingest_objects",
            "What the newest run stored: its collected nodes and its edges",
            ["type"],
            registry=self.registry,
            multiprocess_mode="mostrecent",
        )
        self.last_ingest_duration = Gauge(
            "graphsvc_last_ingest_duration_seconds",
            "How long the newest run took to load",
            registry=self.registry,
            multiprocess_mode="mostrecent",
        )

    def gauge(
        self,
        name: str,
        text: str,
        value: Callable[[], float],
        shared_mode: Literal["livesum", "livemax"],
    ) -> None:
        """A gauge of this process's state: asked at each scrape, or under `--workers` set
        as requests are answered and combined over the live workers (`shared_mode`)."""
        gauge = Gauge(name, text, registry=self.registry, multiprocess_mode=shared_mode)
        if self.shared_folder is None:
            gauge.set_function(value)
        else:
            gauge.set(value())
            self.gauges.append((gauge, value))

    def record_ingests(self, summary: IngestSummary) -> None:
        """Runs are made by `graphsvc ingest` processes: read from the store at each scrape."""
        self.ingest_runs.set(summary.runs)
        if summary.last_at is not None:
            self.last_ingest_time.set(summary.last_at.timestamp())
        self.last_ingest_objects.labels("nodes").set(summary.last_nodes)
        self.last_ingest_objects.labels("edges").set(summary.last_edges)
        self.last_ingest_duration.set(summary.last_seconds)

    def observe(self, operation: str, status: int, seconds: float, error_code: str | None) -> None:
        """Count an answer; a refused credential or permission by its error's code."""
        if not self.counting:
            return
        counted = self.answered.get((operation, status))
        if counted is None:
            counted = self.answered[(operation, status)] = (
                self.requests.labels(operation, str(status)),
                self.latency.labels(operation),
            )
        counted[0].inc()
        counted[1].observe(seconds)
        for gauge, value in self.gauges:
            gauge.set(value())
        if status == 429:
            self.rate_limited.inc()
        elif status in (401, 403) and error_code is not None:
            self.auth_failures.labels(error_code).inc()

    def count_answer_lookup(self, hit: bool) -> None:
        """A read that could be answered from memory, by whether it was."""
        if self.counting:
            self.answer_lookups[hit].inc()

    def exposition(self) -> bytes:
        for gauge, value in self.gauges:
            gauge.set(value())
        return generate_latest(self.scrape_registry)


@contextlib.contextmanager
def shared_metrics_folder() -> Iterator[Callable[[int], None]]:
    """For `serve --workers N`: a folder of the supervisor's own (mode 0700) where every
    worker it forks counts, removed when they are all done; gives what to call with a dead
    worker's pid (its gauges no longer count)."""
    folder = tempfile.mkdtemp(prefix="graphsvc-metrics-")
    os.environ[SHARED_FOLDER_VARIABLE] = folder
    try:
        yield lambda pid: multiprocess.mark_process_dead(pid, folder)  # type: ignore[no-untyped-call]
    finally:
        os.environ.pop(SHARED_FOLDER_VARIABLE, None)
        shutil.rmtree(folder, ignore_errors=True)
