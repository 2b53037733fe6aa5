"""Plans that answer a whole query shape on arrays, with no row made for each match; the
planner (plan.py) tries them first, and any other query, or one of these shapes with a part
the arrays cannot decide, takes the general plan, which gives the same rows:

- `single_node`: `MATCH (n:L {..}) WHERE .. RETURN ..` whose tests the columns decide,
  counted, or read straight off the columns.
- `pair_counts`: `MATCH (a:L {..})-[:T]->(b:M {..}) WHERE ..` followed by a WITH or RETURN
  that groups by the ends (or their properties) and counts: every relationship between the
  two ends' candidates taken from the path index's adjacency in one numpy pass, then grouped
  and counted as arrays. Grouping every AdminTo relationship of a million-node graph by its
  group took 1.9 s through the general plan's rows (a Python dict a row). With an ORDER BY
  of its items and a LIMIT, only the groups that come first are made rows (`TopGroups`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from graphsvc.cypher import syntax
from graphsvc.cypher.expressions import (
    Compiler,
    constant_count,
    contains_aggregate,
    is_aggregate,
    rewrite,
    walk,
)
from graphsvc.cypher.graph import Column
from graphsvc.cypher.match import (
    Conjunct,
    NodeTest,
    RelTest,
    SingleNodes,
    compile_pattern,
    describe_pattern,
    free_variables,
    pattern_variables,
    property_key,
    split_conjuncts,
    tested_nodes,
)
from graphsvc.cypher.values import Node, group_key, order_key

Row = dict[str, Any]
Runner = Callable[[Iterable[Row]], Iterator[Row]]
READ_AT_ONCE = 1024  # nodes whose values a read off the columns decodes at once
Array = npt.NDArray[np.int64]


# --- one node ------------------------------------------------------------------------------


def single_node(
    query: syntax.SingleQuery, compiler: Compiler
) -> tuple[str, Runner, list[str]] | None:
    """`MATCH (n:L {..}) WHERE .. RETURN ..` when the columns decide the whole MATCH and the
    RETURN is counts of the node (`count(n)`, `count(*)`), or the node and its properties
    without DISTINCT or ORDER BY: the nodes the columns leave, counted with no row made for
    each, or their values read straight off the columns (None for any other query)."""
    if len(query.clauses) != 2:
        return None
    match, returned = query.clauses
    if not isinstance(match, syntax.Match) or match.optional or len(match.patterns) != 1:
        return None
    if not isinstance(returned, syntax.Return):
        return None
    projection = returned.projection
    if projection.star or not projection.items or projection.order or projection.distinct:
        return None
    names = [item.name for item in projection.items]
    if len(set(names)) != len(names):
        return None  # refused as the general plan refuses it
    elements = match.patterns[0].elements
    variable = elements[0].variable if len(elements) == 1 else None
    if variable is None:
        return None
    counts = all(counts_node(item.expression, variable) for item in projection.items)
    keys = [read_of(item.expression, variable) for item in projection.items]
    if not counts and any(key is None for key in keys):
        return None
    if counts and (projection.skip is not None or projection.limit is not None):
        return None
    pattern = match.patterns[0]
    conjuncts = [
        Conjunct(compiler.predicate(part, pattern_variables(pattern)), free_variables(part), part)
        for part in split_conjuncts(match.where)
    ]
    matcher = compile_pattern(compiler, pattern, frozenset(), conjuncts)
    if not isinstance(matcher, SingleNodes) or conjuncts:
        return None
    shown = f"MATCH {describe_pattern(pattern)} RETURN {', '.join(names)}"
    if counts:
        total = int(matcher.nodes.size)

        def count(rows: Iterable[Row]) -> Iterator[Row]:
            for _ in rows:
                yield {name: total for name in names}

        return f"{shown}: counted from the columns", count, names

    skip = constant_count(projection.skip, compiler, "SKIP") or 0
    limit = constant_count(projection.limit, compiler, "LIMIT")
    nodes = matcher.nodes[skip : None if limit is None else skip + limit]
    table, run = compiler.run.graph.nodes, compiler.run
    columns = [
        (name, None if not key else table.column(key))
        for name, key in zip(names, keys, strict=True)
    ]

    def read(rows: Iterable[Row]) -> Iterator[Row]:
        for _ in rows:
            for low in range(0, nodes.size, READ_AT_ONCE):
                chunk = nodes[low : low + READ_AT_ONCE]
                read = [(n, None if c is None else c.values_of(chunk)) for n, c in columns]
                for at, node in enumerate(chunk.tolist()):
                    run.tick()
                    yield {name: Node(node) if held is None else held[at] for name, held in read}

    return f"{shown}: read from the columns", read, names


def counts_node(expr: syntax.Expr, variable: str) -> bool:
    """`count(*)`, or `count(v)` / `count(DISTINCT v)` of the node variable."""
    return isinstance(expr, syntax.CountStar) or counted_variable(expr) == variable


def counted_variable(expr: syntax.Expr) -> str | None:
    """The variable of `count(v)` or `count(DISTINCT v)`; None for anything else."""
    if (
        isinstance(expr, syntax.FunctionCall)
        and expr.name == "count"
        and len(expr.args) == 1
        and isinstance(expr.args[0], syntax.Variable)
    ):
        return expr.args[0].name
    return None


def read_of(expr: syntax.Expr, variable: str | None) -> str | None:
    """What an item reads of the node variable: "" for the node itself, the key for `v.key`,
    None for anything else."""
    if isinstance(expr, syntax.Variable) and expr.name == variable:
        return ""
    return property_key(expr, variable)


# --- one relationship, grouped and counted -------------------------------------------------


@dataclass(frozen=True)
class GroupKey:
    """An item the rows are grouped by: an end of the relationship (0: the left, 1: the
    right), itself ("") or one of its properties."""

    name: str
    end: int
    key: str


@dataclass(frozen=True)
class PairCount:
    """`count(*)` (end None) or `count([DISTINCT] v)` of an end."""

    name: str
    end: int | None
    distinct: bool


def pair_counts(
    match: syntax.Match, projection: syntax.Projection, clause: str, compiler: Compiler
) -> tuple[str, Runner, syntax.Projection] | None:
    """The MATCH of one relationship between two free nodes whose tests the columns decide,
    and the WITH or RETURN after it when it groups by the ends or their properties and
    counts: (the step's description, the step, which makes one row a group with every item
    by its name, and the projection left to run on those rows: DISTINCT, ORDER BY, SKIP and
    LIMIT over the items by name). None for any other query."""
    if match.optional or len(match.patterns) != 1:
        return None
    pattern = match.patterns[0]
    if pattern.variable is not None or pattern.shortest is not None:
        return None
    if len(pattern.elements) != 3 or projection.star:
        return None
    left, relationship, right = pattern.elements
    assert isinstance(left, syntax.NodePattern) and isinstance(right, syntax.NodePattern)
    assert isinstance(relationship, syntax.RelationshipPattern)
    if relationship.variable or relationship.properties or relationship.length:
        return None
    variables = (left.variable, right.variable)
    if variables[0] is not None and variables[0] == variables[1]:
        return None
    shape = grouped_items(projection, variables, clause)
    if shape is None:
        return None
    keys, counts = shape
    names = [item.name for item in projection.items]

    def by_name(expr: Any) -> Any:
        for item in projection.items:
            if expr == item.expression and not isinstance(expr, syntax.Variable):
                return syntax.Variable(item.name, at=expr.at)
        return None

    order = tuple(
        syntax.SortItem(rewrite(s.expression, by_name), s.descending) for s in projection.order
    )
    for sort in order:
        if contains_aggregate(sort.expression) or not free_variables(sort.expression) <= set(names):
            return None  # the general plan says what is wrong with it
    scope = pattern_variables(pattern)
    conjuncts: list[list[Conjunct]] = [[], []]
    for part in split_conjuncts(match.where):
        needs = free_variables(part)
        ends = [end for end in (0, 1) if variables[end] is not None and needs == {variables[end]}]
        if not ends:
            return None
        conjuncts[ends[0]].append(Conjunct(compiler.predicate(part, scope), needs, part))
    candidates = []
    for end, element in enumerate((left, right)):
        test = NodeTest(compiler, element, scope, frozenset())
        if test.object_id is not None:
            return None  # one node: the general plan walks from it
        nodes, tested, remaining = tested_nodes(compiler, test, element, conjuncts[end])
        if not tested or remaining:
            return None
        candidates.append(nodes.astype(np.int64))
    walked = RelTest(compiler, relationship, scope)
    run = compiler.run
    top = top_groups(order, projection, compiler)

    def counted(rows: Iterable[Row]) -> Iterator[Row]:
        for _ in rows:
            starts, ends = relationship_pairs(compiler, walked, candidates[0], candidates[1])
            run.tick(4 * starts.size + 1)
            yield from group_rows(compiler, (starts, ends), keys, counts, names, top)

    rest = syntax.Projection(
        projection.at,
        tuple(
            syntax.ProjectionItem(syntax.Variable(name, at=projection.at), name, True)
            for name in names
        ),
        distinct=projection.distinct,
        order=order,
        skip=projection.skip,
        limit=projection.limit,
    )
    described = (
        f"MATCH {describe_pattern(pattern)}, {clause} {', '.join(names)}: every relationship "
        "taken from the adjacency at once, grouped and counted as arrays"
    )
    return described, counted, rest


def top_groups(
    order: tuple[syntax.SortItem, ...], projection: syntax.Projection, compiler: Compiler
) -> TopGroups | None:
    """The groups to make rows of when the projection orders by its items' names and keeps
    the first few (a LIMIT): None otherwise, every group."""
    limit = constant_count(projection.limit, compiler, "LIMIT")
    if limit is None or not order:
        return None
    by_name = [s.expression.name for s in order if isinstance(s.expression, syntax.Variable)]
    if len(by_name) != len(order):
        return None
    skip = constant_count(projection.skip, compiler, "SKIP") or 0
    return TopGroups(tuple(zip(by_name, (s.descending for s in order), strict=True)), skip + limit)


def grouped_items(
    projection: syntax.Projection, variables: tuple[str | None, str | None], clause: str
) -> tuple[list[GroupKey], list[PairCount]] | None:
    """The projection's items as keys (an end or its property) and counts of the ends, or
    None when an item is anything else (or a WITH's item the general plan refuses)."""
    keys: list[GroupKey] = []
    counts: list[PairCount] = []
    names = [item.name for item in projection.items]
    if len(set(names)) != len(names):
        return None
    for item in projection.items:
        expr = item.expression
        if clause == "WITH" and not item.aliased and not isinstance(expr, syntax.Variable):
            return None
        if contains_aggregate(expr):
            if isinstance(expr, syntax.CountStar):
                counts.append(PairCount(item.name, None, False))
                continue
            counted = counted_variable(expr)
            if counted is None or counted not in variables:
                return None
            assert isinstance(expr, syntax.FunctionCall)
            counts.append(PairCount(item.name, variables.index(counted), expr.distinct))
            continue
        for end, variable in enumerate(variables):
            key = read_of(expr, variable) if variable is not None else None
            if key is not None:
                keys.append(GroupKey(item.name, end, key))
                break
        else:
            return None
    return (keys, counts) if counts else None


def relationship_pairs(
    compiler: Compiler, walked: RelTest, lefts: Array, rights: Array
) -> tuple[Array, Array]:
    """The (left end, right end) of every relationship the pattern matches between the
    candidates, one pair a relationship; each direction taken from the side whose nodes have
    fewer relationships. An undirected pattern matches each way, a self-loop once."""
    if walked.direction == "in":  # (a)<-(b): relationships from the right to the left
        from_right, to_left = directed_pairs(compiler, walked, rights, lefts)
        return to_left, from_right
    starts, ends = directed_pairs(compiler, walked, lefts, rights)
    if walked.direction == "both":
        back_ends, back_starts = directed_pairs(compiler, walked, rights, lefts)
        loop = back_starts == back_ends  # met above already, as an outgoing relationship
        starts = np.concatenate((starts, back_starts[~loop]))
        ends = np.concatenate((ends, back_ends[~loop]))
    return starts, ends


def directed_pairs(
    compiler: Compiler, walked: RelTest, starts: Array, ends: Array
) -> tuple[Array, Array]:
    """(start, end) of every relationship of the pattern's kinds from a node of `starts` to
    one of `ends`: walked forward from the starts, or backward from the ends, whichever
    side holds fewer relationships."""
    index = compiler.run.graph.index
    forward, backward = index.forward, index.backward
    going = int((forward.offsets[starts + 1] - forward.offsets[starts]).sum())
    coming = int((backward.offsets[ends + 1] - backward.offsets[ends]).sum())
    compiler.run.heavy(min(going, coming) + index.size)
    if going <= coming:
        near, far, kinds = forward.step(starts)
        wanted = ends
    else:
        near, far, kinds = backward.step(ends)
        wanted = starts
    keep = np.zeros(index.size, dtype=bool)
    keep[wanted] = True
    kept = keep[far]
    if walked.kind_mask is not None:
        kept &= walked.kind_mask[kinds]
    near, far = near[kept], far[kept]
    return (near, far) if going <= coming else (far, near)


def group_rows(
    compiler: Compiler,
    pairs: tuple[Array, Array],
    keys: list[GroupKey],
    counts: list[PairCount],
    names: list[str],
    top: TopGroups | None,
) -> Iterator[Row]:
    """One row a group of the pairs: each key's value and each count. With `top`, only the
    groups that its order puts first, in the groups' order (the projection after it sorts
    them): rows for 40,000 groups, ordered by Python, were most of a million-node graph's
    local admins by group (55 ms; the first 10 on arrays: see bench/README)."""
    run, table = compiler.run, compiler.run.graph.nodes
    size = compiler.run.graph.index.size
    total = int(pairs[0].size)
    if total == 0:
        if not keys:  # counting nothing: one row of zeros
            yield dict.fromkeys(names, 0)
        return
    group_of = np.zeros(total, dtype=np.int64)
    groups = 1
    coded: dict[str, Codes] = {}
    for key in keys:
        nodes = pairs[key.end]
        if not key.key:
            codes, bound = nodes, size
        else:
            coded[key.name] = found = value_codes(table.column(key.key), nodes)
            codes, bound = found.codes, max(found.count, 1)
        group_of, distinct = dense_codes(group_of * bound + codes, groups * bound)
        groups = int(distinct.size)
    if groups > run.caps.rows:
        raise run.too_many_rows()
    member = np.empty(groups, dtype=np.int64)
    member[group_of] = np.arange(total)  # a pair of each group: its keys' values
    found_counts: dict[str, Array] = {}
    for count in counts:
        if count.end is None or not count.distinct:
            found_counts[count.name] = np.bincount(group_of, minlength=groups)
        else:
            _, distinct = dense_codes(group_of * size + pairs[count.end], groups * size)
            found_counts[count.name] = np.bincount(distinct // size, minlength=groups)
    chosen = np.arange(groups)
    if top is not None and top.first < groups:
        ranks: dict[str, Array] = dict(found_counts)
        for key in keys:
            held = pairs[key.end][member]  # a node orders by its id
            ranks[key.name] = held if not key.key else coded[key.name].ranks[held]
        # np.lexsort sorts by its last key first, and keeps the groups' order among ties, as
        # the projection's stable sort does: the same groups come first.
        order = np.lexsort([-ranks[n] if down else ranks[n] for n, down in reversed(top.order)])
        chosen = np.sort(order[: top.first])
    values: dict[str, list[Any]] = {}
    for key in keys:
        held = pairs[key.end][member[chosen]]
        if not key.key:
            values[key.name] = [Node(node) for node in held.tolist()]
        else:
            values[key.name] = table.column(key.key).values_of(held)
    for name, counted in found_counts.items():
        values[name] = counted[chosen].tolist()
    run.tick(int(chosen.size))
    for group in range(int(chosen.size)):
        yield {name: values[name][group] for name in names}


@dataclass(frozen=True)
class TopGroups:
    """The groups an ORDER BY of the items by name (each item descending or not) puts first:
    the first `first` (SKIP plus LIMIT)."""

    order: tuple[tuple[str, bool], ...]
    first: int


@dataclass(frozen=True)
class Codes:
    """Each node's value of a property as a code (equal codes where Cypher groups the values
    together, values.group_key; a missing property is null), how many codes there are, and
    each node's rank in ORDER BY's order (values that order as equal share a rank)."""

    codes: Array
    count: int
    ranks: Array  # by node id: only the nodes coded hold theirs


def dense_codes(codes: Array, bound: int) -> tuple[Array, Array]:
    """`codes` (each below `bound`) numbered 0, 1, ... in the order of their values, and the
    distinct codes in that order: through a mask of every possible code when that is small
    (no sort), else np.unique."""
    if bound <= 4 * codes.size + 1_000_000:
        seen = np.zeros(bound, dtype=bool)
        seen[codes] = True
        return np.cumsum(seen, dtype=np.int64)[codes] - 1, np.flatnonzero(seen)
    distinct, numbers = np.unique(codes, return_inverse=True)
    return numbers.astype(np.int64), distinct


def value_codes(column: Column, nodes: Array) -> Codes:
    """The nodes' values of a column as codes (Codes). A string column's are found on its
    bytes, as ranks in Cypher's order (code points, which UTF-8's bytes keep), with no string
    made: 40,000 names in 4 ms, where decoding and hashing each took 25 ms."""
    numbers, held = dense_codes(nodes, column.present.size)
    ranks = np.zeros(column.present.size, dtype=np.int64)
    if column.kind == "bool":  # false, true, null: their order too
        flags = np.where(column.present[held], column.values[held], 2).astype(np.int64)
        ranks[held] = flags
        return Codes(flags[numbers], 3, ranks)
    if column.kind == "string":
        held_codes = string_ranks(column, held)
        if held_codes is not None:
            ranks[held] = held_codes
            return Codes(held_codes[numbers], int(held_codes.max()) + 1, ranks)
    code_of: dict[Any, int] = {}
    coded: list[Any] = []
    codes = []
    for value in column.values_of(held):
        grouped = group_key(value)
        code = code_of.get(grouped)
        if code is None:
            code = code_of[grouped] = len(coded)
            coded.append(value)
        codes.append(code)
    keys = [order_key(value) for value in coded]
    ordered = sorted(range(len(coded)), key=keys.__getitem__)
    rank_of = np.zeros(len(coded), dtype=np.int64)
    for position in range(1, len(ordered)):
        before, now = ordered[position - 1], ordered[position]
        rank_of[now] = rank_of[before] + (keys[before] != keys[now])
    held_codes = np.array(codes, dtype=np.int64)
    ranks[held] = rank_of[held_codes]
    return Codes(held_codes[numbers], len(coded), ranks)


STRING_RANK_BYTES = 32_000_000  # the most bytes string_ranks lays out at once


def string_ranks(column: Column, nodes: Array) -> Array | None:
    """Each node's string as a dense rank in code point order (equal strings, equal ranks;
    a missing one, null, after them all), sorted on its UTF-8 bytes laid out as rows of
    big-endian words, zero-padded, the length deciding last ("a" before "a\\x00"). None when
    the longest value would make the rows too large: the caller decodes them."""
    starts, ends = column.spans(nodes)
    lengths = ends - starts
    present = column.present[nodes]
    width = int(lengths.max()) if lengths.size else 0
    words = max(1, -(-width // 8))
    if nodes.size * words * 8 > STRING_RANK_BYTES:
        return None
    laid = np.zeros((nodes.size, words * 8), dtype=np.uint8)
    positions = np.arange(width)
    step = max(1, 4_000_000 // max(width, 1))  # the positions gathered at once: 32 MB
    for low in range(0, nodes.size if width and column.values.size else 0, step):
        part = slice(low, low + step)
        inside = positions < lengths[part, None]
        at = np.minimum(starts[part, None] + positions, column.values.size - 1)
        laid[part, :width] = np.where(inside, column.values[at], 0)
    rows = laid.view(">u8")
    keys = [lengths, *(rows[:, word] for word in reversed(range(words))), ~present]
    order = np.lexsort(keys)
    changed = np.zeros(nodes.size, dtype=bool)
    for key in keys:
        ordered = key[order]
        changed[1:] |= ordered[1:] != ordered[:-1]
    ranks = np.empty(nodes.size, dtype=np.int64)
    ranks[order] = np.cumsum(changed)
    return ranks


# --- the nodes a variable-length relationship reaches --------------------------------------

SEARCH_AT_ONCE = 256  # a frontier at least this large is expanded in one numpy pass


def reached_ends(
    match: syntax.Match, projection: syntax.Projection, compiler: Compiler
) -> tuple[str, Runner, str] | None:
    """`MATCH (a {..})-[:T*1..]->(b {..}) WHERE ..` (or `*0..`, or `<-`) followed by a WITH or
    RETURN that reads b alone and whose answer no repeated row changes (DISTINCT, or
    aggregates that are DISTINCT, min or max): one row {b} for each node a trail from a
    start reaches, found by one search from the starts instead of a row for each trail,
    whose number grows with every way round the groups' nesting. Every node a walk of one
    or more directed relationships reaches, a trail reaches: the walk holds a path to it,
    or a cycle through it when it is a start. (the step's description, the step, b's
    name), or None for any other query."""
    if match.optional or len(match.patterns) != 1 or projection.star:
        return None
    pattern = match.patterns[0]
    if pattern.variable is not None or pattern.shortest is not None or len(pattern.elements) != 3:
        return None
    left, relationship, right = pattern.elements
    assert isinstance(left, syntax.NodePattern) and isinstance(right, syntax.NodePattern)
    assert isinstance(relationship, syntax.RelationshipPattern)
    length = relationship.length
    if (
        relationship.variable is not None
        or relationship.properties is not None
        or length is None
        or length.minimum > 1
        or length.maximum is not None
        or relationship.direction == "both"  # a trail cannot go back the way it came
    ):
        return None
    start, end = left.variable, right.variable
    if end is None or start == end:
        return None
    for element in (left, right):
        if element.properties is not None and free_variables(element.properties):
            return None
    if not ignores_repeats(projection):
        return None
    names = {item.name for item in projection.items}
    read: set[str] = set()
    for expr in [item.expression for item in projection.items] + [
        sort.expression for sort in projection.order
    ]:
        read |= free_variables(expr)
    if not read - names <= {end}:
        return None
    scope = pattern_variables(pattern)
    at_start: list[Conjunct] = []
    at_end: list[Conjunct] = []
    for part in split_conjuncts(match.where):
        needs = free_variables(part)
        if needs <= {end}:
            at_end.append(Conjunct(compiler.predicate(part, scope), needs, part))
        elif start is not None and needs <= {start}:
            at_start.append(Conjunct(compiler.predicate(part, scope), needs, part))
        else:
            return None
    first = NodeTest(compiler, left, scope, frozenset())
    last = NodeTest(compiler, right, scope, frozenset())
    candidates: Array | None = None
    if first.object_id is None:
        candidates, tested, at_start = tested_nodes(compiler, first, left, at_start)
        if not tested:
            return None
    walked = RelTest(compiler, relationship, scope)
    run = compiler.run
    graph = run.graph
    adjacency = graph.index.forward if relationship.direction == "out" else graph.index.backward
    edges_of = graph.out_edges if relationship.direction == "out" else graph.in_edges

    def starts() -> list[int]:
        if candidates is None:
            found = [node for node in first.found({}) if first.accepts(node, {})]
        else:
            run.heavy(candidates.size)
            found = candidates.tolist()
        if at_start:
            assert start is not None
            found = [n for n in found if all(c.test({start: Node(n)}) for c in at_start)]
        return found

    def reached(rows: Iterable[Row]) -> Iterator[Row]:
        for _ in rows:
            sources = starts()
            ends = search(sources, adjacency, edges_of, walked, run)
            if length.minimum == 0:
                ends.update(sources)
            for node in sorted(ends):
                run.tick()
                row = {end: Node(node)}
                if last.accepts(node, {}) and all(c.test(row) for c in at_end):
                    yield row

    described = (
        f"MATCH {describe_pattern(pattern)}: the nodes reached from the starts, each once "
        "(one search, no row for each trail)"
    )
    return described, reached, end


def ignores_repeats(projection: syntax.Projection) -> bool:
    """Whether the projection's answer is the same however many times a row repeats."""
    calls = [
        e
        for item in projection.items
        for e in walk(item.expression)
        if isinstance(e, syntax.Expr) and is_aggregate(e)
    ]
    if not calls:
        return projection.distinct
    return all(
        isinstance(call, syntax.FunctionCall) and (call.distinct or call.name in ("min", "max"))
        for call in calls
    )


def search(
    sources: list[int], adjacency: Any, edges_of: Any, walked: RelTest, run: Any
) -> set[int]:
    """Every node one or more relationships of the pattern's kinds lead to from a source,
    breadth first: node by node while the frontier is small, else in one numpy pass a
    level."""
    reached: set[int] = set()
    expanded = set(sources)
    frontier = list(expanded)
    mask = walked.kind_mask
    while frontier:
        if len(frontier) < SEARCH_AT_ONCE:
            following: list[int] = []
            for node in frontier:
                others, kinds = edges_of(node)
                run.heavy(kinds.size)
                if mask is not None and kinds.size:
                    others = others[mask[kinds]]
                run.tick(int(others.size) + 1)
                for other in others.tolist():
                    if other not in reached:
                        reached.add(other)
                        if other not in expanded:
                            expanded.add(other)
                            following.append(other)
        else:
            nodes = np.array(frontier, dtype=np.int64)
            nodes = nodes[nodes + 1 < adjacency.offsets.size]  # added since: no edges
            run.heavy(int((adjacency.offsets[nodes + 1] - adjacency.offsets[nodes]).sum()))
            _, far, kinds = adjacency.step(nodes)
            if mask is not None:
                far = far[mask[kinds]]
            run.tick(int(far.size) + 1)
            found = np.unique(far).tolist()
            following = [other for other in found if other not in expanded]
            reached.update(found)
            expanded.update(following)
        frontier = following
    return reached
