"""Generated graphs and generated read queries: each query's rows from graphsvc's Cypher
engine checked against FalkorDB's on the same graph (tests/cypher_oracle.py).

A graph is 2 to 12 nodes (User, Group or Computer, or two of them, and Base; `objectid`,
`name`, and maybe `enabled`, `n` and `tags`) and up to 25 relationships (MemberOf, AdminTo,
HasSession; one of a type between two nodes, as graphsvc's store holds them; self-loops in
one graph of eight). graphsvc's executor is given it as it reads one (a `QueryGraph`: the
path index's adjacency and a node table, built in memory here, without a store or an
ingest); FalkorDB as `LoadedGraph` loads a store's. A query is one of six shapes (`SHAPES`)
filled in from constructs docs/cypher.md lists that FalkorDB also runs (not `=~`,
`datetime()`, nor a shortest path in MATCH).

FalkorDB (4.16) departs from openCypher in ways that its copy of a query works around, or
that the generators avoid:

- Within one MATCH it binds a relationship more than once (`(a)-->(b)<--(c)` with a = c),
  and two relationships joining the same two nodes count once when the query uses neither
  (`MATCH (a)-->(b) RETURN count(*)`). Its copy of each MATCH names the paths and requires
  their relationships distinct (`match`).
- `relationships(p)` of a path matched against its direction is reversed in place at every
  call (`id(relationships(p)[0]) = id(relationships(p)[1])` on a path of two): it is read
  once. No path is returned (FalkorDB's can be in the wrong order); `length(p)` is.
- `MATCH p = (a)-[*2]->(b:Group)` ignores `:Group`, and `MATCH p = (a)-[*2]->(b:User:Base)`
  brings the server down: its copy tests every label in WHERE.
- A pattern predicate under XOR brings the server down: none is generated there.
- A list comprehension in the RETURN right after an OPTIONAL MATCH reads, for a variable
  null on its row, the value of an earlier row (`[i IN range(0, 2) WHERE i < coalesce(b.n,
  0)]`): its copy carries the variables through a WITH first.
- A variable-length pattern misses the trails that start with a self-loop (`(a)-[*1..2]->(b)`
  over a->a and a->b lacks a->a->b): graphs with self-loops get no variable length.
- Two pattern comprehensions of one variable in one RETURN see each other's variable:
  each comprehension's variables are renamed apart (`items`).
- A variable-length relationship's variable is a path; `exists((a)-->())` is true for every
  node, and a pattern in RETURN is a list of paths: neither is generated.

Three departures these tests found are fixed, and tests hold them: a WHERE's pattern
predicate tested before its pattern's variables were bound, a WHERE on the MATCH's path
variable (a KeyError), and an undirected relationship that matched a self-loop twice, once
from each end (`test_an_undirected_relationship_matches_a_self_loop_once`); all three are
generated here.
"""

from __future__ import annotations

import functools
import json
import operator
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from graphsvc.cypher import columnar
from graphsvc.cypher.execute import execute, explain
from graphsvc.cypher.graph import (
    COLUMN_KEYS,
    Column,
    ColumnMaker,
    KindLabels,
    NodeTable,
    QueryGraph,
)
from graphsvc.cypher.parse import parse
from graphsvc.cypher.runtime import Caps, Run
from graphsvc.cypher.values import group_key, order_key
from graphsvc.graph.path_index import Adjacency, GraphIndex, ObjectIds, hashes_of
from graphsvc.store.paths import GraphVersion
from tests.cypher_oracle import LoadedGraph, Oracle, StoreRows
from tests.test_cypher import normal

KINDS = ("User", "Group", "Computer")
TYPES = ("MemberOf", "AdminTo", "HasSession")
LETTERS = "abc"  # of the names: short, so that STARTS WITH and CONTAINS find some
TAGS = ("x", "y", "xy")

# FalkorDB's refusals that are its limitations, not graphsvc's faults: an example FalkorDB
# refuses with one of these words is skipped, any other refusal fails. None: the generators
# write no query it refuses (those it would, such as `size(r)` of a variable-length `r`,
# "Type mismatch: expected List, String, or Null but was Path", are not generated).
FALKORDB_LIMITATIONS: tuple[str, ...] = ()


# --- graphs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Graph:
    """Node `i + 1` is `nodes[i]`: its labels and its properties; edges as (start, type,
    end), at most one of a type between two nodes, as graphsvc's store holds them."""

    nodes: tuple[tuple[tuple[str, ...], dict[str, Any]], ...]
    edges: tuple[tuple[int, str, int], ...]

    @property
    def loops(self) -> bool:
        return any(start == end for start, _, end in self.edges)


# A node's kinds, `enabled`, `n` and `tags` (None: the property is absent).
NODE_FIELDS = st.tuples(
    st.lists(st.sampled_from(KINDS), min_size=1, max_size=2, unique=True),
    st.none() | st.booleans(),
    st.none() | st.integers(-2, 4),
    st.none() | st.lists(st.sampled_from(TAGS), max_size=2),
)


@functools.cache
def graph_parts(count: int, size: int) -> st.SearchStrategy[Any]:
    """`count` nodes' names and fields, and `size` edges among them (made once for each: a
    strategy made at every draw is validated again, which took most of an example's time)."""
    ends = st.integers(1, count)
    return st.tuples(
        st.lists(
            st.text(LETTERS, min_size=1, max_size=3), min_size=count, max_size=count, unique=True
        ),
        st.lists(NODE_FIELDS, min_size=count, max_size=count),
        st.lists(
            st.tuples(ends, st.sampled_from(TYPES), ends), min_size=size, max_size=size, unique=True
        ),
        st.integers(0, 7),
    )


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    count = draw(st.sampled_from(range(2, 13)))  # integers() would favour the smallest
    most = min(25, count * count * len(TYPES) // 2)
    size = draw(st.sampled_from([0, *range(most // 3, most + 1)]))  # no edge, or some
    names, fields, edges, chance = draw(graph_parts(count, size))
    nodes = []
    for number, (name, (kinds, enabled, n, tags)) in enumerate(
        zip(names, fields, strict=True), start=1
    ):
        properties: dict[str, Any] = {"objectid": f"S-1-5-{number:02d}", "name": name}
        for key, value in (("enabled", enabled), ("n", n), ("tags", tags)):
            if value is not None:
                properties[key] = value
        nodes.append(((*sorted(kinds, key=KINDS.index), "Base"), properties))
    if chance:  # self-loops in one graph of eight
        edges = [edge for edge in edges if edge[0] != edge[2]]
    return Graph(tuple(nodes), tuple(edges))


def query_graph(graph: Graph) -> QueryGraph:
    """The graph as graphsvc's executor reads it: node ids 1..N, a kind id for each label
    and relationship type."""
    size = len(graph.nodes) + 1
    kind_ids = {name: i for i, name in enumerate(("Base", *KINDS, *TYPES), start=1)}
    version = GraphVersion(1, "generated", len(kind_ids))
    starts = np.array([start for start, _, _ in graph.edges], dtype=np.int64)
    ends = np.array([end for _, _, end in graph.edges], dtype=np.int64)
    kinds = np.array([kind_ids[kind] for _, kind, _ in graph.edges], dtype=np.int16)
    ids = np.arange(1, size, dtype=np.int64)
    object_ids = [properties["objectid"] for _, properties in graph.nodes]
    index = GraphIndex(
        version,
        size,
        Adjacency.build(starts, ends, kinds, size),
        Adjacency.build(ends, starts, kinds, size),
        kind_ids,
        np.zeros(size, dtype=bool),
        ObjectIds.build(hashes_of(object_ids), ids),
    )
    label_sets: dict[tuple[str, ...], int] = {}
    label_set_of = np.full(size, -1, dtype=np.int32)
    members: dict[str, list[int]] = {}
    for node, (labels, _) in enumerate(graph.nodes, start=1):
        label_set_of[node] = label_sets.setdefault(labels, len(label_sets))
        for label in labels:
            members.setdefault(label, []).append(node)
    by_label = {label: np.array(nodes, dtype=np.int64) for label, nodes in members.items()}
    table = NodeTable(
        version,
        ids,
        list(label_sets),
        label_set_of,
        by_label,
        np.full(size, np.nan),
        KindLabels(list(label_sets), label_set_of, by_label),
    )
    for key in ("lastseen", "system_tags"):
        table.columns[key] = table.derived_column(key)
    # Every property as a column, as the store's reads would make them, and the whole maps.
    for key in {key for _, properties in graph.nodes for key in properties}:
        maker = ColumnMaker(key, size)
        maker.add(
            [
                (node, value if key in COLUMN_KEYS else json.dumps(value))
                for node, (_, properties) in enumerate(graph.nodes, start=1)
                if (value := properties.get(key)) is not None
            ]
        )
        table.columns[key] = maker.made()
    table.texts = [None, *(json.dumps(properties) for _, properties in graph.nodes)]
    return QueryGraph(index, table, {v: k for k, v in kind_ids.items()})


def store_rows(graph: Graph) -> StoreRows:
    rows = StoreRows()
    for node, (labels, properties) in enumerate(graph.nodes, start=1):
        rows.nodes.append((node, labels, dict(properties)))
    rows.edges.extend(graph.edges)
    return rows


def ours(graph: QueryGraph, query: str) -> list[list[Any]]:
    run = Run(graph, {}, Caps(100_000, 10_000, 2**30))
    result = execute(parse(query), run)
    object_ids = {node: graph.nodes.value(node, "objectid") for node in graph.nodes.ids.tolist()}
    return [[normal(v, graph, object_ids) for v in row] for row in result.rows]


# --- queries -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One query as graphsvc is asked it (`ours`) and as FalkorDB is (`theirs`: the same
    question, with FalkorDB's departures worked around); `ordered`: the rows are ordered on
    a key unique to each, and compared in order."""

    ours: str
    theirs: str
    ordered: bool = False
    plan: str | None = None  # words graphsvc's plan for it must hold (`explain`)


Clause = tuple[str, str]  # a clause as graphsvc and as FalkorDB are asked it


def same(text: str) -> Clause:
    return text, text


def query(*clauses: Clause, ordered: bool = False, plan: str | None = None) -> Case:
    return Case(" ".join(c[0] for c in clauses), " ".join(c[1] for c in clauses), ordered, plan)


def literal(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    return str(value)


# The strategies below are made once for each set of variables (`functools.cache`): made at
# every draw, hypothesis validated them again, which took most of an example's time.

NAMES = st.text(LETTERS, min_size=1, max_size=2)
SMALL = st.integers(-1, 4)
COMPARISONS = ("=", "<>", "<", ">", "<=", ">=")


@functools.cache
def node_tests(v: str) -> st.SearchStrategy[str]:
    """Tests of the node bound to `v`: its properties and labels."""
    return st.one_of(
        st.tuples(st.sampled_from(COMPARISONS), SMALL).map(lambda t: f"{v}.n {t[0]} {t[1]}"),
        st.sampled_from(
            [
                f"{v}.enabled",
                f"NOT {v}.enabled",
                f"{v}.enabled = true",
                f"{v}.enabled <> false",
                f"{v}.enabled IS NULL",
                f"{v}.enabled IS NOT NULL",
                f"{v}.n IS NULL",
                f"{v}.tags IS NOT NULL",
                f"size({v}.tags) > 0",
                f"{v}:User",
                f"{v}:Group:Computer",
                f"NOT {v}:Computer",
            ]
        ),
        st.lists(NAMES, min_size=1, max_size=3).map(lambda ns: f"{v}.name IN {literal(ns)}"),
        st.lists(SMALL | st.none(), min_size=1, max_size=3).map(
            lambda ns: f"{v}.n IN {literal(ns)}"
        ),
        st.tuples(st.sampled_from(["STARTS WITH", "ENDS WITH", "CONTAINS"]), NAMES).map(
            lambda t: f"{v}.name {t[0]} '{t[1]}'"
        ),
        st.tuples(st.sampled_from(COMPARISONS), NAMES).map(lambda t: f"{v}.name {t[0]} '{t[1]}'"),
        st.sampled_from(TAGS).map(lambda tag: f"'{tag}' IN {v}.tags"),
        st.tuples(st.sampled_from(["any", "all", "none", "single"]), st.sampled_from(TAGS)).map(
            lambda t: f"{t[0]}(t IN {v}.tags WHERE t STARTS WITH '{t[1]}')"
        ),
    )


@functools.cache
def pair_tests(a: str, b: str) -> st.SearchStrategy[str]:
    return st.sampled_from(
        [
            f"{a}.name < {b}.name",
            f"{a}.n = {b}.n",
            f"{a}.n <= {b}.n",
            f"{a} = {b}",
            f"{a} <> {b}",
            f"{a}.enabled = {b}.enabled",
            f"{a}.name STARTS WITH left({b}.name, 1)",
        ]
    )


ARROWS = ("-[:{}]->", "<-[:{}]-", "-[:{}]-", "-->")
ARROW_TYPES = (*TYPES, "MemberOf|AdminTo")


@functools.cache
def pattern_tests(v: str, others: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    """Pattern predicates from `v`, to an unnamed node or to one of `others`."""
    far = st.sampled_from(["()", "(:Group)", "(:User)", "({enabled: true})"])
    if others:
        far = far | st.sampled_from([f"({o})" for o in others])
    arrow = st.tuples(st.sampled_from(ARROWS), st.sampled_from(ARROW_TYPES)).map(
        lambda t: t[0].format(t[1])
    )
    return st.tuples(st.booleans(), arrow, far).map(
        lambda t: f"{'NOT ' if t[0] else ''}({v}){t[1]}{t[2]}"
    )


def joined(
    operators: tuple[str, ...],
) -> Callable[[st.SearchStrategy[str]], st.SearchStrategy[str]]:
    def join(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(operators), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            inner.map(lambda p: f"NOT ({p})"),
        )

    return join


@functools.cache
def conditions(variables: tuple[str, ...]) -> st.SearchStrategy[str | None]:
    """A WHERE's condition, or none: tests of the node variables joined by AND, OR, XOR and
    NOT, and pattern predicates among them, never under an XOR (a pattern predicate there
    brings FalkorDB's server down)."""
    bases = [node_tests(v) for v in variables]
    bases += [pair_tests(a, b) for a in variables for b in variables if a < b]
    plain = st.recursive(st.one_of(bases), joined(("AND", "OR", "XOR")), max_leaves=3)
    tests = [pattern_tests(v, tuple(o for o in variables if o != v)) for v in variables]
    either = st.recursive(st.one_of(plain, *tests), joined(("AND", "OR")), max_leaves=3)
    return st.one_of(st.none(), st.none(), either)  # none in two of three


@functools.cache
def node_values(v: str) -> st.SearchStrategy[str]:
    """Expressions of the node bound to `v` (which may be null, after OPTIONAL MATCH)."""
    return st.one_of(
        st.sampled_from(
            [
                v,
                f"{v}.name",
                f"{v}.objectid",
                f"{v}.n",
                f"{v}.enabled",
                f"{v}.tags",
                f"{v}.n + 1",
                f"{v}.n * 2 - {v}.n",
                f"coalesce({v}.n, -1)",
                f"coalesce({v}.enabled, {v}.n, {v}.name)",
                f"{v}.n / 2",
                f"{v}.n % 3",
                f"toString({v}.n)",
                f"toUpper({v}.name)",
                f"substring({v}.name, 1)",
                f"{v}.name + '!'",
                f"size({v}.tags)",
                f"{v}.tags[0]",
                f"{v}:User",
                f"{v}.n IS NULL",
                f"CASE WHEN {v}.enabled THEN 'on' WHEN NOT {v}.enabled THEN 'off' ELSE 'unset' END",
                f"CASE {v}.n WHEN 0 THEN 'zero' WHEN 1 THEN 'one' ELSE 'other' END",
                f"CASE WHEN {v}.n > 1 THEN {v}.n END",
                f"[t IN coalesce({v}.tags, []) | t + {v}.name]",
                f"[t IN {v}.tags WHERE t <> 'x']",
                f"[i IN range(0, 2) WHERE i < coalesce({v}.n, 0) | i * 2]",
                f"size([({v})-[:MemberOf]->(q) | q])",
                f"size([({v})<-[:AdminTo|HasSession]-(q) WHERE q.enabled | q.name])",
                f"size([({v})--(q:Group) | q])",
            ]
        ),
        node_tests(v),
    )


@functools.cache
def values(
    nodes: tuple[str, ...], rels: tuple[str, ...] = (), path: bool = False
) -> st.SearchStrategy[str]:
    """An expression of the variables: of a node, of a relationship, the path's length."""
    found = [node_values(v) for v in nodes]
    found += [
        st.sampled_from([r, f"type({r})", f"startNode({r}).name", f"endNode({r}) = {nodes[-1]}"])
        for r in rels
    ]
    return st.one_of(*found, *([st.just("length(p)")] if path else []))


AGGREGATES = (
    "count(*)",
    "count({v})",
    "count(DISTINCT {v})",
    "count({v}.enabled)",
    "size(collect({v}.name))",
    "size(collect(DISTINCT {v}.n))",
    "min({v}.name)",
    "max({v}.name)",
    "min({v}.n)",
    "max({v}.n)",
    "sum({v}.n)",
    "avg({v}.n)",
    "count(DISTINCT {v}.enabled)",
)


@functools.cache
def aggregates(variables: tuple[str, ...]) -> st.SearchStrategy[list[str]]:
    one = st.tuples(st.sampled_from(AGGREGATES), st.sampled_from(variables)).map(
        lambda t: t[0].format(v=t[1])
    )
    return st.lists(one, min_size=1, max_size=2)


def items(expressions: list[str]) -> str:
    """`RETURN`'s items, `e AS c0, ...`, the variables of their comprehensions made unique to
    each (two pattern comprehensions of one variable in one RETURN see each other's in
    FalkorDB: `size([(d)<-[:AdminTo]-(q) | q])` then makes `size([(d)-->(q) | q])` 0)."""
    return ", ".join(
        re.sub(r"\b([qti])\b", rf"\g<1>{n}", e) + f" AS c{n}" for n, e in enumerate(expressions)
    )


# --- patterns ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pattern:
    """A pattern as graphsvc is asked it and as FalkorDB is: its nodes' labels tested in WHERE
    (`MATCH p = (a)-[*2]->(b:Group)` finds paths to nodes of any label in FalkorDB, and
    `MATCH p = (a)-[*2]->(b:User:Base)` brings its server down)."""

    ours: str
    theirs: str
    hops: int
    labels: tuple[str, ...] = ()  # FalkorDB's WHERE parts: `b:User:Base`
    path: str | None = None  # its path variable, when it names one

    def named(self, path: str) -> Pattern:
        return replace(
            self, ours=f"{path} = {self.ours}", theirs=f"{path} = {self.theirs}", path=path
        )

    def then(self, other: Pattern, relationship: str) -> Pattern:
        return Pattern(
            self.ours + relationship + other.ours,
            self.theirs + relationship + other.theirs,
            self.hops + other.hops + 1,
            self.labels + other.labels,
        )


LABELS = st.sampled_from(
    ("",) * 8 + (":User", ":Group", ":Computer", ":Base", ":User:Base", ":Group:Computer")
)
PROPERTIES = st.sampled_from(("",) * 10 + (" {enabled: true}", " {n: 1}", "name"))
HOP_TYPES = st.sampled_from(
    ("", "", "", ":MemberOf", ":AdminTo", ":HasSession", ":MemberOf|AdminTo", ":AdminTo|HasSession")
)
LENGTHS = st.sampled_from(("", "", "", "*1..2", "*0..2", "*2", "*..2"))


def node_pattern(draw: st.DrawFn, v: str, bound: frozenset[str] = frozenset()) -> Pattern:
    """`(v:Labels {properties})`; `(v)` when `v` is already bound."""
    if v in bound:
        return Pattern(f"({v})", f"({v})", 0)
    labels, properties = draw(LABELS), draw(PROPERTIES)
    if properties == "name":
        properties = f" {{name: '{draw(NAMES)}'}}"
    tested = (f"{v}{labels}",) if labels else ()
    return Pattern(f"({v}{labels}{properties})", f"({v}{properties})", 0, tested)


def hop(draw: st.DrawFn, name: str, loops: bool) -> str:
    """A relationship pattern, named `name` or not when of fixed length. On a graph with
    self-loops, none of variable length (FalkorDB misses the trails that start with a
    self-loop)."""
    types = draw(HOP_TYPES)
    length = "" if loops else draw(LENGTHS)
    direction = draw(st.sampled_from(("out", "in", "both")))
    inner = f"{name if not length and draw(st.booleans()) else ''}{types}{length}"
    left, right = ("<-" if direction == "in" else "-"), ("->" if direction == "out" else "-")
    return f"{left}[{inner}]{right}" if inner else f"{left}{right}"


def path_pattern(
    draw: st.DrawFn,
    nodes: tuple[str, ...],
    loops: bool,
    bound: frozenset[str] = frozenset(),
    rels: tuple[str, str] = ("r", "s"),
) -> Pattern:
    """(nodes[0])-..-(nodes[1])-..., its relationships named from `rels` (or not)."""
    pattern = node_pattern(draw, nodes[0], bound)
    for name, v in zip(rels, nodes[1:], strict=False):
        pattern = pattern.then(node_pattern(draw, v, bound), hop(draw, name, loops))
    return pattern


def rel_names(patterns: list[Pattern]) -> tuple[str, ...]:
    return tuple(
        r for r in ("r", "s") if any(f"[{r}:" in p.ours or f"[{r}]" in p.ours for p in patterns)
    )


def match(patterns: list[Pattern], where: str | None, optional: bool = False) -> Clause:
    """A MATCH as graphsvc and as FalkorDB are asked it. FalkorDB's names each pattern's path
    and requires the relationships of all of them to be distinct: openCypher's rule, which
    FalkorDB does not apply (naming the paths also makes it walk parallel relationships
    apart)."""
    keyword = "OPTIONAL MATCH " if optional else "MATCH "
    ours = keyword + ", ".join(p.ours for p in patterns) + (f" WHERE {where}" if where else "")
    tested = [f"({where})"] if where else []
    paths, texts = [], []
    for number, pattern in enumerate(patterns):
        tested += pattern.labels
        if pattern.hops and not pattern.path:
            pattern = pattern.named(f"fp{number}")
        texts.append(pattern.theirs)
        paths += [pattern.path] if pattern.path else []
    if paths:  # `relationships(p)` once: FalkorDB reverses a path in place at each call
        found = " + ".join(f"relationships({p})" for p in paths)
        tested.append(
            f"any(rs IN [{found}] WHERE all(i IN range(0, size(rs) - 2)"
            " WHERE all(j IN range(i + 1, size(rs) - 1) WHERE id(rs[i]) <> id(rs[j]))))"
        )
    theirs = keyword + ", ".join(texts) + (f" WHERE {' AND '.join(tested)}" if tested else "")
    return ours, theirs


def paging(draw: st.DrawFn) -> str:
    skip = draw(st.sampled_from((None, None, None, 0, 1, 2)))
    limit = draw(st.sampled_from((None, None, None, 1, 2, 4)))
    return (f" SKIP {skip}" if skip is not None else "") + (
        f" LIMIT {limit}" if limit is not None else ""
    )


# --- query shapes --------------------------------------------------------------------------


def matches(draw: st.DrawFn, loops: bool) -> Case:
    """MATCH of one to three nodes (a path of one or two relationships, two patterns, or a
    cartesian product), WHERE, then RETURN of values, of DISTINCT values, of aggregates, or
    WITH the nodes and a WHERE on them (pattern predicates among them) first."""
    shape = draw(st.sampled_from(("node", "path", "path", "two patterns", "product")))
    if shape == "node":
        nodes: tuple[str, ...] = ("a",)
        patterns = [node_pattern(draw, "a")]
    elif shape == "path":
        nodes = draw(st.sampled_from((("a", "b"), ("a", "b", "c"), ("a", "b", "a"))))
        patterns = [path_pattern(draw, nodes, loops)]
        if draw(st.booleans()):
            patterns = [patterns[0].named("p")]
    elif shape == "two patterns":
        nodes = ("a", "b", "c")
        patterns = [
            path_pattern(draw, ("a", "b"), loops),
            path_pattern(draw, ("c", "b"), loops, frozenset("b"), ("s", "s")),
        ]
    else:
        nodes = ("a", "b")
        patterns = [node_pattern(draw, "a"), node_pattern(draw, "b")]
    nodes = tuple(dict.fromkeys(nodes))  # (a)-->(b)-->(a): a and b
    where = draw(conditions(nodes))
    path = any(p.path for p in patterns)
    if path and draw(st.booleans()):
        where = "length(p) > 1" + (f" AND {where}" if where else "")
    clauses = [match(patterns, where)]
    rels = rel_names(patterns)
    kind = draw(st.sampled_from(("values", "distinct", "aggregates", "with")))
    if kind == "with":
        kept = draw(conditions(nodes))
        clauses.append(same(f"WITH {', '.join(nodes)}" + (f" WHERE {kept}" if kept else "")))
        rels, path = (), False
    if kind == "aggregates":
        keys = draw(st.lists(values(nodes, rels, path), max_size=2))
        returned = f"RETURN {items(keys + draw(aggregates(nodes)))}"
    else:
        distinct = "DISTINCT " if kind == "distinct" else ""
        chosen = draw(st.lists(values(nodes, rels, path), min_size=1, max_size=3))
        returned = f"RETURN {distinct}{items(chosen)}"
    return query(*clauses, same(returned))


def optional_matches(draw: st.DrawFn, loops: bool) -> Case:
    """MATCH (or OPTIONAL MATCH) of a node, OPTIONAL MATCH of its neighbours one or two
    relationships away (from either end) with a WHERE of its own, and the rows or their
    aggregates by node."""
    leading = draw(st.sampled_from((False, False, False, True)))  # OPTIONAL MATCH first
    first = match([node_pattern(draw, "a")], draw(conditions(("a",))), leading)
    nodes = draw(st.sampled_from((("a", "b"), ("a", "b", "c"), ("b", "a"), ("c", "b", "a"))))
    pattern = path_pattern(draw, nodes, loops, frozenset("a"))
    second = match([pattern], draw(conditions(nodes)), optional=True)
    found = tuple(v for v in nodes if v != "a")
    if draw(st.booleans()):
        returned = ["a.name", *draw(st.lists(values(nodes), min_size=1, max_size=2))]
    else:
        returned = ["a.name", *draw(aggregates(found))]
    # FalkorDB's list comprehension right after an OPTIONAL MATCH sees the last bound value
    # of a variable that is null on the row: a WITH between them gives it the row's.
    carried = ("", f"WITH {', '.join(sorted(nodes))}")
    return query(first, second, carried, same(f"RETURN {items(returned)}"))


def aggregations(draw: st.DrawFn, loops: bool) -> Case:
    """MATCH, WITH a node and aggregates of the others (then a WHERE on both, with pattern
    predicates from the node), and RETURN: in an order unique to each row, paged, or as a
    multiset."""
    nodes = draw(st.sampled_from((("a", "b"), ("a", "b", "c"), ("b", "a"), ("b", "a", "c"))))
    clauses = [match([path_pattern(draw, nodes, loops)], draw(conditions(nodes)))]
    counted = draw(aggregates(tuple(v for v in nodes if v != "a")))
    names = [f"k{i}" for i in range(len(counted))]
    kept = draw(st.sampled_from((None, None, "k0 > 1", "k0 IS NOT NULL", "k0 <> 0", "pattern")))
    if kept == "pattern":
        kept = draw(conditions(("a",)))
    collected = ", ".join(f"{c} AS {n}" for c, n in zip(counted, names, strict=True))
    clauses.append(same(f"WITH a, {collected}" + (f" WHERE {kept}" if kept else "")))
    returned = f"RETURN {items(['a.name', *names])}"
    ordered = draw(st.booleans())
    if ordered:
        keys = draw(
            st.sampled_from(
                ("a.name", "a.name DESC", "a.objectid DESC", "k0 DESC, a.name", "k0, a.name DESC")
            )
        )
        if keys.startswith("k0") and counted[0].startswith(("min", "max", "avg")):
            keys = "a.name"  # null for a group of nulls, and the engines order nulls apart
        returned += f" ORDER BY {keys}{paging(draw)}"
    clauses.append(same(returned))
    return query(*clauses, ordered=ordered)


def orderings(draw: st.DrawFn, loops: bool) -> Case:
    """Rows in the order of a key unique to each, paged: the nodes of a MATCH of one node,
    the DISTINCT nodes of a path, or those a WITH kept in order (then matched on further)."""
    shape = draw(st.sampled_from(("node", "distinct", "with")))
    descending = draw(st.sampled_from(("", " DESC")))
    if shape == "node":
        first = match([node_pattern(draw, "a")], draw(conditions(("a",))))
        chosen = ["a.name", *draw(st.lists(values(("a",)), max_size=2))]
        returned = f"RETURN {items(chosen)} ORDER BY c0{descending}{paging(draw)}"
        return query(first, same(returned), ordered=True)
    nodes = draw(st.sampled_from((("a", "b"), ("b", "a"), ("a", "b", "c"))))
    first = match([path_pattern(draw, nodes, loops)], draw(conditions(nodes)))
    if shape == "distinct":
        key = draw(st.sampled_from(("a.name", "a.objectid", "toUpper(a.name) + a.objectid")))
        returned = f"RETURN DISTINCT {key} AS c0 ORDER BY c0{descending}{paging(draw)}"
        return query(first, same(returned), ordered=True)
    kept = same(f"WITH DISTINCT a ORDER BY a.name{descending}{paging(draw)}")
    then = match([path_pattern(draw, ("a", "d"), loops, frozenset("a"))], None, draw(st.booleans()))
    chosen = ["a.name", *draw(st.lists(values(("d",)), min_size=1, max_size=2))]
    return query(first, kept, then, same(f"RETURN {items(chosen)}"))


def unwinds(draw: st.DrawFn, loops: bool) -> Case:
    """UNWIND of a node's list, of a literal list before a MATCH, and of a collected list."""
    shape = draw(st.sampled_from(("tags", "literal", "collected")))
    if shape == "tags":
        source = draw(st.sampled_from(("a.tags", "coalesce(a.tags, [])", "a.tags + [a.name]")))
        returned = draw(
            st.sampled_from(
                ("RETURN a.name, t", "RETURN t, count(*)", "RETURN t, size(collect(a.name))")
            )
        )
        first = match([node_pattern(draw, "a")], draw(conditions(("a",))))
        return query(first, same(f"UNWIND {source} AS t"), same(returned))
    nodes = draw(st.sampled_from((("a",), ("a", "b"), ("b", "a"))))
    pattern = path_pattern(draw, nodes, loops)
    if shape == "literal":
        listed = literal(draw(st.lists(SMALL | st.none(), max_size=4)))
        where = f"a.n = u OR u IS NULL AND {draw(node_tests('a'))}"
        chosen = ["u", *draw(st.lists(values(nodes), max_size=2))]
        return query(
            same(f"UNWIND {listed} AS u"),
            match([pattern], where),
            same(f"RETURN {items(chosen)}"),
        )
    collected = draw(st.sampled_from(("collect(a.n)", "collect(DISTINCT a.name)", "collect(a)")))
    returned = "RETURN u.name, count(*)" if collected == "collect(a)" else "RETURN u, count(*)"
    return query(
        match([pattern], draw(conditions(nodes))),
        same(f"WITH {collected} AS found UNWIND found AS u"),
        same(returned),
    )


def unions(draw: st.DrawFn, loops: bool) -> Case:
    """Two queries' rows, as a set (UNION) or all of them (UNION ALL)."""
    width = draw(st.sampled_from((1, 2)))
    parts = []
    for v in ("a", "b"):
        nodes = draw(st.sampled_from(((v,), (v, "c"), ("c", v))))
        first = match([path_pattern(draw, nodes, loops)], draw(conditions(nodes)))
        chosen = draw(st.lists(values((v,)), min_size=width, max_size=width))
        parts.append(query(first, same(f"RETURN {items(chosen)}")))
    union = draw(st.sampled_from((" UNION ", " UNION ALL ")))
    return Case(union.join(p.ours for p in parts), union.join(p.theirs for p in parts))


@functools.cache
def column_tests(v: str) -> st.SearchStrategy[str]:
    """Tests of `v` that its property columns decide (cypher/match.py conjunct_test)."""
    return st.one_of(
        st.tuples(st.sampled_from(COMPARISONS), SMALL).map(lambda t: f"{v}.n {t[0]} {t[1]}"),
        st.sampled_from(
            [f"{v}.enabled", f"NOT {v}.enabled", f"{v}.enabled = false", f"{v}.n IS NULL"]
        ),
        st.sampled_from([f"{v}.enabled IS NOT NULL", f"{v}.name <> 'a'"]),
        NAMES.map(lambda name: f"{v}.name >= '{name}'"),
        st.tuples(st.sampled_from(["STARTS WITH", "ENDS WITH"]), NAMES).map(
            lambda t: f"{v}.name {t[0]} '{t[1]}'"
        ),
    )


COUNTED = "grouped and counted as arrays"  # columnar.pair_counts's plan
GROUP_KEYS = ("a", "a.name", "a.n", "a.enabled", "b", "b.n", "b.enabled")
COUNTS = ("count(*)", "count(a)", "count(b)", "count(DISTINCT a)", "count(DISTINCT b)")


def counted_hops(draw: st.DrawFn, loops: bool) -> Case:
    """One relationship between two nodes the columns test, grouped by the ends or their
    properties and counted (cypher/columnar.py pair_counts), in a RETURN or in a WITH that
    keeps some groups; ordered and paged when grouped by the names alone."""
    types = draw(st.sampled_from(("", ":MemberOf", ":AdminTo", ":MemberOf|AdminTo")))
    left, right = draw(st.sampled_from((("-", "->"), ("<-", "-"), ("-", "-"))))
    relationship = f"{left}[{types}]{right}" if types else f"{left}{right}"
    pattern = node_pattern(draw, "a").then(node_pattern(draw, "b"), relationship)
    tests = draw(st.lists(column_tests("a") | column_tests("b"), max_size=2))
    first = match([pattern], " AND ".join(tests) or None)
    keys = draw(st.lists(st.sampled_from(GROUP_KEYS), max_size=2, unique=True))
    counts = draw(st.lists(st.sampled_from(COUNTS), min_size=1, max_size=2, unique=True))
    names = [f"c{i}" for i in range(len(keys))] + [f"k{i}" for i in range(len(counts))]
    projected = ", ".join(f"{e} AS {n}" for e, n in zip([*keys, *counts], names, strict=True))
    ordered = keys == ["a.name"]
    order = f" ORDER BY k0 DESC, c0{paging(draw)}" if ordered else ""
    if draw(st.booleans()):
        return query(first, same(f"RETURN {projected}{order}"), ordered=ordered, plan=COUNTED)
    kept = same(f"WITH {projected} WHERE k0 > 1 RETURN {', '.join(names)}{order}")
    return query(first, kept, ordered=ordered, plan=COUNTED)


REACHED = "the nodes reached from the starts"  # columnar.reached_ends's plan
ENDS_ASKED = (
    ("RETURN count(DISTINCT b) AS n", False),
    ("RETURN DISTINCT b.name AS name ORDER BY name", True),
    ("RETURN b.enabled AS e, count(DISTINCT b) AS n, min(b.name) AS low", False),
    ("WITH DISTINCT b WHERE b.name >= 'b' RETURN count(*) AS n", False),
    ("RETURN size(collect(DISTINCT b.n)) AS ns, max(b.n) AS top", False),
)


def reached_nodes(draw: st.DrawFn, loops: bool) -> Case:
    """The nodes a variable-length relationship reaches, asked so that no repeated row
    changes the answer (cypher/columnar.py reached_ends): counted or listed DISTINCT, or
    grouped with aggregates that are DISTINCT, min or max. Not on graphs with self-loops
    (FalkorDB misses the trails that start with one)."""
    assume(not loops)
    types = draw(HOP_TYPES)
    left, right = draw(st.sampled_from((("-", "->"), ("<-", "-"))))
    length = draw(st.sampled_from(("*", "*1..", "*0..")))
    relationship = f"{left}[{types}{length}]{right}"
    pattern = node_pattern(draw, "a").then(node_pattern(draw, "b"), relationship)
    tests = draw(st.lists(column_tests("a") | column_tests("b"), max_size=2))
    asked, ordered = draw(st.sampled_from(ENDS_ASKED))
    first = match([pattern], " AND ".join(tests) or None)
    return query(first, same(asked), ordered=ordered, plan=REACHED)


SHAPES: dict[str, Callable[[st.DrawFn, bool], Case]] = {
    "matches": matches,
    "optional_matches": optional_matches,
    "aggregations": aggregations,
    "orderings": orderings,
    "unwinds": unwinds,
    "unions": unions,
    "counted_hops": counted_hops,
    "reached_nodes": reached_nodes,
}


@st.composite
def cases(draw: st.DrawFn, shape: str) -> tuple[Graph, Case]:
    graph = draw(graphs())
    return graph, SHAPES[shape](draw, graph.loops)


# --- the comparison ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    started = Oracle()
    yield started
    started.close()


def check(oracle: Oracle, graph: Graph, case: Case) -> None:
    asked = query_graph(graph)
    if case.plan is not None:
        plan = explain(parse(case.ours), Run(asked, {}, Caps(100_000, 10_000, 2**30)))
        assert case.plan in plan, (case.ours, plan)
    mine = ours(asked, case.ours)
    loaded = LoadedGraph(oracle, store_rows(graph))
    try:
        theirs = loaded.rows(case.theirs)
    except Exception as error:
        if any(words in str(error) for words in FALKORDB_LIMITATIONS):
            return
        raise
    finally:
        loaded.graph.delete()
    if not case.ordered:
        mine, theirs = sorted(mine, key=repr), sorted(theirs, key=repr)
    assert mine == theirs, (case, mine, theirs)


EXAMPLES = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_generated_queries_answer_as_falkordb_does(oracle: Oracle, shape: str) -> None:
    @EXAMPLES
    @given(case=cases(shape))
    def compare(case: tuple[Graph, Case]) -> None:
        check(oracle, *case)

    compare()


def test_an_undirected_relationship_matches_a_self_loop_once(oracle: Oracle) -> None:
    """openCypher (and FalkorDB) match a self-loop once by an undirected relationship; one
    from each end was graphsvc's count until it was mended."""
    graph = Graph(
        (
            (("User", "Base"), {"objectid": "S-1-5-01", "name": "a"}),
            (("Group", "Base"), {"objectid": "S-1-5-02", "name": "b"}),
        ),
        ((1, "MemberOf", 1), (1, "MemberOf", 2)),
    )
    counted = same("MATCH (a)-[r]-(b) RETURN a.name, b.name, count(r)")
    # The same counted as arrays (cypher/columnar.py), which takes each direction apart.
    as_arrays = same("MATCH (a)-[:MemberOf]-(b) RETURN a.name, b.name, count(*)")
    for asked, plan in ((counted, None), (as_arrays, COUNTED)):
        check(oracle, graph, query(asked, plan=plan))
        assert sorted(ours(query_graph(graph), asked[0])) == [
            ["a", "a", 1],
            ["a", "b", 1],
            ["b", "a", 1],
        ]


# Letters of one, two, three and four UTF-8 bytes, a lone surrogate and a NUL.
STRING_LETTERS = st.sampled_from(["a", "b", "\u00e9", "\u4e2d", "\U0001f600", "\ud800", "\x00"])
STRINGS = st.text(STRING_LETTERS, max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.none() | STRINGS, min_size=1, max_size=20),
    wanted=STRINGS,
    op=st.sampled_from(COMPARISONS),
)
def test_a_string_column_compares_as_python_does(
    texts: list[str | None], wanted: str, op: str
) -> None:
    """A string column's bytes compared in one numpy pass (graph.Column.compare_strings)
    order as Python's (and Cypher's) strings do, by code point; each value reads back."""
    present = np.array([t is not None for t in texts], dtype=bool)
    column = Column.of(list(texts), present, {"string"})
    nodes = np.flatnonzero(present)
    found = column.compare_strings(op, wanted, nodes).tolist()
    compare: Callable[[str, str], bool] = {
        "=": operator.eq,
        "<>": operator.ne,
        "<": operator.lt,
        ">": operator.gt,
        "<=": operator.le,
        ">=": operator.ge,
    }[op]
    held = [t for t in texts if t is not None]
    assert found == [compare(t, wanted) for t in held], (held, wanted, op)
    assert [column.value(i) for i in range(len(texts))] == texts


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.none() | STRINGS, min_size=1, max_size=20),
    wanted=STRINGS,
    op=st.sampled_from(["starts with", "ends with"]),
)
def test_a_string_column_finds_prefixes_and_suffixes_as_python_does(
    texts: list[str | None], wanted: str, op: str
) -> None:
    """STARTS WITH and ENDS WITH on a string column's bytes (graph.Column.has_affix) find
    what Python's str.startswith and str.endswith find, by code point."""
    present = np.array([t is not None for t in texts], dtype=bool)
    column = Column.of(list(texts), present, {"string"})
    found = column.has_affix(op, wanted, np.flatnonzero(present)).tolist()
    test = str.startswith if op == "starts with" else str.endswith
    assert found == [test(t, wanted) for t in texts if t is not None], (texts, wanted, op)


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.none() | STRINGS, min_size=1, max_size=20),
    others=st.lists(st.none() | st.booleans() | st.integers(-3, 3) | STRINGS, max_size=6),
    laid_out=st.booleans(),
)
def test_a_column_codes_and_ranks_values_as_grouping_and_order_by_do(
    texts: list[str | None], others: list[Any], laid_out: bool
) -> None:
    """A column's values as codes and ranks (columnar.value_codes): equal codes exactly
    where grouping puts values together, ranks in ORDER BY's order; for a string column on
    its bytes (or decoded, when they would take too much room), and for a column of mixed
    values."""
    for held, kinds in ((texts, {"string"}), (texts + others, {"string", "mixed"})):
        present = np.array([t is not None for t in held], dtype=bool)
        column = Column.of(list(held), present, set(kinds))
        nodes = np.array([*range(len(held)), 0], dtype=np.int64)  # a node met twice
        with mock.patch.object(columnar, "STRING_RANK_BYTES", 2**25 if laid_out else 0):
            coded = columnar.value_codes(column, nodes)
        values = [held[node] for node in nodes.tolist()]
        for i, first in enumerate(values):
            for j, second in enumerate(values):
                same_group = group_key(first) == group_key(second)
                assert (coded.codes[i] == coded.codes[j]) == same_group, (first, second)
                before = order_key(first) < order_key(second)
                assert (coded.ranks[nodes[i]] < coded.ranks[nodes[j]]) == before, (first, second)
        assert coded.count == len({group_key(v) for v in values})


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.none() | JSON_VALUES.map(json.dumps), max_size=12),
    refused=st.lists(st.sampled_from(['"\\ud800"', "1e400", '["\\udfff", -1e999]']), max_size=2),
)
def test_a_property_column_holds_what_json_reads_from_each_text(
    values: list[str | None], refused: list[str]
) -> None:
    """A chunk of a property's JSON texts is read in one call (graph.decoded); the column
    holds what json.loads reads from each, also where that call refuses a text (a lone
    surrogate's escape, a number past a double's range) and the chunk is read text by text."""
    texts = [*values, *refused]
    maker = ColumnMaker("a property", len(texts) + 1)
    maker.add([(node, text) for node, text in enumerate(texts, start=1)])
    column = maker.made()
    expected = [None, *(None if text is None else json.loads(text) for text in texts)]
    assert [column.value(node) for node in range(len(texts) + 1)] == expected
