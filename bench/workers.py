"""One `graphsvc serve` against `serve --workers 2` on this machine, in one run.

    python bench/workers.py [--redis URL] [--duration 10] [--operation saml-provider]

Loads the demo (and the run benchmark's generated domain) into SQLite, then serves it with
one worker and with two, unpinned (the kernel places the workers and wrk), rate limit on and
shared through Redis, and drives one operation with wrk at 64 connections, cycling through
its signed targets. Prints requests per second and each worker's peak memory; writes
bench/results/workers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from run import (
    HERE,
    free_port,
    operations,
    peak_rss_mb,
    prepare,
    start,
    stop,
    write_script,
    wrk,
)


def worker_pids(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(c) for c in children] or [pid]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/5")
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--operation", default="saml-provider")
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args()
    results: dict[str, Any] = {"operation": args.operation, "connections": args.connections}
    with tempfile.TemporaryDirectory(prefix="graphsvc-bench-") as folder:
        work = Path(folder)
        environment = {
            **os.environ,
            "GRAPHSVC_DATA_DIR": str(work),
            "GRAPHSVC_DATABASE_URL": f"sqlite:///{work / 'bench.sqlite3'}",
            "GRAPHSVC_LOG_LEVEL": "warning",
            "GRAPHSVC_RATE_LIMIT_PER_SECOND": "1000000000",
            "GRAPHSVC_REDIS_URL": args.redis,
            "GRAPHSVC_INGESTER": "false",
        }
        demo = prepare(environment, work, 2000)
        targets = operations(demo, 200)[args.operation]
        script = work / "request.lua"
        write_script(script, targets, demo["token_id"], demo["token_key"])
        for workers in (1, 2):
            port = free_port()
            command = [
                sys.executable,
                "-m",
                "graphsvc",
                "serve",
                "--port",
                str(port),
                "--workers",
                str(workers),
            ]
            process = start(command, port, environment, work / f"serve-{workers}.log", core=None)
            try:
                time.sleep(1)
                wrk(port, script, args.connections, 2, core=None)  # warm up
                figures: dict[str, Any] = dict(
                    wrk(port, script, args.connections, args.duration, core=None)
                )
                figures["peak_rss_mb_per_worker"] = [
                    peak_rss_mb(pid) for pid in worker_pids(process.pid)
                ]
            finally:
                stop(process)
            results[f"workers_{workers}"] = figures
            print(f"--workers {workers}: {json.dumps(figures)}")
    one, two = results["workers_1"]["rps"], results["workers_2"]["rps"]
    results["ratio"] = round(two / one, 2)
    print(f"two workers / one: {results['ratio']}")
    out = HERE / "results" / "workers.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
