"""`graphsvc query`: a Cypher query on the store, as POST /api/v2/graphs/cypher runs it,
printed as a table (or the API's answer with --json, or its plan with --explain)."""

from __future__ import annotations

import json
from typing import Any

import click

from graphsvc.cli.common import emit, fail, load_settings, read_store
from graphsvc.store import db as database


def parse_parameter(text: str) -> tuple[str, Any]:
    """`name=value`: the value as JSON when it reads as JSON, else as text."""
    name, equals, raw = text.partition("=")
    if not equals or not name:
        fail(f"--param {text!r}: write it as name=value (the value as JSON, or text)")
    try:
        return name, json.loads(raw)
    except json.JSONDecodeError:
        return name, raw


@click.command()
@click.argument("text")
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="A $NAME of the query (the value as JSON, or text); again for each.",
)
@click.option("--include-properties", is_flag=True, help="With --json: every property.")
@click.option("--json", "as_json", is_flag=True, help="Print the API's answer.")
@click.option("--explain", is_flag=True, help="Print the query's plan instead of running it.")
def query(
    text: str, params: tuple[str, ...], include_properties: bool, as_json: bool, explain: bool
) -> None:
    """Run the read-only Cypher query TEXT (docs/cypher.md), for example
    graphsvc query 'MATCH (u:User {hasspn: true}) RETURN u.name'."""
    from graphsvc import wire
    from graphsvc.cypher import service
    from graphsvc.cypher.graph import NodeTables
    from graphsvc.graph.paths import PathIndex

    settings = load_settings()
    parameters = dict(parse_parameter(p) for p in params)

    async def work(conn: database.Connection) -> Any:
        index = PathIndex(folder=settings.resolved_path_index_folder())
        engine = service.CypherEngine(index, NodeTables(), service.cypher_caps(settings))
        if explain:
            return await service.explain_query(conn, engine, text, parameters)
        if as_json:
            body = wire.CypherQueryRequest(text, include_properties, parameters)
            return await service.cypher_query(conn, engine, body)
        graph, result = await service.run_query(conn, engine, text, parameters)
        names = await service.node_names(conn, result)
        return table(result.columns, [[shown(v, graph, names) for v in row] for row in result.rows])

    found = read_store(settings, work)
    if as_json:
        emit(True, found, "")
    else:
        click.echo(found)


def shown(value: Any, graph: Any, names: dict[int, str]) -> str:
    """A value as a table shows it: a node by its name (`names`), a relationship by its kind,
    a path as its steps."""
    from graphsvc.cypher.answer import literal_value
    from graphsvc.cypher.values import Node, Path, Rel

    if isinstance(value, Node):
        return names.get(value.id, "")
    if isinstance(value, Rel):
        return f"-[{graph.kind_names.get(value.kind, '?')}]->"
    if isinstance(value, Path):
        steps = [shown(Node(value.nodes[0]), graph, names)]
        for rel, before, node in zip(value.rels, value.nodes[:-1], value.nodes[1:], strict=True):
            kind = graph.kind_names.get(rel.kind, "?")
            arrow = f"-[{kind}]->" if rel.start == before else f"<-[{kind}]-"
            steps.append(f"{arrow} {shown(Node(node), graph, names)}")
        return " ".join(steps)
    if isinstance(value, list):
        return "[" + ", ".join(shown(v, graph, names) for v in value) + "]"
    if isinstance(value, str):
        return value
    return json.dumps(literal_value(value, graph))


def table(columns: list[str], rows: list[list[str]]) -> str:
    if not rows:
        return f"{' | '.join(columns)}\n(no rows)"
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(line.rstrip() for line in lines)
