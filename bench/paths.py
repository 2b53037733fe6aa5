"""Shortest paths and exposure on the path index, against networkx on the same edges and
recursive SQL on PostgreSQL.

    python bench/paths.py [--sizes 10000 100000 1000000] [--networkx-max 100000]
                          [--pairs 200] [--store-max 1000000] [--postgres URL | --no-postgres]
                          [--sql-pairs 20] [--sql-depth 10] [--sql-timeout 60]
                          [--sql-exposure-timeout 600] [--smoke]

For each size, `ScaleGraph` (bench/shapes.py: an AD-shaped graph of about ten edges a node,
groups nested four deep, ACL edges from groups on every object, sessions and local admins)
gives the edges. The index (graphsvc.graph.path_index) is assembled from them in memory:
its assembly time and its bytes per relationship are reported. Then, on one core:

- shortest paths from random users to random top-level groups (the graph's "admin" groups),
  every shortest path each time: p50 and p99 over `--pairs` pairs;
- exposure: the distance of every node to the top-level groups (one search back from all of
  them), as `GET /api/v2/domains/{id}/exposure` computes it;
- networkx (up to `--networkx-max` nodes): the same pairs with `nx.shortest_path` (one path,
  its bidirectional search) and `nx.all_shortest_paths` (every path, stopped at 1,000), and
  exposure as a multi-source search on the reversed graph, with the graph's build time;
- up to `--store-max` nodes, in each store (a fresh SQLite file, and a fresh PostgreSQL
  database unless `--no-postgres`): the graph bulk loaded (bench/bulk.py: COPY on
  PostgreSQL), the edges' rows fetched alone in the build's chunks (`read_edge_chunks`),
  the index built from the store as the server builds it (`build_index`), and
  that build again under tracemalloc for its peak of allocated memory (numpy's arrays and
  the driver's Python rows; not the database library's own C buffers nor allocator slack),
  per relationship; the exposure of the built index is checked against the one above;
- on PostgreSQL, the recursive SQL a user would write on the `edges` table (PATH_SQL and
  EXPOSURE_SQL below), on one connection with `statement_timeout` (`--sql-timeout` a path,
  `--sql-exposure-timeout` the exposure) and custom plans (`plan_cache_mode`): the length
  of the shortest path for the first `--sql-pairs` pairs, and every node's distance to the
  top-level groups, all its rows fetched. Their answers must equal the index's (up to
  `--sql-depth`, the queries' depth cap), or the benchmark fails.

Writes bench/results/paths.json. Nothing is asserted on speed. `--smoke` (CI): one small
size, a few pairs, PostgreSQL only if it is reachable.

`--trace` measures nothing: on a graph of 2,000 nodes in each store, it prints the
statements of three shortest-path requests as the server runs them (a `PathIndex` following
the store's data version): the first (the index built), one after a write that changed no
graph (the graph's version read), and a warm path miss (an answer not kept, on an index
built for the data version).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import numpy as np
import numpy.typing as npt
from bulk import bulk_insert_graph
from recursive_sql import EXPOSURE_SQL, PATH_SQL
from run import DEFAULT_POSTGRES, drop_postgres_database, postgres_database
from shapes import SCALE_EDGE_KINDS, ScaleGraph

from graphsvc.graph.path_index import (
    Adjacency,
    GraphIndex,
    ObjectIds,
    build_index,
    hashes_of,
    kind_dtype,
    node_dtype,
)
from graphsvc.graph.paths import TRAVERSABLE_KINDS, PathIndex, find_shortest_paths
from graphsvc.store import db as store_db
from graphsvc.store import dialect, postgres, sqlite
from graphsvc.store.db import Connection, asyncpg_dsn, create_database, run_in_transaction
from graphsvc.store.migrate import upgrade_schema
from graphsvc.store.paths import GraphVersion, read_edge_chunks, read_graph_version

T = TypeVar("T")


class Disagreement(Exception):
    """Two ways of computing the same answer gave different ones."""


def assemble(shape: ScaleGraph) -> tuple[GraphIndex, np.ndarray, float, float]:
    """The index of the shape's edges, the edges as an array, generation and assembly time.
    The columns get the types the build from a store gives them (`node_dtype`, `kind_dtype`)."""
    kinds = {name: i + 1 for i, name in enumerate(("Contains", *SCALE_EDGE_KINDS))}
    size = shape.computer_id(shape.computers) + 1
    started = time.perf_counter()
    edges = np.array([(s, e, kinds[k]) for s, e, k in shape.edge_rows()], dtype=np.int64).reshape(
        -1, 3
    )
    starts, ends = (edges[:, i].astype(node_dtype(size)) for i in (0, 1))
    kind_column = edges[:, 2].astype(kind_dtype(max(kinds.values())))
    generated = time.perf_counter() - started
    started = time.perf_counter()
    principals = np.zeros(size, dtype=bool)
    principals[2:] = True
    node_ids = np.arange(1, size, dtype=node_dtype(size))
    index = GraphIndex(
        GraphVersion(0, "", 0),  # never looked at here
        size,
        Adjacency.build(starts, ends, kind_column, size),
        Adjacency.build(ends, starts, kind_column, size),
        kinds,
        principals,
        ObjectIds.build(hashes_of(shape.object_id(int(n)) for n in node_ids), node_ids),
    )
    return index, edges, generated, time.perf_counter() - started


def index_bytes(index: GraphIndex) -> int:
    return sum(
        a.nbytes
        for side in (index.forward, index.backward)
        for a in (side.offsets, side.others, side.kinds)
    )


def object_id_bytes(index: GraphIndex) -> int:
    return index.object_ids.hashes.nbytes + index.object_ids.nodes.nbytes


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def path_length(edges: list[tuple[int, int, int]], start: int, end: int) -> int:
    """The length of the shortest paths whose edges `search` returned (-1: none), counted
    level by level from the start over those edges only."""
    if not edges:
        return -1
    following: dict[int, list[int]] = defaultdict(list)
    for source, target, _ in edges:
        following[source].append(target)
    level, frontier, seen = 0, {start}, {start}
    while frontier:
        if end in frontier:
            return level
        level += 1
        frontier = {t for s in frontier for t in following[s]} - seen
        seen |= frontier
    raise Disagreement(f"the search's edges from {start} do not reach {end}")


def measure_size(nodes: int, args: argparse.Namespace) -> dict[str, Any]:
    shape = ScaleGraph(nodes)
    index, edges, generated, assembled = assemble(shape)
    allowed = index.kind_mask(TRAVERSABLE_KINDS)
    tops = [shape.group_id(g) for g in range((shape.depth - 1) * shape.leaves, shape.groups)]
    rng = np.random.default_rng(7)
    pairs = [
        (shape.user_id(int(rng.integers(shape.users))), tops[int(rng.integers(len(tops)))])
        for _ in range(args.pairs)
    ]
    times, sizes, lengths = [], [], []
    for start, end in pairs:
        began = time.perf_counter()
        found = index.search(start, end, allowed)
        times.append((time.perf_counter() - began) * 1000)
        sizes.append(len(found))
        lengths.append(path_length(found, start, end))
    began = time.perf_counter()
    distance, _, _ = index.distances_to(np.array(tops, dtype=np.int64), allowed)
    exposure = time.perf_counter() - began
    exposed = int((distance > 0).sum())
    result: dict[str, Any] = {
        "nodes": int(index.size - 1),
        "relationships": len(edges),
        "generate_s": round(generated, 2),
        "assemble_s": round(assembled, 2),
        "bytes_per_relationship": round(index_bytes(index) / len(edges), 1),
        "object_id_bytes_per_node": round(object_id_bytes(index) / (index.size - 1), 1),
        "path_p50_ms": round(statistics.median(times), 2),
        "path_p99_ms": round(percentile(times, 0.99), 2),
        "path_edges_median": statistics.median(sizes),
        "path_length_median": statistics.median(lengths),
        "exposure_s": round(exposure, 3),
        "exposed": exposed,
        "exposure_depth_max": int(distance.max()),
    }
    if nodes <= args.networkx_max:
        result |= measure_networkx(edges, index, pairs, tops)
    if nodes > args.store_max:
        return result
    with tempfile.TemporaryDirectory(prefix="graphsvc-paths-") as folder:
        sqlite = f"sqlite:///{Path(folder) / 'paths.sqlite3'}"
        result |= measure_store("sqlite", sqlite, shape, len(edges), tops, exposed)
    if args.postgres:
        url = postgres_database(args.postgres)
        if url is None:
            if not args.smoke:
                raise SystemExit(f"PostgreSQL at {args.postgres} is not reachable (--no-postgres?)")
            return result
        try:
            result |= measure_store("postgresql", url, shape, len(edges), tops, exposed)
            sql = measure_recursive_sql(url, pairs[: args.sql_pairs], lengths, tops, distance, args)
            result |= sql
        finally:
            drop_postgres_database(url)
    return result


def measure_networkx(
    edges: np.ndarray, index: GraphIndex, pairs: list[tuple[int, int]], tops: list[int]
) -> dict[str, Any]:
    import networkx as nx  # type: ignore[import-untyped]

    allowed = index.kind_mask(TRAVERSABLE_KINDS)
    began = time.perf_counter()
    graph = nx.DiGraph()
    graph.add_edges_from((int(s), int(e)) for s, e, k in edges if allowed[k])
    built = time.perf_counter() - began
    one, every = [], []
    for start, end in pairs:
        began = time.perf_counter()
        with contextlib.suppress(nx.NetworkXNoPath):
            nx.shortest_path(graph, start, end)
        one.append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        try:
            for count, _ in enumerate(nx.all_shortest_paths(graph, start, end)):
                if count >= 1000:
                    break
        except nx.NetworkXNoPath:
            pass
        every.append((time.perf_counter() - began) * 1000)
    began = time.perf_counter()
    reverse = graph.reverse(copy=False)
    nx.multi_source_dijkstra_path_length(reverse, set(tops))
    exposure = time.perf_counter() - began
    return {
        "networkx_build_s": round(built, 2),
        "networkx_path_p50_ms": round(statistics.median(one), 2),
        "networkx_path_p99_ms": round(percentile(one, 0.99), 2),
        "networkx_all_paths_p50_ms": round(statistics.median(every), 2),
        "networkx_all_paths_p99_ms": round(percentile(every, 0.99), 2),
        "networkx_exposure_s": round(exposure, 3),
    }


async def build_from_store(conn: Connection) -> GraphIndex:
    """The one call of `build_index`, with the store's version as the server passes it (the
    version's type is being reworked: this is what it takes now)."""
    return await build_index(conn, await read_graph_version(conn))


async def read_edges(conn: Connection) -> int:
    """The edges fetched in the chunks `build_index` reads (rows only, nothing made of them);
    their number."""
    count = 0
    async for chunk in read_edge_chunks(conn):
        count += len(chunk)
    return count


def in_store(url: str, work: Callable[[Connection], Awaitable[T]]) -> tuple[T, float]:
    """`work` on one connection to the store, and its seconds (without opening it)."""

    async def timed(conn: Connection) -> tuple[T, float]:
        began = time.perf_counter()
        answer = await work(conn)
        return answer, time.perf_counter() - began

    return asyncio.run(run_in_transaction(url, timed))


def measure_store(
    store: str, url: str, shape: ScaleGraph, relationships: int, tops: list[int], exposed: int
) -> dict[str, Any]:
    """Bulk load the shape into an empty store; time reading its edges, then the index built
    from it, and the build's peak of allocated memory (a second build, under tracemalloc)."""
    upgrade_schema(url)

    async def load(conn: Connection) -> tuple[int, int]:
        return await bulk_insert_graph(
            conn, shape.node_rows(), shape.edge_rows(), shape.sid, datetime.now(UTC)
        )

    (_, loaded), load_s = in_store(url, load)
    if loaded != relationships:
        raise Disagreement(f"{store}: {loaded} edges loaded, the shape has {relationships}")
    read, read_s = in_store(url, read_edges)  # also warms the caches the build reads through
    if read != relationships:
        raise Disagreement(f"{store}: {read} edges read back, {relationships} loaded")
    built, build_s = in_store(url, build_from_store)
    # Node ids in the store are the shape's (it was empty), so the exposure must be the same.
    distance, _, _ = built.distances_to(
        np.array(tops, dtype=np.int64), built.kind_mask(TRAVERSABLE_KINDS)
    )
    if int((distance > 0).sum()) != exposed:
        raise Disagreement(f"{store}: exposure {int((distance > 0).sum())}, expected {exposed}")
    held = index_bytes(built)
    del built, distance
    tracemalloc.start()
    try:
        in_store(url, build_from_store)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {
        f"{store}_load_s": round(load_s, 1),
        f"{store}_read_s": round(read_s, 2),
        f"{store}_build_s": round(build_s, 2),
        f"{store}_index_bytes_per_relationship": round(held / relationships, 1),
        f"{store}_build_peak_bytes_per_relationship": round(peak / relationships, 1),
    }


def measure_recursive_sql(
    url: str,
    pairs: list[tuple[int, int]],
    lengths: list[int],
    tops: list[int],
    distance: npt.NDArray[np.int32],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """PATH_SQL for each pair and EXPOSURE_SQL once, on one connection; their answers are
    checked against the index's (`lengths` of the pairs' paths, `distance` to the tops)."""

    async def run() -> dict[str, Any]:
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            kinds = await conn.fetch(
                "SELECT id FROM kinds WHERE name = ANY($1::text[])", list(TRAVERSABLE_KINDS)
            )
            kind_ids = [r[0] for r in kinds]
            # asyncpg prepares every statement; from its sixth run PostgreSQL may use a generic
            # plan, which here tests the kind ids as an index condition, one descent of the
            # index for each of the ~100 kinds at every node: 30 s a path instead of 4.5 s at
            # 100,000 nodes. Each path query is planned for its own values instead.
            await conn.execute("SET plan_cache_mode = force_custom_plan")
            await conn.execute(f"SET statement_timeout = {int(args.sql_timeout * 1000)}")
            times: list[float] = []
            for (start, end), length in zip(pairs, lengths, strict=False):
                began = time.perf_counter()
                try:
                    found = await conn.fetchval(PATH_SQL, start, end, args.sql_depth, kind_ids)
                except asyncpg.QueryCanceledError:
                    times.append(math.inf)
                    continue
                times.append((time.perf_counter() - began) * 1000)
                expected = length if 0 <= length <= args.sql_depth else None
                if found != expected:
                    raise Disagreement(
                        f"path {start} -> {end}: recursive SQL {found}, index {length}"
                    )
            await conn.execute(f"SET statement_timeout = {int(args.sql_exposure_timeout * 1000)}")
            began = time.perf_counter()
            try:
                rows = await conn.fetch(EXPOSURE_SQL, tops, args.sql_depth, kind_ids)
            except asyncpg.QueryCanceledError:
                rows = None
            seconds = time.perf_counter() - began
        finally:
            await conn.close()
        result: dict[str, Any] = {
            "sql_depth": args.sql_depth,
            "sql_pairs": len(times),
            "sql_path_timeouts": sum(1 for t in times if t == math.inf),
            "sql_path_p50_ms": finite(statistics.median(times)),
            "sql_path_p99_ms": finite(percentile(times, 0.99)),
            "sql_exposure_s": round(seconds, 2) if rows is not None else None,
        }
        if rows is not None:
            found = np.full(distance.size, -1, dtype=np.int32)
            for node, depth in rows:
                found[node] = depth
            capped = np.where(distance <= args.sql_depth, distance, -1)
            if not np.array_equal(found, capped):
                wrong = int(np.flatnonzero(found != capped)[0])
                raise Disagreement(
                    f"exposure of node {wrong}: recursive SQL {found[wrong]}, "
                    f"index {distance[wrong]}"
                )
            result["sql_exposed"] = int((found > 0).sum())
        return result

    return asyncio.run(run())


def finite(value: float) -> float | None:
    """Milliseconds rounded, or None for a statement that timed out."""
    return round(value, 1) if math.isfinite(value) else None


class StatementLog:
    """While open, every statement run on a pooled connection of either store: the store
    function that asked for it, its connection and its SQL. The connections' methods are
    wrapped for that: SQLite's fetchrow, fetchval and execute run through its fetch."""

    WRAPPED = (
        (sqlite.SQLiteConnection, ("fetch",)),
        (postgres.PostgresConnection, ("fetch", "fetchrow", "fetchval", "execute")),
    )
    # The issuer is the first caller outside these: the connections and the dialect's helpers.
    STORE_MODULES = frozenset(m.__name__ for m in (store_db, dialect, sqlite, postgres))

    def __init__(self) -> None:
        self.statements: list[tuple[str, int, str]] = []

    @contextlib.contextmanager
    def recording(self) -> Iterator[StatementLog]:
        originals = [(c, n, getattr(c, n)) for c, names in self.WRAPPED for n in names]
        for connection_class, name, original in originals:
            setattr(connection_class, name, self.wrap(original))
        try:
            yield self
        finally:
            for connection_class, name, original in originals:
                setattr(connection_class, name, original)

    def wrap(self, original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def recorded(conn: Any, sql: str, *args: Any) -> Any:
            caller = sys._getframe(1)
            while caller.f_globals["__name__"] in self.STORE_MODULES and caller.f_back:
                caller = caller.f_back
            self.statements.append((caller.f_code.co_qualname, id(conn.raw), " ".join(sql.split())))
            return await original(conn, sql, *args)

        return recorded

    def report(self, title: str) -> None:
        connections = {
            raw: i + 1 for i, raw in enumerate(dict.fromkeys(c for _, c, _ in self.statements))
        }
        print(f"{title}: {len(self.statements)} statement(s) on {len(connections)} connection(s)")
        for issuer, raw, sql in self.statements:
            print(f"  [{connections[raw]}] {issuer}: {sql}")
        self.statements.clear()


def trace(store: str, url: str) -> None:
    """The statements of three path requests on a 2,000-node graph, as the server runs them."""
    shape = ScaleGraph(2_000)
    upgrade_schema(url)

    async def load(conn: Connection) -> tuple[int, int]:
        return await bulk_insert_graph(
            conn, shape.node_rows(), shape.edge_rows(), shape.sid, datetime.now(UTC)
        )

    in_store(url, load)
    top = shape.object_id(shape.group_id(shape.groups - 1))
    users = [shape.object_id(shape.user_id(u)) for u in range(3)]

    async def run(folder: Path) -> None:
        db = create_database(url, pool_size=4)
        await db.open()
        await db.follow_data_version()
        index = PathIndex(db, folder)
        log = StatementLog()

        async def ask(user: str, title: str) -> None:
            with log.recording():
                async with db.reading_on_demand() as conn:  # as the route's handler runs
                    await find_shortest_paths(conn, index, user, top, None)
            log.report(f"{store}, {title}")

        try:
            await ask(users[0], "the first request (the index built)")
            async with db.transaction():  # moves the data version, changes no graph
                pass
            await ask(users[1], "after a write that changed no graph")
            await ask(users[2], "a warm path miss")
        finally:
            await db.close()

    with tempfile.TemporaryDirectory(prefix="graphsvc-paths-") as folder:
        asyncio.run(run(Path(folder) / "index"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--networkx-max", type=int, default=100_000)
    parser.add_argument("--store-max", type=int, default=1_000_000)
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument(
        "--postgres", default=os.environ.get("GRAPHSVC_BENCH_POSTGRES", DEFAULT_POSTGRES)
    )
    parser.add_argument("--no-postgres", dest="postgres", action="store_const", const=None)
    parser.add_argument("--sql-pairs", type=int, default=20, help="pairs for recursive SQL")
    parser.add_argument("--sql-depth", type=int, default=10, help="recursive SQL's depth cap")
    parser.add_argument("--sql-timeout", type=float, default=60, help="seconds a path query")
    parser.add_argument(
        "--sql-exposure-timeout", type=float, default=600, help="seconds the exposure query"
    )
    parser.add_argument("--smoke", action="store_true", help="one small size, a few pairs")
    parser.add_argument("--trace", action="store_true", help="print the statements of requests")
    args = parser.parse_args()
    if args.trace:
        with tempfile.TemporaryDirectory(prefix="graphsvc-paths-") as folder:
            trace("sqlite", f"sqlite:///{Path(folder) / 'paths.sqlite3'}")
        url = postgres_database(args.postgres) if args.postgres else None
        if url is not None:
            try:
                trace("postgresql", url)
            finally:
                drop_postgres_database(url)
        return
    if args.smoke:
        args.sizes, args.pairs, args.sql_pairs = [2_000], 20, 5
    started = time.monotonic()
    results = []
    for nodes in args.sizes:
        result = measure_size(nodes, args)
        results.append(result)
        print(json.dumps(result), flush=True)
    out = Path(__file__).parent / "results" / ("paths-smoke.json" if args.smoke else "paths.json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"{time.monotonic() - started:.0f} s; written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
