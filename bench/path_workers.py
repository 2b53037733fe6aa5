"""The memory of the shortest-path index under `serve --workers 2`: the index kept as files,
read once into a sealed copy in memory that both workers map (the default), against each
worker building its own (the fallback when the index folder cannot be used), in one run.

    python bench/path_workers.py [--nodes 1000000] [--smoke]

Bulk loads `ScaleGraph` (bench/shapes.py) into SQLite, then for each mode starts `graphsvc
serve --workers 2`, sends shortest-path requests, each on a connection of its own, until
both workers have answered, and reads each worker's memory from /proc: resident (RSS, every
page it touches, shared ones included) and proportional (PSS: a page shared by two
processes counts half in each, so the sum of PSS is what the machine pays). Also the time
to the first answer (the build) and to the other worker's first answer. Writes
bench/results/path_workers.json. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from bulk import bulk_insert_graph
from run import HERE, free_port, graphsvc, signed, start, stop
from shapes import ScaleGraph

from graphsvc.store.db import Connection, run_in_transaction
from graphsvc.store.migrate import upgrade_schema


def memory_mb(pid: int) -> dict[str, float]:
    """The process's RSS and PSS now and its peak RSS, in MB."""
    figures: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("Rss", "Pss"):
            figures[name.lower() + "_mb"] = round(int(value.split()[0]) / 1024, 1)
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            figures["peak_rss_mb"] = round(int(line.split()[1]) / 1024, 1)
    return figures


def worker_pids(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def measure_mode(
    name: str,
    environment: dict[str, str],
    work: Path,
    uri: str,
    token: dict[str, str],
) -> dict[str, Any]:
    port = free_port()
    command = [sys.executable, "-m", "graphsvc", "serve", "--port", str(port), "--workers", "2"]
    process = start(command, port, environment, work / f"serve-{name}.log", core=None)
    try:
        workers = worker_pids(process.pid)
        while len(workers) < 2:
            time.sleep(0.05)
            workers = worker_pids(process.pid)
        baseline = {pid: memory_mb(pid) for pid in workers}
        answered: dict[int, float] = {}  # worker pid -> seconds to its first answer
        began = time.perf_counter()
        for _ in range(200):
            before = {pid: read_calls(pid) for pid in workers}
            headers = signed(token["id"], token["key"], uri)
            response = httpx.get(f"http://127.0.0.1:{port}{uri}", headers=headers, timeout=600)
            if response.status_code != 200:
                raise SystemExit(f"{uri}: {response.status_code} {response.text}")
            busiest = max(workers, key=lambda pid: read_calls(pid) - before[pid])
            answered.setdefault(busiest, round(time.perf_counter() - began, 2))
            if len(answered) == 2:
                break
        return {
            "mode": name,
            "first_answer_s": min(answered.values()),
            "second_worker_first_answer_s": max(answered.values()),
            "workers_answering": len(answered),
            "idle_workers": [baseline[pid] for pid in workers],
            "workers": [memory_mb(pid) for pid in workers],
        }
    finally:
        stop(process)


def read_calls(pid: int) -> int:
    """The process's read system calls so far: the worker that answered a request read its
    socket and the store; an idle one reads nothing."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("syscr:"):
            return int(line.split()[1])
    raise SystemExit(f"/proc/{pid}/io has no syscr")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--smoke", action="store_true", help="a small graph")
    args = parser.parse_args()
    nodes = 2_000 if args.smoke else args.nodes
    shape = ScaleGraph(nodes)
    results: dict[str, Any] = {"nodes": nodes}
    with tempfile.TemporaryDirectory(prefix="graphsvc-bench-") as folder:
        work = Path(folder)
        url = f"sqlite:///{work / 'bench.sqlite3'}"
        upgrade_schema(url)
        began = time.perf_counter()

        async def load(conn: Connection) -> tuple[int, int]:
            return await bulk_insert_graph(
                conn, shape.node_rows(), shape.edge_rows(), shape.sid, datetime.now(UTC)
            )

        _, results["relationships"] = asyncio.run(run_in_transaction(url, load))
        results["load_s"] = round(time.perf_counter() - began, 1)
        environment = {
            **os.environ,
            "GRAPHSVC_DATA_DIR": str(work),
            "GRAPHSVC_DATABASE_URL": url,
            "GRAPHSVC_LOG_LEVEL": "warning",
            "GRAPHSVC_RATE_LIMIT_PER_SECOND": "0",
            "GRAPHSVC_INGESTER": "false",
        }
        token = create_token(environment)
        user, top = shape.user_id(0), shape.group_id(shape.groups - 1)
        uri = (
            f"/api/v2/graphs/shortest-path?start_node={shape.object_id(user)}"
            f"&end_node={shape.object_id(top)}"
        )
        modes = {
            "shared copy": {},
            # A folder that cannot be made: each worker keeps its own index in memory.
            "each worker its own": {"GRAPHSVC_PATH_INDEX_DIR": "/proc/graphsvc-no-index"},
        }
        results["modes"] = []
        for name, extra in modes.items():
            result = measure_mode(name, {**environment, **extra}, work, uri, token)
            results["modes"].append(result)
            print(json.dumps(result), flush=True)
    out = HERE / "results" / ("path_workers-smoke.json" if args.smoke else "path_workers.json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out}", file=sys.stderr)


def create_token(environment: dict[str, str]) -> dict[str, str]:
    graphsvc(["user", "create", "bench", "--role", "Read-Only"], environment)
    made = json.loads(graphsvc(["token", "create", "--user", "bench", "--json"], environment))
    return {"id": made["id"], "key": made["key"]}


if __name__ == "__main__":
    main()
