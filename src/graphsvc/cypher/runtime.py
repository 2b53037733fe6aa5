"""What one run of a query carries: the graph, the request's parameters, and the bounds it
runs under (its deadline, whether its request was cancelled, the caps on rows and paths).

A query runs in a thread of its own, so that the server keeps answering while it computes;
the thread cannot be interrupted, so the executor calls `tick` in every loop, which stops
it once its request is gone (its client left, or the request's `Prefer` wait passed: the
request then answers as every timed-out request does).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from graphsvc.cypher.errors import query_error
from graphsvc.cypher.graph import QueryGraph
from graphsvc.errors import ApiError

TICK_EVERY = 1024  # steps between two looks at the clock: about 0.3 ms of work


@dataclass(frozen=True)
class Caps:
    """The most a query may build (settings: cypher_max_rows, cypher_max_paths)."""

    rows: int
    paths: int


class Stopped(Exception):
    """The query's request was cancelled (its client went away, or its timeout passed
    while it waited): nobody reads its answer."""


@dataclass
class Run:
    graph: QueryGraph
    parameters: dict[str, Any]
    caps: Caps
    started: float = field(default_factory=time.time)  # datetime()'s and timestamp()'s now
    cancelled: threading.Event = field(default_factory=threading.Event)
    steps: int = 0

    def tick(self) -> None:
        self.steps += 1
        if self.steps % TICK_EVERY:
            return
        if self.cancelled.is_set():
            raise Stopped

    def too_many_rows(self) -> ApiError:
        return query_error(
            None,
            f"the query built more than {self.caps.rows} rows (the cypher_max_rows cap): "
            "narrow it with WHERE, or end it with LIMIT",
            "cypher_rows_cap",
            413,
        )

    def too_many_paths(self) -> ApiError:
        return query_error(
            None,
            f"the query found more than {self.caps.paths} paths (the cypher_max_paths cap): "
            "give the path fewer starts or ends, a shorter length (*1..4), or a LIMIT",
            "cypher_paths_cap",
            413,
        )
