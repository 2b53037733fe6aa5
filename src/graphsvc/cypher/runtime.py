"""What one run of a query carries: the graph, the request's parameters, and the bounds it
runs under (its deadline, whether its request was cancelled, the caps on rows, paths and
memory).

A query runs in a thread of its own, so that the server keeps answering while it computes
(first on the event loop for at most INLINE_BUDGET_SECONDS: most queries end sooner, and
save the hand-off; one that does not is run again in the thread); the thread cannot be
interrupted, so the executor calls `tick` in every loop, which stops it once its request is
gone (its client left, or the request's `Prefer` wait passed: the
request then answers as every timed-out request does), or once the process has grown by
more than the memory cap since the query started.

The memory a query holds is read as the process's resident memory (Linux's
/proc/<pid>/statm, 7 us a read, once a tick: about 2% of a query's time), not estimated from
the values it builds: what a list, a string or a row costs varies too much for an estimate
to bound it. A query running beside another is charged with the other's growth too; CPython
seldom gives memory back, so the growth is the query's peak, less what it reused.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar

from graphsvc.cypher.errors import query_error
from graphsvc.cypher.graph import QueryGraph
from graphsvc.errors import ApiError

T = TypeVar("T")
TICK_EVERY = 1024  # steps between two looks at the clock: about 0.3 ms of work
# A query is first run on the event loop, for this long at most: the hand-off to a thread
# and back (about 0.1 ms, 0.25 on a busy machine) was most of a small query's time, as it
# was of a statement's (store/sqlite.py reads first run on the loop too).
INLINE_BUDGET_SECONDS = 0.001
# On the event loop, a pass over more values at once than this (an array of nodes or
# relationships, a list built whole), which no tick can interrupt, ends the attempt there
# before it begins: about 0.3 ms of numpy.
INLINE_ELEMENTS = 100_000


@dataclass(frozen=True)
class Caps:
    """The most a query may build (settings: cypher_max_rows, cypher_max_paths,
    cypher_max_memory_mb)."""

    rows: int
    paths: int
    memory_bytes: int


@functools.cache
def statm(pid: int) -> int:
    """The process's /proc statm, opened once a process (a forked worker opens its own)."""
    return os.open(f"/proc/{pid}/statm", os.O_RDONLY)


def resident_bytes() -> int | None:
    """The process's resident memory; None where there is no /proc (not Linux)."""
    try:
        fields = os.pread(statm(os.getpid()), 64, 0).split()
    except OSError:
        return None
    return int(fields[1]) * PAGE_BYTES


PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class InlineBudgetSpent(Exception):
    """A run on the event loop went past its budget: it is run again, from the start, in a
    thread of its own."""


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
    next_look: int = TICK_EVERY
    resident_at_start: int | None = field(default_factory=resident_bytes)
    inline_until: float | None = None  # run on the event loop: until this perf_counter()
    # A query run without a request to cancel it (a tag's seed at the end of an ingest):
    # stopped past this time.monotonic().
    deadline: float | None = None

    def tick(self, weight: int = 1) -> None:
        """One step of work; or `weight` steps, for a value built at once (a list of that
        many items, a string of eight times that many characters), so that a query building
        large values is looked at as often as its work calls for."""
        self.steps += weight
        if self.steps < self.next_look:
            return
        self.next_look = self.steps + TICK_EVERY
        if self.inline_until is not None and time.perf_counter() > self.inline_until:
            raise InlineBudgetSpent
        if self.cancelled.is_set():
            raise Stopped
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise query_error(None, "the query ran past its time", "cypher_deadline", 408)
        if self.resident_at_start is not None:
            grown = (resident_bytes() or 0) - self.resident_at_start
            if grown > self.caps.memory_bytes:
                raise self.too_much_memory()

    def heavy(self, values: int) -> None:
        """Before a pass over `values` values at once, which no tick interrupts: on the event
        loop, one past INLINE_ELEMENTS ends the attempt there (the thread runs it)."""
        if self.inline_until is not None and values > INLINE_ELEMENTS:
            raise InlineBudgetSpent

    def built(self, value: T) -> T:
        """A list or string the query just built, counted by its size (see `tick`)."""
        if isinstance(value, list):
            self.tick(len(value) + 1)
        elif isinstance(value, str):
            self.tick(len(value) // 8 + 1)
        return value

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

    def too_much_memory(self) -> ApiError:
        return query_error(
            None,
            f"the query grew the server's memory by more than "
            f"{self.caps.memory_bytes // 2**20} MiB (the cypher_max_memory_mb cap): return "
            "fewer or smaller values (count() rather than collect(), say), narrow it with "
            "WHERE, or end it with LIMIT",
            "cypher_memory_cap",
            413,
        )
