"""Benchmark every operation against two ceilings of the same machine, in one run.

    python bench/run.py [--postgres URL] [--duration 2] [--rounds 3] [--users 8000]
                        [--variants 200] [--before REV] [--only OPERATION...] [--smoke]

For each store (SQLite, and PostgreSQL when reachable): loads the demo dataset plus a
generated AD collection and starts, side by side and each pinned to core 0: graphsvc
(rate limiting on, with a limit no benchmark reaches), which answers each target once and
is then asked in two modes: `warm` (answers from memory) and `304` (each request names its
answer's ETag in If-None-Match); graphsvc with no answer cache, `cold` (every answer made
as after a data change); the static ceiling (bench/static.py: answers each request with the
bytes graphsvc answered it with, recorded first, and does nothing else); and the same-SQL
ceiling (bench/ceiling.py: graphsvc's SQL and JSON encoding, no framework, auth or limits).
With --before REV, also `before`: graphsvc as it was at git revision REV (a worktree on
PYTHONPATH), on a store of its own loaded the same way. wrk, pinned to core 1, drives each
operation at 1 and at 32 connections with a Lua script that cycles through up to
--variants signed request targets (other computers, tenants, providers and clients, skips
and windows): every mode once a round, --rounds rounds, and a mode's figures are its median
round's. Prints a table and writes bench/results/run.json. --smoke is a seconds-long
run for CI: it checks that everything runs and answers 200 (or 304), not how fast.
"""

from __future__ import annotations

import argparse
import http.client
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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg  # noqa: F401  (checks the driver is there before anything starts)

from graphsvc.signatures import request_date, sign_request

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

    demo: dict[str, Any] = json.loads(graphsvc(["demo", "--json"], environment))
    shape = LargeDomain(
        "BENCH.LOCAL",
        "S-1-5-21-700-700-700",
        users=users,
        computers=max(20, users // 5),
        groups=max(8, users // 25),
    )
    shape.write(work / "collection")
    graphsvc(["ingest", str(work / "collection")], environment)
    # Every computer of the demo, and as many of the generated domain's (one in twenty of
    # which grants DCOM to a group and a user).
    demo["dcom_computers"] = demo["computer_object_ids"] + [
        f"{shape.sid}-{shape.computer_rid(i)}" for i in range(min(shape.computers, 200))
    ]
    return demo


def operations(
    demo: dict[str, Any], variants: int, only: list[str] | None = None
) -> dict[str, list[str]]:
    """Up to `variants` request targets per operation: other computers, tenants, providers
    and clients, skips and windows, so that no cached answer can carry a figure."""
    now = datetime.now(UTC).replace(microsecond=0)

    def window(i: int) -> str:
        start = (now - timedelta(days=2 + i % 28)).isoformat().replace("+00:00", "Z")
        end = (now + timedelta(minutes=1 + i % 7)).isoformat().replace("+00:00", "Z")
        return f"start={start}&end={end}"

    kind, extension = demo["environment_kind_ids"][0], demo["extension_ids"][0]
    tenants, computers = demo["tenant_ids"], demo["dcom_computers"]
    targets = {
        "aggregations": [
            "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id="
            f"{kind}&schema_extension_id={extension}&skip={i % 3}&limit=10&{window(i)}"
            for i in range(variants)
        ],
        "tenant-stats": [
            f"/api/v2/azure-tenants/{tenants[i % len(tenants)]}/data-quality-stats"
            f"?skip={i % 2}&limit=10&{window(i)}"
            for i in range(variants)
        ],
        # As dashboards ask: the window ends now (no `end`), kept until a record can enter
        # or leave it.
        "aggregations-now": [
            "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id="
            f"{kind}&schema_extension_id={extension}&skip={i % 3}&limit={10 + i % 5}"
            for i in range(variants)
        ],
        "tenant-stats-now": [
            f"/api/v2/azure-tenants/{tenants[i % len(tenants)]}/data-quality-stats"
            f"?skip={i % 2}&limit={10 + i % 5}"
            for i in range(variants)
        ],
        "saml-provider": [f"/api/v2/saml/providers/{i}" for i in demo["saml_provider_ids"]],
        "client": [f"/api/v2/clients/{i}" for i in demo["client_ids"]],
        "dcom-rights": [
            f"/api/v2/computers/{computers[i % len(computers)]}/dcom-rights?skip={i % 2}&limit=10"
            for i in range(variants)
        ],
    }
    return {
        name: sorted(set(uris)) for name, uris in targets.items() if only is None or name in only
    }


def start(
    command: list[str], port: int, environment: dict[str, str], log: Path, core: int | None = 0
) -> subprocess.Popen[bytes]:
    """Start a server, pinned to `core` (None: anywhere); its output goes to a file (an
    unread pipe would fill and stall it)."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command if core is None else pinned(core, command),
            env=environment,
            stdout=out,
            stderr=out,
        )
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


def write_script(
    path: Path,
    targets: list[str],
    token_id: str,
    token_key: str,
    etags: dict[str, str] | None = None,
) -> None:
    """A wrk script that cycles through the targets, each with its own signature and, with
    `etags`, its answer's ETag in If-None-Match."""
    date = request_date()

    def lua(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    rows = ",\n".join(
        f"  {{{lua(t)}, {lua(sign_request(token_key, 'GET', t, date, b''))}"
        f"{', ' + lua(etags[t]) if etags else ''}}}"
        for t in targets
    )
    path.write_text(
        f'wrk.headers["Authorization"] = "svcsignature {token_id}"\n'
        f'wrk.headers["RequestDate"] = "{date}"\n'
        f"local requests = {{\n{rows}\n}}\n"
        "local i = 0\n"
        "request = function()\n"
        "  i = i % #requests + 1\n"
        '  wrk.headers["Signature"] = requests[i][2]\n'
        + ('  wrk.headers["If-None-Match"] = requests[i][3]\n' if etags else "")
        + '  return wrk.format("GET", requests[i][1])\n'
        "end\n"
    )


def wrk(
    port: int, script: Path, connections: int, seconds: int, core: int | None = 1
) -> dict[str, float]:
    """wrk at `connections` for `seconds`, pinned to `core` (None: anywhere, one thread)."""
    command = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{seconds}s",
        "--latency",
        "-s",
        str(script),
        f"http://127.0.0.1:{port}",
    ]
    done = subprocess.run(
        command if core is None else pinned(core, command),
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
    date = request_date()
    return {
        "Authorization": f"svcsignature {token_id}",
        "RequestDate": date,
        "Signature": sign_request(token_key, "GET", uri, date, b""),
    }


def signed_get(
    port: int, demo: dict[str, Any], target: str, headers: dict[str, str] | None = None
) -> tuple[int, bytes, list[tuple[str, str]]]:
    """GET `target` signed with the demo's token: status, body and headers."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        sent = {**signed(demo["token_id"], demo["token_key"], target), **(headers or {})}
        connection.request("GET", target, headers=sent)
        response = connection.getresponse()
        return response.status, response.read(), response.getheaders()
    finally:
        connection.close()


def record_answers(
    port: int, demo: dict[str, Any], targets: list[str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """graphsvc's answer to each target, for the static ceiling to send back (its body and
    headers, but for the two uvicorn adds to every answer), and its ETag, for the 304 runs."""
    answers, etags = {}, {}
    for target in targets:
        status, body, headers = signed_get(port, demo, target)
        kept = [(n.lower(), v) for n, v in headers if n.lower() not in ("date", "server")]
        etag = dict(kept).get("etag")
        if status != 200 or etag is None:
            raise SystemExit(f"GET {target}: {status} {body[:300]!r}")
        answers[target] = {"body": body.decode(), "headers": kept}
        etags[target] = etag
    return answers, etags


def check_not_modified(port: int, demo: dict[str, Any], etags: dict[str, str]) -> None:
    """Each target with its answer's ETag answers 304 (wrk counts a 304 as a success, and
    would not tell a 200 from it)."""
    for target, etag in etags.items():
        status, _, _ = signed_get(port, demo, target, {"If-None-Match": etag})
        if status != 304:
            raise SystemExit(f"GET {target} with If-None-Match {etag}: {status}")


# graphsvc first: the static ceiling answers its bytes. Each server's runs, by answer mode.
SERVERS = {
    "graphsvc": ("warm", "304"),
    "cold": ("cold",),
    "static": ("static",),
    "ceiling": ("ceiling",),
}


def server_command(server: str, port: int, url: str, answers: Path) -> list[str]:
    if server == "static":
        return [
            sys.executable,
            str(HERE / "static.py"),
            "--port",
            str(port),
            "--answers",
            str(answers),
        ]
    if server == "ceiling":
        return [
            sys.executable,
            str(HERE / "ceiling.py"),
            "--port",
            str(port),
            "--database-url",
            url,
        ]
    return [sys.executable, "-m", "graphsvc", "serve", "--port", str(port)]


def store_environment(url: str, work: Path) -> dict[str, str]:
    return {
        **os.environ,
        "GRAPHSVC_DATA_DIR": str(work),
        "GRAPHSVC_DATABASE_URL": url,
        # The defaults of a production server, so that their cost is measured: a JSON line
        # per request (into a file here), and rate limiting on, high enough that no
        # benchmark is refused.
        "GRAPHSVC_LOG_LEVEL": "info",
        "GRAPHSVC_LOG_FORMAT": "json",
        "GRAPHSVC_RATE_LIMIT_PER_SECOND": "1000000000",
        "GRAPHSVC_INGESTER": "false",
    }


@dataclass
class Mode:
    """An answer mode: the server it is asked of, and the targets and credentials it is
    asked with (`before` has a store, and so a demo, of its own)."""

    name: str
    port: int
    demo: dict[str, Any]
    targets: dict[str, list[str]]
    etags: dict[str, str] | None  # sent in If-None-Match (the 304 mode)


def bench_store(
    name: str, url: str, work: Path, args: argparse.Namespace, before: tuple[Path, str] | None
) -> list[dict[str, Any]]:
    """Every server of the store started at once (all pinned to core 0, idle but for the
    one wrk drives), then driven in rounds (see `drive`)."""
    environment = store_environment(url, work)
    demo = prepare(environment, work, args.users)
    targets = operations(demo, args.variants, args.only)
    answers = work / "answers.json"
    processes: dict[str, subprocess.Popen[bytes]] = {}
    modes: list[Mode] = []
    try:
        for server, names in SERVERS.items():
            port = free_port()
            command = server_command(server, port, url, answers)
            served = environment
            if server == "cold":  # every answer made again, as after each change of the data
                served = {**environment, "GRAPHSVC_ANSWER_CACHE_BYTES": "0"}
            processes[server] = start(command, port, served, work / f"{server}.log")
            etags: dict[str, str] = {}
            if server == "graphsvc":  # which also puts every answer in its memory
                recorded, etags = record_answers(
                    port, demo, [t for ts in targets.values() for t in ts]
                )
                answers.write_text(json.dumps(recorded))
                check_not_modified(port, demo, etags)
            modes += [Mode(n, port, demo, targets, etags if n == "304" else None) for n in names]
        if before is not None:
            processes["before"], mode = start_before(name, before, work, args)
            modes.append(mode)
        results = drive(name, modes, work, args)
        for server, process in processes.items():
            peak = peak_rss_mb(server_pid(process))
            for row in results:
                if row["server"] in SERVERS.get(server, (server,)):
                    row["server_peak_rss_mb"] = peak
    finally:
        for process in processes.values():
            stop(process)
    return results


def start_before(
    name: str, before: tuple[Path, str], work: Path, args: argparse.Namespace
) -> tuple[subprocess.Popen[bytes], Mode]:
    """graphsvc at the revision `--before` names (its source tree first on PYTHONPATH), on a
    store of its own (`url`) loaded the same way: its demo's identifiers are its own."""
    source, url = before
    folder = work.parent / "before" / name  # made by store_urls
    environment = {**store_environment(url, folder), "PYTHONPATH": str(source / "src")}
    demo = prepare(environment, folder, args.users)
    port = free_port()
    process = start(server_command("graphsvc", port, url, work), port, environment, folder / "log")
    return process, Mode("before", port, demo, operations(demo, args.variants, args.only), None)


def drive(
    store: str, modes: list[Mode], work: Path, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """wrk on each operation's targets at each number of connections, every mode once a
    round, `args.rounds` rounds, each round starting one mode later; a mode's figures are
    those of its median round. Taken one after the other, each server's runs over several
    minutes, the same cell moved by 10 to 20% between two runs an hour apart on one
    machine, more than the changes measured: interleaved, a drift of the machine reaches
    every mode of a cell alike."""
    results = []
    for operation in modes[0].targets:
        scripts = {}
        for mode in modes:
            scripts[mode.name] = work / f"{operation}-{mode.name}.lua"
            write_script(
                scripts[mode.name],
                mode.targets[operation],
                mode.demo["token_id"],
                mode.demo["token_key"],
                mode.etags,
            )
        for connections in args.connections:
            runs: dict[str, list[dict[str, float]]] = {mode.name: [] for mode in modes}
            for round_ in range(args.rounds):
                shift = round_ % len(modes)
                for mode in modes[shift:] + modes[:shift]:
                    runs[mode.name].append(
                        wrk(mode.port, scripts[mode.name], connections, args.duration)
                    )
            for mode in modes:
                ranked = sorted(runs[mode.name], key=lambda figures: figures["rps"])
                median = ranked[len(ranked) // 2]
                results.append(
                    {
                        "store": store,
                        "server": mode.name,
                        "operation": operation,
                        "targets": len(mode.targets[operation]),
                        "connections": connections,
                        **median,
                        "rounds_rps": [figures["rps"] for figures in runs[mode.name]],
                        "non_2xx": sum(int(figures["non_2xx"]) for figures in runs[mode.name]),
                    }
                )
    return results


def table(results: list[dict[str, Any]]) -> str:
    """A row per store, operation and connections: req/s of each answer mode and ceiling,
    and each mode's ratio to the static ceiling (and cold's to before, when run)."""
    rps = {(r["server"], r["store"], r["operation"], r["connections"]): r for r in results}
    modes = ["cold", "warm", "304"] + (["before"] if any(k[0] == "before" for k in rps) else [])
    lines = [
        "| store | operation | conns | "
        + " | ".join(f"{m} req/s" for m in modes)
        + " | same-SQL req/s | static req/s | cold/static | warm/static | 304/static"
        + (" | cold/before" if "before" in modes else "")
        + " | warm p99 ms | peak RSS MB |",
        "|---" * (10 + len(modes) + ("before" in modes)) + "|",
    ]
    for r in results:
        if r["server"] != "warm":
            continue
        key = (r["store"], r["operation"], r["connections"])
        found = {m: rps[(m, *key)]["rps"] for m in (*modes, "ceiling", "static")}
        static = found["static"]
        for m in ("cold", "warm", "304"):
            rps[(m, *key)]["static_ratio"] = round(found[m] / static, 2) if static else 0.0
        cells = [f"{found[m]:.0f}" for m in (*modes, "ceiling", "static")]
        cells += [str(rps[(m, *key)]["static_ratio"]) for m in ("cold", "warm", "304")]
        if "before" in modes:
            cells.append(str(round(found["cold"] / found["before"], 2)))
        cells += [str(r["p99_ms"]), str(r["server_peak_rss_mb"])]
        lines.append(f"| {' | '.join(str(k) for k in key)} | {' | '.join(cells)} |")
    return "\n".join(lines)


def postgres_database(url: str, name: str = "") -> str | None:
    """A fresh database `name` (by default one named after this process) on the server at
    `url`, or None when it is not reachable."""
    import asyncio

    import asyncpg as pg

    name = name or f"graphsvc_bench_{os.getpid()}"

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


def store_urls(work: Path, postgres_url: str, name: str = "") -> dict[str, str]:
    """SQLite in `work`, and a fresh PostgreSQL database `name` when the server is
    reachable; each store gets a folder of its own under `work`."""
    stores = {"sqlite": f"sqlite:///{work / 'sqlite' / 'bench.sqlite3'}"}
    postgres = postgres_database(postgres_url, name)
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
    parser.add_argument("--duration", type=int, default=2, help="seconds per wrk run")
    parser.add_argument("--rounds", type=int, default=3, help="wrk runs per mode and cell")
    parser.add_argument("--users", type=int, default=8000, help="users in the generated domain")
    parser.add_argument("--variants", type=int, default=200, help="request targets per operation")
    parser.add_argument(
        "--before", metavar="REV", help="also run graphsvc at this git revision, for comparison"
    )
    parser.add_argument("--smoke", action="store_true", help="seconds-long run for CI")
    parser.add_argument(
        "--only", nargs="+", metavar="OPERATION", help="these operations only (names as printed)"
    )
    args = parser.parse_args()
    args.connections = [1, 32]
    if args.smoke:
        args.duration, args.users, args.connections, args.variants = 1, 200, [4], 20
        args.rounds = 1
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk")

    started = time.monotonic()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="graphsvc-bench-") as folder:
        work = Path(folder)
        urls = store_urls(work, args.postgres)
        before_urls: dict[str, str] = {}
        try:
            if args.before:
                source = work / "before-source"
                subprocess.run(
                    ["git", "worktree", "add", "--detach", str(source), args.before],
                    cwd=HERE.parent,
                    check=True,
                    capture_output=True,
                )
                (work / "before").mkdir()
                before_urls = store_urls(
                    work / "before", args.postgres, f"graphsvc_bench_before_{os.getpid()}"
                )
            for name, url in urls.items():
                before = (source, before_urls[name]) if name in before_urls else None
                results += bench_store(name, url, work / name, args, before)
        finally:
            for made in (urls, before_urls):
                if "postgresql" in made:
                    drop_postgres_database(made["postgresql"])
            if args.before:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(work / "before-source")],
                    cwd=HERE.parent,
                    check=False,
                    capture_output=True,
                )
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
