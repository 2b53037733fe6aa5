"""Shortest paths and exposure on the path index, against networkx on the same edges.

    python bench/paths.py [--sizes 10000 100000 1000000] [--networkx-max 100000]
                          [--pairs 200] [--store-max 100000] [--smoke]

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
- up to `--store-max` nodes: the graph bulk loaded into SQLite and the index built from the
  store as the server builds it (reading the edges in chunks).

Writes bench/results/paths.json. Nothing is asserted on speed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from bulk import bulk_insert_graph
from shapes import SCALE_EDGE_KINDS, ScaleGraph

from graphsvc.graph.path_index import Adjacency, GraphIndex, build_index
from graphsvc.graph.paths import TRAVERSABLE_KINDS
from graphsvc.store.db import run_in_transaction
from graphsvc.store.migrate import upgrade_schema


def assemble(shape: ScaleGraph) -> tuple[GraphIndex, np.ndarray, float, float]:
    """The index of the shape's edges, the edges as an array, generation and assembly time."""
    kinds = {name: i + 1 for i, name in enumerate(("Contains", *SCALE_EDGE_KINDS))}
    started = time.perf_counter()
    edges = np.array([(s, e, kinds[k]) for s, e, k in shape.edge_rows()], dtype=np.int64).reshape(
        -1, 3
    )
    generated = time.perf_counter() - started
    size = shape.computer_id(shape.computers) + 1
    started = time.perf_counter()
    principals = np.zeros(size, dtype=bool)
    principals[2:] = True
    index = GraphIndex(
        0,
        size,
        Adjacency.build(edges[:, 0], edges[:, 1], edges[:, 2], size),
        Adjacency.build(edges[:, 1], edges[:, 0], edges[:, 2], size),
        kinds,
        principals,
    )
    return index, edges, generated, time.perf_counter() - started


def index_bytes(index: GraphIndex) -> int:
    return sum(
        a.nbytes
        for side in (index.forward, index.backward)
        for a in (side.offsets, side.others, side.kinds)
    )


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


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
    times, lengths = [], []
    for start, end in pairs:
        began = time.perf_counter()
        found = index.search(start, end, allowed)
        times.append((time.perf_counter() - began) * 1000)
        lengths.append(len(found))
    began = time.perf_counter()
    distance, _, _ = index.distances_to(np.array(tops, dtype=np.int64), allowed)
    exposure = time.perf_counter() - began
    result: dict[str, Any] = {
        "nodes": int(index.size - 1),
        "relationships": len(edges),
        "generate_s": round(generated, 2),
        "assemble_s": round(assembled, 2),
        "bytes_per_relationship": round(index_bytes(index) / len(edges), 1),
        "path_p50_ms": round(statistics.median(times), 2),
        "path_p99_ms": round(percentile(times, 0.99), 2),
        "path_edges_median": statistics.median(lengths),
        "exposure_s": round(exposure, 3),
        "exposed": int((distance > 0).sum()),
    }
    if nodes <= args.networkx_max:
        result |= measure_networkx(edges, index, pairs, tops)
    if nodes <= args.store_max:
        result["store_build_s"] = round(measure_store_build(shape), 2)
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


def measure_store_build(shape: ScaleGraph) -> float:
    """Bulk load the shape into a fresh SQLite store; time the index built from it."""
    folder = Path(tempfile.mkdtemp(prefix="graphsvc-paths-"))
    url = f"sqlite:///{folder / 'paths.sqlite3'}"
    upgrade_schema(url)

    async def load(conn: Any) -> None:
        await bulk_insert_graph(
            conn, shape.node_rows(), shape.edge_rows(), shape.sid, datetime.now(UTC)
        )

    asyncio.run(run_in_transaction(url, load))

    async def build(conn: Any) -> float:
        began = time.perf_counter()
        await build_index(conn, 0)
        return time.perf_counter() - began

    seconds: float = asyncio.run(run_in_transaction(url, build))
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--networkx-max", type=int, default=100_000)
    parser.add_argument("--store-max", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--smoke", action="store_true", help="one small size, a few pairs")
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.pairs = [2_000], 20
    results = []
    for nodes in args.sizes:
        result = measure_size(nodes, args)
        results.append(result)
        print(json.dumps(result), flush=True)
    out = Path(__file__).parent / "results" / ("paths-smoke.json" if args.smoke else "paths.json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
