"""How the DCOM list and the aggregations cost grow with the graph: latency per graph size.

    python bench/scale.py [--sizes 10000 100000] [--postgres URL] [--duration 5]

For each size and store: generates an AD collection of that many nodes
(`graphsvc.generate.LargeDomain`: nested groups, DCOM granted to groups and users), loads it
with `graphsvc ingest`, starts graphsvc pinned to core 0, and drives the DCOM list of a
computer whose holders are a group tree (and that of a computer with none), and the
aggregations, with wrk at 32 connections on core 1. Writes bench/results/scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run import free_port, graphsvc, signed, start, store_urls, wrk

from graphsvc.generate import LargeDomain

HERE = Path(__file__).resolve().parent


def measure(name: str, url: str, nodes: int, work: Path, seconds: int) -> list[dict[str, object]]:
    environment = {
        **os.environ,
        "GRAPHSVC_DATA_DIR": str(work),
        "GRAPHSVC_DATABASE_URL": url,
        "GRAPHSVC_LOG_LEVEL": "warning",
        "GRAPHSVC_RATE_LIMIT_PER_SECOND": "1000000000",
    }
    shape = LargeDomain.of_size("SCALE.LOCAL", "S-1-5-21-800-800-800", nodes)
    shape.write(work / "collection")
    started = time.monotonic()
    graphsvc(["ingest", str(work / "collection")], environment)
    loaded = time.monotonic() - started
    graphsvc(["user", "create", "bench", "--role", "Administrator"], environment)
    token = json.loads(graphsvc(["token", "create", "--user", "bench", "--json"], environment))
    holders_of = f"{shape.sid}-{shape.computer_rid(0)}"  # granted to a group tree and a user
    nobody = f"{shape.sid}-{shape.computer_rid(1)}"
    uris = {
        "dcom-rights (group tree)": f"/api/v2/computers/{holders_of}/dcom-rights",
        "dcom-rights (no holders)": f"/api/v2/computers/{nobody}/dcom-rights",
        "aggregations": "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8",
    }
    port = free_port()
    process = start(
        [sys.executable, "-m", "graphsvc", "serve", "--port", str(port)],
        port,
        environment,
        work / "server.log",
    )
    results: list[dict[str, object]] = []
    try:
        for operation, uri in uris.items():
            headers = signed(token["id"], token["key"], uri)
            figures = wrk(port, uri, headers, 32, seconds, work)
            body = subprocess.run(
                [
                    "curl",
                    "-s",
                    f"http://127.0.0.1:{port}{uri}",
                    *[a for k, v in headers.items() for a in ("-H", f"{k}: {v}")],
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            results.append(
                {
                    "store": name,
                    "nodes": nodes,
                    "operation": operation,
                    "answer_count": json.loads(body).get("count"),
                    "load_seconds": round(loaded),
                    **figures,
                }
            )
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--duration", type=int, default=5)
    args = parser.parse_args()
    results: list[dict[str, object]] = []
    for nodes in args.sizes:
        with tempfile.TemporaryDirectory(prefix="graphsvc-scale-") as folder:
            work = Path(folder)
            for name, url in store_urls(work, args.postgres).items():
                results += measure(name, url, nodes, work / name, args.duration)
    print("| store | nodes | operation | answer count | req/s | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['store']} | {r['nodes']:,} | {r['operation']} | {r['answer_count']} "
            f"| {r['rps']:.0f} | {r['p50_ms']} | {r['p99_ms']} |"
        )
    out = HERE / "results" / "scale.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
