"""Server memory under readers that pipeline requests for a large kept answer and never read.

    python bench/pipelined_readers.py [--nodes 10000] [--connections 20] [--batch 65]
                                      [--seconds 10] [--postgres URL] [--before REV] [--smoke]

A fresh SQLite store (and PostgreSQL with --postgres) gets a generated AD graph
(`ScaleGraph`); graphsvc serves it, and the DCOM list of its widest group, about 2,000 holders,
is read once so that it is kept in memory. Then each of `--connections` connections sends
`--batch` signed, pipelined GETs for it and reads nothing, one connection every 0.1 s, and the
server's resident memory is sampled for `--seconds`. Before answers written at once stopped at
a connection's unsent bytes, each such connection parked a whole batch of answers in the
server. With --before REV, graphsvc at that git revision runs the same, side by side (a
worktree on the same graph). Writes bench/results/pipelined-readers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from run import drop_postgres_database, free_port, graphsvc, signed, start, stop, store_urls
from scale import load
from shapes import AggregationHistory, ScaleGraph

HERE = Path(__file__).resolve().parent


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def request_bytes(uri: str, headers: dict[str, str]) -> bytes:
    lines = [f"GET {uri} HTTP/1.1", "Host: bench"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer_size(port: int, uri: str, headers: dict[str, str]) -> int:
    """Read the answer once (so that it is kept) and return its size in bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request_bytes(uri, {**headers, "Connection": "close"}))
        received = b""
        while chunk := s.recv(1 << 20):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"{uri}: {head[:200]!r}")
    return len(body)


def flood(pid: int, port: int, request: bytes, args: argparse.Namespace) -> tuple[list[float], int]:
    """Open the connections (kept open, never read) while sampling the server's memory;
    returns the samples and the connections the server kept open."""
    opened: list[socket.socket] = []
    samples = [rss_mb(pid)]
    started = time.monotonic()
    try:
        while time.monotonic() - started < args.seconds:
            if len(opened) < args.connections:
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.connect(("127.0.0.1", port))
                s.sendall(request * args.batch)
                opened.append(s)
            time.sleep(0.1)
            samples.append(rss_mb(pid))
        alive = 0
        for s in opened:
            s.setblocking(False)
            try:
                alive += s.recv(1) != b""
            except BlockingIOError:
                alive += 1
            except OSError:
                pass
    finally:
        for s in opened:
            s.close()
    return samples, alive


def measure(
    name: str, url: str, work: Path, args: argparse.Namespace, source: Path | None
) -> dict[str, Any]:
    environment = {
        **os.environ,
        "GRAPHSVC_DATA_DIR": str(work),
        "GRAPHSVC_DATABASE_URL": url,
        "GRAPHSVC_LOG_LEVEL": "warning",
        "GRAPHSVC_INGESTER": "false",
        "GRAPHSVC_RATE_LIMIT_PER_SECOND": "0",
    }
    if source is not None:
        environment["PYTHONPATH"] = str(source / "src")
    graphsvc(["db", "upgrade"], environment)
    graph = ScaleGraph(args.nodes)
    load(url, graph, AggregationHistory(10, datetime.now(UTC)))
    graphsvc(["user", "create", "bench", "--role", "Administrator"], environment)
    token = json.loads(graphsvc(["token", "create", "--user", "bench", "--json"], environment))
    uri = f"/api/v2/computers/{graph.object_id(graph.computer_id(2))}/dcom-rights?limit=10000"
    headers = signed(token["id"], token["key"], uri)
    port = free_port()
    command = [sys.executable, "-m", "graphsvc", "serve", "--port", str(port)]
    process = start(command, port, environment, work / "server.log")
    try:
        size = answer_size(port, uri, headers)
        time.sleep(0.5)  # settled
        samples, alive = flood(process.pid, port, request_bytes(uri, headers), args)
    finally:
        stop(process)
    result = {
        "store": name,
        "version": "before" if source is not None else "this",
        "answer_bytes": size,
        "connections": args.connections,
        "batch": args.batch,
        "rss_start_mb": samples[0],
        "rss_peak_mb": max(samples),
        "rss_end_mb": samples[-1],
        "growth_mb": round(max(samples) - samples[0], 1),
        "connections_open_at_end": alive,
    }
    print(result, flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--batch", type=int, default=65, help="pipelined GETs a connection")
    parser.add_argument("--seconds", type=float, default=10.0, help="of sampling")
    parser.add_argument("--postgres", help="also on this PostgreSQL server (a new database)")
    parser.add_argument("--before", metavar="REV", help="also graphsvc at this git revision")
    parser.add_argument("--smoke", action="store_true", help="seconds-long run for CI")
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.connections, args.batch, args.seconds = 500, 3, 5, 1.0
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="graphsvc-pipelined-") as folder:
        work = Path(folder)
        source = work / "before-source" if args.before else None
        if source is not None:
            subprocess.run(
                ["git", "worktree", "add", "--detach", str(source), args.before],
                check=True,
                capture_output=True,
            )
        versions: list[Path | None] = [None] if source is None else [source, None]
        try:
            for version in versions:
                label = "this" if version is None else "before"
                (work / label).mkdir(parents=True)
                if args.postgres:
                    urls = store_urls(work / label, args.postgres, f"graphsvc_pipe_{label}")
                else:
                    (work / label / "sqlite").mkdir()
                    urls = {"sqlite": f"sqlite:///{work / label / 'sqlite' / 'bench.sqlite3'}"}
                try:
                    for name, url in urls.items():
                        results.append(measure(name, url, work / label / name, args, version))
                finally:
                    if "postgresql" in urls:
                        drop_postgres_database(urls["postgresql"])
        finally:
            if source is not None:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(source)], capture_output=True
                )
    print(
        "| store | version | answer KB | connections x batch | RSS start MB | peak MB | growth MB |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['store']} | {r['version']} | {r['answer_bytes'] // 1024} "
            f"| {r['connections']} x {r['batch']} | {r['rss_start_mb']} | {r['rss_peak_mb']} "
            f"| {r['growth_mb']} |"
        )
    out = (
        HERE
        / "results"
        / ("pipelined-readers-smoke.json" if args.smoke else "pipelined-readers.json")
    )
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps({"date": datetime.now(UTC).isoformat(), "results": results}, indent=1)
    )


if __name__ == "__main__":
    main()
