"""Loading collector output: one call is one collection run, all or nothing.

Every document is streamed (ijson), never loaded whole: a survey pass that checks its shape
and finds `meta`, then a pass over the records, which the writer stores in batches inside
the caller's transaction. Any error raises IngestError naming the file (and zip entry), and
the transaction rolls back.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ijson

from graphsvc.analysis import analyze
from graphsvc.ingest import azurehound, opengraph, sharphound, statistics
from graphsvc.ingest.lexer import PIECE_BYTES, PieceReader, TokenTooLong, bounded_pieces
from graphsvc.ingest.records import IngestError, lower_keys
from graphsvc.ingest.sources import (
    NO_LIMITS,
    Archives,
    IngestLimits,
    Progress,
    Source,
    expanding,
)
from graphsvc.ingest.survey import Surveyed, survey_source, token_bounds
from graphsvc.ingest.writer import GraphWriter
from graphsvc.store import graph
from graphsvc.store.db import Connection
from graphsvc.store.nodes import EnvironmentNode, list_run_environments
from graphsvc.tags.tagging import tag_graph


@dataclass
class IngestResult:
    run_id: str
    files: list[str]
    nodes: int
    edges: int
    created_at: datetime
    environments: list[EnvironmentNode]  # the domains and tenants it collected
    skipped: dict[str, int]  # records of kinds not read: "AzureHound AZKeyVaultOwner" -> count
    skipped_by_source: dict[str, dict[str, int]]  # the same, per document (its label)


def reader(source: Source, progress: Progress | None, surveyed: Surveyed) -> opengraph.Reader:
    """Streams the items under one JSON prefix of a source, numbered, as (index, item).

    The parser lexes a token that spans the pieces it is given again at each piece, so a
    token must span few. A document the fast pass vouched for has none of more than
    MAX_VALUE_BYTES (1 MiB): read in pieces of 64 KiB, the fastest to parse, such a token is
    lexed 8 times on average, and 100 MiB of them (escapes, the slowest to lex) ingest in
    6.5 s, 65 ms a MiB, as before the lexer (the benchmark's 50 MB collection: 79 ms a MiB).
    The lexer is not run again on these: it would add 0.10 s to the 0.19 s of the records
    of that collection's 34 MB users file. A document only the exact survey vouched for may
    hold values of 12 MiB: it is read through the lexer, which hands the parser each token
    whole. The event loop gets a turn at each piece: a stop lands there."""

    async def read(prefix: str) -> AsyncIterator[tuple[int, Any]]:
        # Only the record passes report progress, so each byte is counted once.
        counting = progress if prefix.endswith(".item") else None
        with source.open(counting) as stream:
            pieces = (
                iter(functools.partial(stream.read, PIECE_BYTES), b"")
                if surveyed.fast
                else bounded_pieces(stream, token_bounds())
            )
            i = 0
            try:
                async for item in ijson.items_async(PieceReader(pieces), prefix, use_float=True):
                    yield i, item
                    i += 1
            except ijson.JSONError as exc:
                raise IngestError(source.label, f"not valid JSON ({json_error(exc)})") from None
            except TokenTooLong as exc:
                raise IngestError(source.label, str(exc)) from None

    return read


def json_error(exc: Exception) -> str:
    """The parser's first line of explanation (yajl reports it as bytes)."""
    raw = exc.args[0] if exc.args else ""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    lines = [line.strip() for line in text.strip().splitlines()]
    return lines[0] if lines and lines[0] else "the document ends too early"


async def ingest_source(source: Source, writer: GraphWriter, progress: Progress | None) -> None:
    """Store one document, of whichever format it is."""
    try:
        surveyed = await survey_source(source.open, source.label)
    except ijson.JSONError as exc:
        raise IngestError(source.label, f"not valid JSON ({json_error(exc)})") from None
    read = reader(source, progress, surveyed)
    if surveyed.meta is None:
        await opengraph.ingest(read, source.label, writer)
        return
    meta = lower_keys(surveyed.meta)
    kind = meta.get("type") if isinstance(meta, dict) else None
    if not isinstance(kind, str):
        raise IngestError(source.label, "must be an object with a string 'type'", "meta")
    kind = kind.lower()
    if kind == "azure":
        await azurehound.ingest(read("data.item"), source.label, writer)
        return
    if kind not in sharphound.TYPES:
        raise IngestError(
            source.label,
            f"unknown type {meta['type']!r}; expected azure or one "
            f"of {', '.join(sharphound.TYPES)}",
            "meta.type",
        )
    methods = meta.get("methods")
    await sharphound.ingest(
        kind,
        read("data.item"),
        source.label,
        writer,
        methods if isinstance(methods, int) and not isinstance(methods, bool) else None,
    )


@contextlib.contextmanager
def cyclic_collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused, for `graphsvc ingest`.

    Parsing allocates millions of containers, and each allocation count past a threshold
    ran a collection over every object alive, the run's pending batches included: on a 96
    MB collection (SQLite), 9.4 s with the collector and 7.4 s without, peak memory 88.8 and
    92.8 MB. Parsed JSON holds no cycles; the whole run left 15,567 objects for the
    collector, collected once it runs again. Not for `serve`'s ingester: requests answered
    meanwhile would keep their cyclic garbage (an error answer's exception and frame, for
    one) for as long as the ingest lasts."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


async def ingest_files(
    conn: Connection,
    paths: Sequence[Path],
    progress: Callable[[Source], Progress] | None = None,
    now: datetime | None = None,
    names: Mapping[Path, str] | None = None,
    limits: IngestLimits = NO_LIMITS,
    citrix_rdp_support: bool = False,
    cache_mb: int = 0,
) -> IngestResult:
    """Ingest files, folders and zips as one run in the caller's transaction; `now` is the
    run's time and its documents' collection time (when loading history); without it, a
    document's collection time is the one it states (Source.collection_time), else the
    run's. A file is named by its name in `names`, if there (an upload job's files, written
    under other names), else by its path. Input past `limits` is refused before anything is
    written. The analysis that ends it takes `citrix_rdp_support`, and SQLite's page cache is
    `cache_mb` MiB while it runs (the settings of those names)."""
    async with graph.page_cache(conn, cache_mb):
        return await ingest_run(conn, paths, progress, now, names, limits, citrix_rdp_support)


async def ingest_run(
    conn: Connection,
    paths: Sequence[Path],
    progress: Callable[[Source], Progress] | None,
    now: datetime | None,
    names: Mapping[Path, str] | None,
    limits: IngestLimits,
    citrix_rdp_support: bool,
) -> IngestResult:
    started = time.monotonic()
    given = now
    run_id, now = str(uuid.uuid4()), now or datetime.now(UTC)
    run_number = await graph.next_run_number(conn)
    writer = GraphWriter(conn, run_number, now, await graph.any_collected(conn))
    with Archives() as archives:
        sources = []
        for source in expanding(list(paths), archives, names, limits):
            sources.append(source)
            if len(sources) % 1000 == 0:  # 17 ms of listing a zip's entries
                await asyncio.sleep(0)  # a turn for the event loop: a stop lands here
        for source in sources:
            writer.source = source.label
            writer.seen = given or source.collection_time() or now
            await ingest_source(source, writer, progress(source) if progress else None)
    await writer.finish()
    derived = await analyze(conn, run_number, now, citrix_rdp_support)
    await tag_graph(conn, now)
    nodes, collected = await graph.count_run(conn, run_number)
    edges = collected + derived  # what the run collected and what its analysis left
    labels = [s.label for s in sources]
    seconds = time.monotonic() - started
    await graph.insert_ingest_run(conn, run_id, run_number, labels, nodes, edges, now, seconds)
    await statistics.record_run_statistics(conn, run_id, run_number, now)
    await graph.refresh_statistics_after(conn, nodes + edges)
    environments = await list_run_environments(conn, run_number)
    return IngestResult(
        run_id,
        labels,
        nodes,
        edges,
        now,
        environments,
        dict(sorted(writer.skipped.items())),
        {label: dict(sorted(found.items())) for label, found in writer.skipped_by_source.items()},
    )
