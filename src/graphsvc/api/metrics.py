"""Prometheus metrics of one server process (prometheus_client, a registry per app): requests
by operation and status, their latency, rate-limit refusals, authentication failures by
reason, database connections in use, answers from memory, and whether Redis has been given up
for memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)

from graphsvc.store.graph import IngestSummary

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
        # The process's own memory, CPU, open files and start time: per worker, under
        # `serve --workers N`, whose scrapes each reach one worker.
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
        pool = Gauge(
            "graphsvc_db_connections_in_use",
            "Database connections of this process in use",
            registry=self.registry,
        )
        pool.set_function(db.connections_in_use)
        lookups = Counter(
            "graphsvc_answer_cache_lookups",
            "Reads that could be answered from memory, by whether they were (hit) or not (miss)",
            ["result"],
            registry=self.registry,
        )
        self.answer_lookups = {True: lookups.labels("hit"), False: lookups.labels("miss")}
        kept = Gauge(
            "graphsvc_answer_cache_bytes",
            "Memory the answers kept in this process take, as counted against its cap",
            registry=self.registry,
        )
        kept.set_function(lambda: answers.size)
        fallback = Gauge(
            "graphsvc_redis_fallback",
            "1 while Redis does not answer and limits are counted in this process",
            registry=self.registry,
        )
        fallback.set_function(lambda: int(limiter is not None and limiter.redis_failing()))

        self.ingest_runs = Gauge(
            "graphsvc_ingest_runs",
            "Collection runs ingested into the store (by any process)",
            registry=self.registry,
        )
        self.last_ingest_time = Gauge(
            "graphsvc_last_ingest_timestamp_seconds",
            "When the newest run was collected (Unix time)",
            registry=self.registry,
        )
        self.last_ingest_objects = Gauge(
            "graphsvc_last_ingest_objects",
            "What the newest run stored: its collected nodes and its edges",
            ["type"],
            registry=self.registry,
        )
        self.last_ingest_duration = Gauge(
            "graphsvc_last_ingest_duration_seconds",
            "How long the newest run took to load",
            registry=self.registry,
        )

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
        if status == 429:
            self.rate_limited.inc()
        elif status in (401, 403) and error_code is not None:
            self.auth_failures.labels(error_code).inc()

    def count_answer_lookup(self, hit: bool) -> None:
        """A read that could be answered from memory, by whether it was."""
        if self.counting:
            self.answer_lookups[hit].inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
