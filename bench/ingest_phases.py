"""Where one ingest's time goes: its steps and its SQLite statements, timed in its process.

    python bench/ingest_phases.py COLLECTION [--statements 30]

Runs `graphsvc ingest COLLECTION` in this process on a new SQLite store (in a temporary
folder, or GRAPHSVC_DATABASE_URL if set), with the run's steps (the documents, the analysis,
the tagging, the statistics...) and every statement timed, then prints the seconds of each
step and the statements that took longest, by step, with their count. The settings are read
from the environment as `graphsvc ingest` reads them (GRAPHSVC_INGEST_CACHE_MB...). Run it
under another PYTHONPATH to time another version: the steps it cannot find there are left out.

The statements are timed on the thread that runs them, so a statement's figure includes
nothing of the parsing in between; the steps' figures are wall time, and their sum is the
run's but for the commit (timed as a statement, under "commit") and the process's start.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The run's steps: (module, attribute or Class.method) wrapped, and the name each is
# reported under.
STEPS = (
    ("graphsvc.ingest.run", "ingest_source", "documents"),
    ("graphsvc.ingest.writer", "GraphWriter.finish", "last batch"),
    ("graphsvc.ingest.run", "analyze", "analysis"),
    ("graphsvc.ingest.run", "tag_graph", "tagging"),
    ("graphsvc.ingest.statistics", "record_run_statistics", "statistics"),
    ("graphsvc.store.graph", "count_run", "counting"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("collection", type=Path)
    parser.add_argument("--statements", type=int, default=30, help="how many to list")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="graphsvc-phases-"))
    os.environ.setdefault("GRAPHSVC_DATABASE_URL", f"sqlite:///{work / 'store.sqlite3'}")
    os.environ.setdefault("GRAPHSVC_DATA_DIR", str(work))
    try:
        time_the_ingest(args.collection, args.statements)
    finally:
        shutil.rmtree(work)


def time_the_ingest(collection: Path, listed: int) -> None:
    # Imported here, under whichever PYTHONPATH the caller chose (the module docstring).
    from graphsvc.store import sqlite

    step_seconds: dict[str, float] = defaultdict(float)
    statements: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    current = ["other"]

    def timed_step(name: str, step: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(step)
        async def run(*args: Any, **kwargs: Any) -> Any:
            outer, current[0] = current[0], name
            started = time.monotonic()
            try:
                return await step(*args, **kwargs)
            finally:
                step_seconds[name] += time.monotonic() - started
                current[0] = outer

        return run

    def timed_statement(method: Callable[..., Any]) -> Callable[..., Any]:
        def run(self: Any, sql: str, parameters: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(self, sql, parameters)
            finally:
                text = " ".join(sql.split())
                figures = statements[("commit" if text == "COMMIT" else current[0], text)]
                figures[0] += 1
                figures[1] += time.perf_counter() - started

        return run

    for module_name, attribute, name in STEPS:
        owner: Any = importlib.import_module(module_name)
        *path, last = attribute.split(".")
        for part in path:  # a class's method
            owner = getattr(owner, part, None)
        if hasattr(owner, last):
            setattr(owner, last, timed_step(name, getattr(owner, last)))
    connection: Any = sqlite.SQLiteConnection
    connection._fetch = timed_statement(connection._fetch)
    connection._executemany = timed_statement(connection._executemany)

    from graphsvc.cli import main as graphsvc

    started = time.monotonic()
    sys.argv = ["graphsvc", "ingest", str(collection), "--json"]
    try:
        graphsvc()
    except SystemExit as stop:
        if stop.code:
            raise
    total = time.monotonic() - started
    print(f"\n{total:.1f} s in all", file=sys.stderr)
    for name, seconds in step_seconds.items():
        print(f"{seconds:8.2f} s  {name}", file=sys.stderr)
    print("\nstatements (seconds, count, step):", file=sys.stderr)
    ranked = sorted(statements.items(), key=lambda item: -item[1][1])[:listed]
    for (step, text), (count, seconds) in ranked:
        print(f"{seconds:8.2f} {int(count):6d}  {step:10s} {text[:110]}", file=sys.stderr)


if __name__ == "__main__":
    main()
