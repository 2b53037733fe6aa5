"""Benchmark every operation against the ceiling of the same machine, in one run.

    python bench/run.py [--postgres URL] [--duration 5] [--users 8000] [--smoke]

For each store (SQLite, and PostgreSQL when reachable): loads the demo dataset plus a
generated AD collection, starts graphsvc (rate limiting on, with a limit no benchmark
reaches) and the ceiling app (bench/ceiling.py: same SQL, no framework, auth or limits),
each pinned to core 0, and drives each of the five operations with signed requests using
wrk pinned to core 1, at 1 and at 32 connections. Prints a table and writes
bench/results/run.json. --smoke is a seconds-long run for CI: it checks that everything
runs and answers 200, not how fast.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg  # noqa: F401  (checks the driver is there before anything starts)

from graphsvc.crypto import sign_request

HERE = Path(__file__).resolve().parent
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pinned(core: int, command: list[str]) -> list[str]:
    """Pin to one core where taskset works (two cores or more)."""
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        return ["taskset", "-c", str(core), *command]
    return command


def graphsvc(args: list[str], environment: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "graphsvc", *args],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"graphsvc {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def prepare(environment: dict[str, str], work: Path, users: int) -> dict[str, Any]:
    """The demo (every operation's identifiers) plus a generated domain for a bigger graph."""
    from shapes import LargeDomain

    demo = json.loads(graphsvc(["demo", "--json"], environment))
    shape = LargeDomain(
        "BENCH.LOCAL",
        "S-1-5-21-700-700-700",
        users=users,
        computers=max(20, users // 5),
        groups=max(8, users // 25),
    )
    shape.write(work / "collection")
    graphsvc(["ingest", str(work / "collection")], environment)
    demo["dcom_computer"] = f"{shape.sid}-{shape.computer_rid(0)}"
    return demo


def operations(demo: dict[str, Any]) -> dict[str, str]:
    return {
        "aggregations": "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id="
        f"{demo['environment_kind_ids'][0]}&schema_extension_id={demo['extension_ids'][0]}",
        "tenant-stats": f"/api/v2/azure-tenants/{demo['tenant_ids'][0]}/data-quality-stats",
        "saml-provider": f"/api/v2/saml/providers/{demo['saml_provider_ids'][0]}",
        "client": f"/api/v2/clients/{demo['client_ids'][0]}",
        "dcom-rights": f"/api/v2/computers/{demo['dcom_computer']}/dcom-rights",
    }


def start(
    command: list[str], port: int, environment: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    """Start a server; its output goes to a file (an unread pipe would fill and stall it)."""
    with log.open("wb") as out:
        process = subprocess.Popen(pinned(0, command), env=environment, stdout=out, stderr=out)
    for _ in range(300):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return process
        if process.poll() is not None:
            raise SystemExit(f"{command} exited: {log.read_text()}")
        time.sleep(0.05)
    raise SystemExit(f"{command} did not start")


def stop(process: subprocess.Popen[bytes]) -> None:
    """Ask the server to shut down as Ctrl-C would; kill it if it has not within 20 s."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def server_pid(process: subprocess.Popen[bytes]) -> int:
    """The server's own pid (taskset execs it, so it is the child's)."""
    return process.pid


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def wrk(
    port: int, uri: str, headers: dict[str, str], connections: int, seconds: int, script_dir: Path
) -> dict[str, float]:
    script = script_dir / "request.lua"
    lines = [f'wrk.path = "{uri}"'] + [f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items()]
    script.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        pinned(
            1,
            [
                "wrk",
                "-t1",
                f"-c{connections}",
                f"-d{seconds}s",
                "--latency",
                "-s",
                str(script),
                f"http://127.0.0.1:{port}",
            ],
        ),
        capture_output=True,
        text=True,
        check=True,
    )
    out = done.stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "rps": rps,
        "p50_ms": latency(out, "50%"),
        "p99_ms": latency(out, "99%"),
        "non_2xx": int(errors.group(1)) if errors else 0,
    }


def latency(out: str, percentile: str) -> float:
    match = re.search(rf"^\s*{re.escape(percentile)}\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    if match is None:
        return float("nan")
    value, unit = float(match.group(1)), match.group(2)
    return round(value / 1000 if unit == "us" else value * 1000 if unit == "s" else value, 3)


def signed(token_id: str, token_key: str, uri: str) -> dict[str, str]:
    date = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return {
        "Authorization": f"svcsignature {token_id}",
        "RequestDate": date,
        "Signature": sign_request(token_key, "GET", uri, date, b""),
    }


def bench_store(name: str, url: str, work: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    environment = {
        **os.environ,
        "GRAPHSVC_DATA_DIR": str(work),
        "GRAPHSVC_DATABASE_URL": url,
        "GRAPHSVC_LOG_LEVEL": "warning",
        # On, so its cost is measured; high, so no benchmark is refused.
        "GRAPHSVC_RATE_LIMIT_PER_SECOND": "1000000000",
    }
    demo = prepare(environment, work, args.users)
    results = []
    for server in ("ceiling", "graphsvc"):
        port = free_port()
        command = (
            [sys.executable, str(HERE / "ceiling.py"), "--port", str(port), "--database-url", url]
            if server == "ceiling"
            else [sys.executable, "-m", "graphsvc", "serve", "--port", str(port)]
        )
        process = start(command, port, environment, work / f"{server}.log")
        try:
            for operation, uri in operations(demo).items():
                headers = signed(demo["token_id"], demo["token_key"], uri)
                for connections in args.connections:
                    figures = wrk(port, uri, headers, connections, args.duration, work)
                    results.append(
                        {
                            "store": name,
                            "server": server,
                            "operation": operation,
                            "connections": connections,
                            **figures,
                        }
                    )
            peak = peak_rss_mb(server_pid(process))
            for row in results:
                if row["server"] == server and row["store"] == name:
                    row["server_peak_rss_mb"] = peak
        finally:
            stop(process)
    return results


def table(results: list[dict[str, Any]]) -> str:
    ceiling = {
        (r["store"], r["operation"], r["connections"]): r["rps"]
        for r in results
        if r["server"] == "ceiling"
    }
    lines = [
        "| store | operation | conns | req/s | p50 ms | p99 ms | ceiling req/s | ratio "
        "| peak RSS MB | non-2xx |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r["server"] != "graphsvc":
            continue
        top = ceiling[(r["store"], r["operation"], r["connections"])]
        r["ratio"] = round(r["rps"] / top, 2) if top else 0.0
        lines.append(
            f"| {r['store']} | {r['operation']} | {r['connections']} | {r['rps']:.0f} "
            f"| {r['p50_ms']} | {r['p99_ms']} | {top:.0f} | {r['ratio']} "
            f"| {r['server_peak_rss_mb']} | {r['non_2xx']} |"
        )
    return "\n".join(lines)


def postgres_database(url: str, work: Path) -> str | None:
    """A fresh database on the server at `url`, or None when it is not reachable."""
    import asyncio

    import asyncpg as pg

    name = f"graphsvc_bench_{os.getpid()}"

    async def create() -> None:
        conn = await pg.connect(url, timeout=3)
        try:
            await conn.execute(f"DROP DATABASE IF EXISTS {name}")
            await conn.execute(f"CREATE DATABASE {name}")
        finally:
            await conn.close()

    try:
        asyncio.run(create())
    except (OSError, pg.PostgresError) as exc:
        print(f"PostgreSQL at {url} not reachable ({exc}): benchmarking SQLite only")
        return None
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


def drop_postgres_database(url: str) -> None:
    """Remove a database `store_urls` made (connecting to the server's `postgres` one)."""
    import asyncio

    import asyncpg as pg

    base, _, name = url.rpartition("/")

    async def drop() -> None:
        conn = await pg.connect(f"{base}/postgres", timeout=3)
        try:
            await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        finally:
            await conn.close()

    asyncio.run(drop())


def store_urls(work: Path, postgres_url: str) -> dict[str, str]:
    """SQLite in `work`, and a fresh PostgreSQL database when the server is reachable; each
    store gets a folder of its own under `work`."""
    stores = {"sqlite": f"sqlite:///{work / 'sqlite' / 'bench.sqlite3'}"}
    postgres = postgres_database(postgres_url, work)
    if postgres:
        stores["postgresql"] = postgres
    for name in stores:
        (work / name).mkdir(exist_ok=True)
    return stores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--postgres", default=os.environ.get("GRAPHSVC_BENCH_POSTGRES", DEFAULT_POSTGRES)
    )
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--users", type=int, default=8000, help="users in the generated domain")
    parser.add_argument("--smoke", action="store_true", help="seconds-long run for CI")
    args = parser.parse_args()
    args.connections = [1, 32]
    if args.smoke:
        args.duration, args.users, args.connections = 1, 200, [4]
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk")

    started = time.monotonic()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="graphsvc-bench-") as folder:
        work = Path(folder)
        urls = store_urls(work, args.postgres)
        try:
            for name, url in urls.items():
                results += bench_store(name, url, work / name, args)
        finally:
            if "postgresql" in urls:
                drop_postgres_database(urls["postgresql"])
    print(table(results))
    failed = [r for r in results if r["non_2xx"]]
    out = HERE / "results" / ("smoke.json" if args.smoke else "run.json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "date": datetime.now(UTC).isoformat(),
                "args": vars(args),
                "seconds": round(time.monotonic() - started),
                "results": results,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\n{len(results)} runs in {time.monotonic() - started:.0f} s; written to {out}")
    if failed:
        raise SystemExit(f"{len(failed)} runs had non-2xx answers: {failed[0]}")


if __name__ == "__main__":
    main()
