"""`POST /api/v2/graphs/cypher` and `graphsvc query`: a query parsed, run on the graph as it
is now in a thread of its own (the server keeps answering meanwhile; the query stops when
its request is cancelled), and its rows answered as the reference's unified graph.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from graphsvc import wire
from graphsvc.cypher import syntax
from graphsvc.cypher.answer import collect, graph_answer
from graphsvc.cypher.errors import evaluation_errors
from graphsvc.cypher.execute import Result, execute, explain
from graphsvc.cypher.expressions import walk
from graphsvc.cypher.graph import NodeTables, QueryGraph
from graphsvc.cypher.parse import parse
from graphsvc.cypher.runtime import Caps, Run
from graphsvc.errors import not_found
from graphsvc.graph.paths import PathIndex
from graphsvc.settings import Settings
from graphsvc.store import cypher as store
from graphsvc.store.db import Connection

T = TypeVar("T")


@dataclass
class CypherEngine:
    """The process's parts a query runs on: the path index and the node table."""

    paths: PathIndex
    tables: NodeTables
    caps: Caps


def reads_relationship_properties(query: syntax.Query) -> bool:
    """Whether the query may read a relationship's properties (then they are loaded with the
    graph): a relationship pattern's property map, a property of a relationship variable, or
    any property read of something other than a plain variable."""
    relationships: set[str] = set()
    nodes = []
    for part in query.parts:
        for clause in part.clauses:
            nodes.extend(walk(clause))
    for node in nodes:
        if isinstance(node, syntax.RelationshipPattern):
            if node.properties is not None:
                return True
            if node.variable is not None:
                relationships.add(node.variable)
    for node in nodes:
        if isinstance(node, syntax.Property | syntax.Index):
            subject = node.subject
            if not isinstance(subject, syntax.Variable) or subject.name in relationships:
                return True
        if isinstance(node, syntax.FunctionCall) and node.name in ("properties", "keys"):
            return True
    return False


def cypher_caps(settings: Settings) -> Caps:
    return Caps(
        settings.cypher_max_rows, settings.cypher_max_paths, settings.cypher_max_memory_mb * 2**20
    )


async def in_thread(run: Run, work: Callable[[], T]) -> T:
    """`work` in a thread; cancelled, the request tells the run to stop at its next tick."""
    try:
        return await asyncio.to_thread(work)
    except asyncio.CancelledError:
        run.cancelled.set()
        raise


async def query_graph(
    conn: Connection, engine: CypherEngine, query: syntax.Query, parameters: dict[str, Any]
) -> tuple[QueryGraph, Run]:
    graph = await engine.tables.read(conn, engine.paths, reads_relationship_properties(query))
    return graph, Run(graph, parameters, engine.caps)


async def run_query(
    conn: Connection, engine: CypherEngine, text: str, parameters: dict[str, Any]
) -> tuple[QueryGraph, Result]:
    """The columns and rows of a query (the CLI's table)."""
    query = parse(text)
    graph, run = await query_graph(conn, engine, query, parameters)
    return graph, await in_thread(run, lambda: execute(query, run))


async def explain_query(
    conn: Connection, engine: CypherEngine, text: str, parameters: dict[str, Any]
) -> str:
    query = parse(text)
    _, run = await query_graph(conn, engine, query, parameters)
    return explain(query, run)


async def cypher_query(
    conn: Connection, engine: CypherEngine, body: wire.CypherQueryRequest
) -> wire.CypherResponse:
    graph, result = await run_query(conn, engine, body.query, body.parameters)
    found = collect(result)
    edges: dict[tuple[int, int, int], tuple[dict[str, Any], datetime]] = {}
    if found.rels:
        ends = sorted({end for rel in found.rels for end in (rel.start, rel.end)})
        for key, (text, moment) in (await store.read_edges_between(conn, ends)).items():
            properties = json.loads(text) if text else {}
            edges[key] = (properties if isinstance(properties, dict) else {}, moment)
    if not found.nodes and not found.rels and not found.literals:
        raise not_found("resource not found: the query matched nothing", "cypher")
    with evaluation_errors():  # a parameter nested too deep to write back, say
        return graph_answer(graph, found, edges, body.include_properties)
