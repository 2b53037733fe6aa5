"""`POST /api/v2/graphs/cypher` and `graphsvc query`: a query parsed, run on the graph as it
is now (on the event loop if it ends within a millisecond, else in a thread of its own: the
server keeps answering meanwhile, and the query stops when its request is cancelled), and
its rows answered as the reference's unified graph.
"""

from __future__ import annotations

import asyncio
import json
import time
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
from graphsvc.cypher.graph import Needs, NodeTables, QueryGraph
from graphsvc.cypher.parse import parse
from graphsvc.cypher.runtime import INLINE_BUDGET_SECONDS, Caps, InlineBudgetSpent, Run
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


def query_needs(query: syntax.Query, parameters: dict[str, Any]) -> Needs:
    """What the query reads of the nodes beyond their labels, so that the node table has it
    before the query runs (cypher/graph.py): every property key it names (`x.key`,
    `x['key']`, a pattern's `{key: ...}`), whether it reads whole property maps, and the
    object ids a pattern's `{objectid: ...}` names as a constant or a parameter (found in the
    store; any other objectid read makes the table's objectid column). Relationship
    properties are loaded when it may read one: a relationship pattern's property map, a
    property of a relationship variable, or any property read of something other than a
    plain variable."""
    relationships: set[str] = set()
    parts: list[Any] = []
    for single in query.parts:
        for clause in single.clauses:
            parts.extend(walk(clause))
    keys: set[str] = set()
    object_ids: set[str] = set()
    maps = edge_properties = False

    def pattern_map(properties: syntax.MapExpr | syntax.Parameter) -> list[tuple[str, Any]]:
        if isinstance(properties, syntax.MapExpr):
            return [
                (k, v.value if isinstance(v, syntax.Literal) else parameters.get(v.name))
                if isinstance(v, syntax.Literal | syntax.Parameter)
                else (k, v)
                for k, v in properties.items
            ]
        given = parameters.get(properties.name)
        return list(given.items()) if isinstance(given, dict) else []

    for part in parts:
        if isinstance(part, syntax.RelationshipPattern):
            if part.properties is not None:
                edge_properties = True
            if part.variable is not None:
                relationships.add(part.variable)
        elif isinstance(part, syntax.NodePattern) and part.properties is not None:
            for key, value in pattern_map(part.properties):
                if key == "objectid" and isinstance(value, str):
                    object_ids.add(value)
                else:
                    keys.add(key)
    for part in parts:
        if isinstance(part, syntax.Property):
            subject = part.subject
            keys.add(part.key)  # a relationship's variable may name a node in a later part
            if not isinstance(subject, syntax.Variable) or subject.name in relationships:
                edge_properties = True
        elif isinstance(part, syntax.Index):
            edge_properties = True
            if isinstance(part.index, syntax.Literal) and isinstance(part.index.value, str):
                keys.add(part.index.value)
            else:
                maps = True
        elif isinstance(part, syntax.FunctionCall) and part.name in ("properties", "keys"):
            maps = edge_properties = True
    return Needs(frozenset(keys), maps, frozenset(object_ids), edge_properties)


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


async def run_to_end(query: syntax.Query, run: Run) -> Result:
    """The query's rows: computed on the event loop if that takes at most
    INLINE_BUDGET_SECONDS (and no pass over more than INLINE_ELEMENTS values at once), else
    again, from the start, in a thread (runtime.py)."""
    run.inline_until = time.perf_counter() + INLINE_BUDGET_SECONDS
    try:
        return execute(query, run)
    except InlineBudgetSpent:
        pass
    again = Run(run.graph, run.parameters, run.caps, deadline=run.deadline)
    return await in_thread(again, lambda: execute(query, again))


async def query_graph(
    conn: Connection, engine: CypherEngine, query: syntax.Query, parameters: dict[str, Any]
) -> tuple[QueryGraph, Run]:
    graph = await engine.tables.read(conn, engine.paths, query_needs(query, parameters))
    return graph, Run(graph, parameters, engine.caps)


async def run_query(
    conn: Connection, engine: CypherEngine, text: str, parameters: dict[str, Any]
) -> tuple[QueryGraph, Result]:
    """The columns and rows of a query (the CLI's table)."""
    query = parse(text)
    graph, run = await query_graph(conn, engine, query, parameters)
    return graph, await run_to_end(query, run)


async def node_names(conn: Connection, result: Result) -> dict[int, str]:
    """id -> name (or object id, without one) of the nodes in the rows."""
    found = collect(result)
    ids = sorted({*found.nodes, *(n for rel in found.rels for n in (rel.start, rel.end))})
    stored = await store.read_nodes(conn, ids) if ids else {}
    return {node: name or object_id for node, (object_id, name, _, _) in stored.items()}


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
    nodes = await store.read_nodes(conn, list(found.nodes)) if found.nodes else {}
    edges: dict[tuple[int, int, int], tuple[dict[str, Any], datetime]] = {}
    if found.rels:
        ends = sorted({end for rel in found.rels for end in (rel.start, rel.end)})
        for key, (text, moment) in (await store.read_edges_between(conn, ends)).items():
            properties = json.loads(text) if text else {}
            edges[key] = (properties if isinstance(properties, dict) else {}, moment)
    if not found.nodes and not found.rels and not found.literals:
        raise not_found("resource not found: the query matched nothing", "cypher")
    with evaluation_errors():  # a parameter nested too deep to write back, say
        return graph_answer(graph, found, nodes, edges, body.include_properties)
