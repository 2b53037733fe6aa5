"""How the DCOM list and the data-quality operations cost grow with the graph and the answer.

    python bench/scale.py [--sqlite-sizes 10000 100000] [--postgres-sizes 10000 100000 1000000]
                          [--postgres URL] [--duration 5] [--connections 32] [--smoke]

For each size and store: a fresh database gets a generated AD graph of that many nodes with
about ten edges per node (`graphsvc.demo.collectors.ScaleGraph`: groups nested four deep, DCOM
granted to groups and users) and a data-quality history of as many aggregation rows
(`AggregationHistory`: a run every 15 minutes), both bulk loaded. graphsvc then serves it,
pinned to core 0, and wrk on core 1 drives at 32 connections (or each of --connections):
the DCOM list of computers whose holders number 0, about 165 (a group tree) and 2,001 (a
wide group); the aggregations of the last 30 days (the default window) ten rows at a time,
and those of the last day a page of 1,000 (the default limit). Writes
bench/results/scale.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bulk import bulk_insert_aggregations, bulk_insert_graph
from run import (
    drop_postgres_database,
    free_port,
    graphsvc,
    signed,
    start,
    stop,
    store_urls,
    write_script,
    wrk,
)
from shapes import AggregationHistory, ScaleGraph

from graphsvc.store.db import run_in_transaction

HERE = Path(__file__).resolve().parent


def load(url: str, graph: ScaleGraph, history: AggregationHistory) -> tuple[int, int, int]:
    async def work(conn: Any) -> tuple[int, int, int]:
        nodes, edges = await bulk_insert_graph(
            conn, graph.node_rows(), graph.edge_rows(), graph.sid, history.end
        )
        rows = await bulk_insert_aggregations(conn, history.aggregation_rows({}))
        return nodes, edges, rows

    return asyncio.run(run_in_transaction(url, work))


def answer_count(port: int, uri: str, headers: dict[str, str]) -> int:
    out = subprocess.run(
        [
            "curl",
            "-sf",
            f"http://127.0.0.1:{port}{uri}",
            *[a for k, v in headers.items() for a in ("-H", f"{k}: {v}")],
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(json.loads(out)["count"])


def measure(
    name: str, url: str, nodes: int, work: Path, seconds: int, connections: list[int]
) -> list[dict[str, Any]]:
    environment = {
        **os.environ,
        "GRAPHSVC_DATA_DIR": str(work),
        "GRAPHSVC_DATABASE_URL": url,
        "GRAPHSVC_LOG_LEVEL": "warning",
        "GRAPHSVC_INGESTER": "false",
        "GRAPHSVC_RATE_LIMIT_PER_SECOND": "1000000000",
    }
    graphsvc(["db", "upgrade"], environment)
    now = datetime.now(UTC)
    graph, history = ScaleGraph(nodes), AggregationHistory(nodes, now)
    started = time.monotonic()
    node_count, edge_count, history_rows = load(url, graph, history)
    loaded = round(time.monotonic() - started, 1)
    print(
        f"{name} {nodes:,}: {node_count:,} nodes, {edge_count:,} edges, {history_rows:,} "
        f"aggregation rows loaded in {loaded} s",
        flush=True,
    )
    graphsvc(["user", "create", "bench", "--role", "Administrator"], environment)
    token = json.loads(graphsvc(["token", "create", "--user", "bench", "--json"], environment))

    def dcom(computer: int) -> str:
        return f"/api/v2/computers/{graph.object_id(graph.computer_id(computer))}/dcom-rights"

    day = (now - timedelta(days=1)).replace(microsecond=0).isoformat()
    aggregations = "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"
    uris = {
        "dcom-rights (no holders)": dcom(1),
        "dcom-rights (group tree)": dcom(0),
        "dcom-rights (wide group)": dcom(2),
        "aggregations (30 days, limit 10)": f"{aggregations}&limit=10",
        "aggregations (1 day, limit 1000)": f"{aggregations}&start={day.replace('+00:00', 'Z')}",
    }
    port = free_port()
    command = [sys.executable, "-m", "graphsvc", "serve", "--port", str(port)]
    process = start(command, port, environment, work / "server.log")
    results: list[dict[str, Any]] = []
    try:
        for operation, uri in uris.items():
            headers = signed(token["id"], token["key"], uri)
            script = work / "request.lua"
            write_script(script, [uri], token["id"], token["key"])
            for count in connections:
                figures = wrk(port, script, count, seconds)
                results.append(
                    {
                        "store": name,
                        "nodes": node_count,
                        "edges": edge_count,
                        "aggregation_rows": history_rows,
                        "operation": operation,
                        "connections": count,
                        "answer_count": answer_count(port, uri, headers),
                        "load_seconds": loaded,
                        **figures,
                    }
                )
                print(results[-1], flush=True)
    finally:
        stop(process)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sqlite-sizes",
        type=int,
        nargs="*",
        default=[10_000, 100_000],
        help="graph sizes on SQLite (1000000 adds about 3.5 minutes of loading)",
    )
    parser.add_argument(
        "--postgres-sizes",
        type=int,
        nargs="*",
        default=[10_000, 100_000, 1_000_000],
        help="graph sizes on PostgreSQL",
    )
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument(
        "--connections", type=int, nargs="+", default=[32], help="wrk connections, each run"
    )
    parser.add_argument("--smoke", action="store_true", help="seconds-long run for CI")
    args = parser.parse_args()
    if args.smoke:
        args.sqlite_sizes, args.postgres_sizes, args.duration = [500], [500], 1
    started = time.monotonic()
    results: list[dict[str, Any]] = []
    sizes = {"sqlite": args.sqlite_sizes, "postgresql": args.postgres_sizes}
    for nodes in sorted({*args.sqlite_sizes, *args.postgres_sizes}):
        with tempfile.TemporaryDirectory(prefix="graphsvc-scale-") as folder:
            work = Path(folder)
            urls = store_urls(work, args.postgres)
            try:
                for name, url in urls.items():
                    if nodes in sizes[name]:
                        results += measure(
                            name, url, nodes, work / name, args.duration, args.connections
                        )
            finally:
                if "postgresql" in urls:
                    drop_postgres_database(urls["postgresql"])
    print("| store | nodes | edges | operation | conns | answer count | req/s | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['store']} | {r['nodes']:,} | {r['edges']:,} | {r['operation']} "
            f"| {r['connections']} | {r['answer_count']:,} | {r['rps']:.0f} | {r['p50_ms']} "
            f"| {r['p99_ms']} |"
        )
    seconds = round(time.monotonic() - started)
    out = HERE / "results" / ("scale-smoke.json" if args.smoke else "scale.json")
    out.parent.mkdir(exist_ok=True)
    summary = {
        "date": datetime.now(UTC).isoformat(),
        "args": vars(args),
        "seconds": seconds,
        "results": results,
    }
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\n{len(results)} runs in {seconds} s; written to {out}")
    failed = [r for r in results if r["non_2xx"]]
    if failed:
        raise SystemExit(f"{len(failed)} runs had non-2xx answers: {failed[0]}")


if __name__ == "__main__":
    main()
