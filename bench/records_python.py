"""The Python a SharpHound document's records cost, without the store: parsed records through
the format's reader into the writer's batches, which are dropped instead of stored.

    python bench/records_python.py DOCUMENT TYPE [--runs 5]

DOCUMENT is one SharpHound JSON file (a `data` array), TYPE its `meta.type` (users,
computers, groups...). Its records are parsed (ijson) before the clock starts; then each run
reads them all through `sharphound.ingest_objects` and the `GraphWriter`'s batching (edges
merged by start, kind and end), and prints its CPU seconds and the edges it gave. Run it under
another PYTHONPATH to time another version: the step of an ingest that the store's timings
(`ingest_phases.py`) leave out, measured alone, where a whole ingest's noise hides it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ijson


async def read_records(records: list[Any]) -> AsyncIterator[tuple[int, Any]]:
    for numbered in enumerate(records):
        yield numbered


async def one_run(records: list[Any], meta_type: str, label: str) -> tuple[float, int]:
    # Imported here, under whichever PYTHONPATH the caller chose.
    from graphsvc.ingest import sharphound
    from graphsvc.ingest.writer import GraphWriter

    # A first ingest's writer: no earlier run collected a node (older versions' writers
    # took no such argument).
    takes_older = "older_collections" in inspect.signature(GraphWriter).parameters
    writer = GraphWriter(None, 1, datetime.now(UTC), *((False,) if takes_older else ()))  # type: ignore[arg-type]
    edges = 0

    async def drop_batch(*batch: Any) -> None:
        nonlocal edges
        edges += len(batch[-1])  # the edges come last in every version's store_batch

    writer.store_batch = drop_batch  # type: ignore[method-assign, assignment]
    # Versions before the facts were read took no collection methods.
    takes_methods = len(inspect.signature(sharphound.ingest_objects).parameters) == 5
    arguments = (None,) if takes_methods else ()
    started = time.process_time()
    await sharphound.ingest_objects(meta_type, read_records(records), label, writer, *arguments)
    await writer.write_batch()
    return time.process_time() - started, edges


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("document", type=Path)
    parser.add_argument("type", help="the document's meta.type: users, computers, groups...")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    try:
        with args.document.open("rb") as stream:
            records = list(ijson.items(stream, "data.item", use_float=True))
    except (OSError, ijson.JSONError) as exc:
        parser.error(f"cannot read {args.document}'s records: {exc}")
    gc.disable()  # as `graphsvc ingest` runs (ingest/run.py: cyclic_collector_paused)
    for _ in range(args.runs):
        seconds, edges = asyncio.run(one_run(records, args.type, str(args.document)))
        print(f"{seconds:.2f} s of CPU, {edges:,} edges")


if __name__ == "__main__":
    main()
