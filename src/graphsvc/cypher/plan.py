"""A query's plan: one step per clause, each a generator from the rows before it to the rows
after it, compiled for one run (its closures hold the graph and the parameters). `explain`
prints the steps, what `graphsvc query --explain` shows.

Rows are dicts of variables; they flow lazily, so a LIMIT stops the walks behind it. The
steps that must hold every row (ORDER BY, aggregation, DISTINCT) count what they hold
against the rows cap.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from graphsvc.cypher import syntax
from graphsvc.cypher.columnar import pair_counts, reached_ends, single_node
from graphsvc.cypher.errors import semantic_error, type_error
from graphsvc.cypher.expressions import (
    AGGREGATES,
    Compiler,
    constant_count,
    contains_aggregate,
    is_aggregate,
    rewrite,
    walk,
    within_64_bits,
)
from graphsvc.cypher.match import (
    USED,
    Conjunct,
    compile_pattern,
    describe_pattern,
    free_variables,
    pattern_variables,
    split_conjuncts,
)
from graphsvc.cypher.runtime import Run
from graphsvc.cypher.values import compare, group_key, order_key, type_name

Row = dict[str, Any]


@dataclass
class Step:
    description: str
    run: Callable[[Iterable[Row]], Iterator[Row]]


@dataclass
class Plan:
    """The steps of each part of a UNION, and the columns the query answers with."""

    parts: list[list[Step]]
    columns: list[str]
    distinct_union: bool = False
    lines: list[str] = field(default_factory=list)

    def explain(self) -> str:
        return "\n".join(self.lines)

    def rows(self) -> Iterator[list[Any]]:
        """The answer's rows, each a list of the columns' values."""
        seen: set[Any] = set()
        for steps in self.parts:
            rows: Iterable[Row] = iter([{}])
            for step in steps:
                rows = step.run(rows)
            for row in rows:
                values = [row[c] for c in self.columns]
                if self.distinct_union:
                    key = tuple(group_key(v) for v in values)
                    if key in seen:
                        continue
                    seen.add(key)
                yield values


def plan_query(query: syntax.Query, run: Run) -> Plan:
    compiler = Compiler(run)
    parts: list[list[Step]] = []
    columns: list[str] | None = None
    lines: list[str] = []
    for number, part in enumerate(query.parts):
        if len(query.parts) > 1:
            lines.append(f"part {number + 1} of the UNION:")
        steps, names = plan_single(part, compiler)
        lines.extend(("  " if len(query.parts) > 1 else "") + s.description for s in steps)
        if columns is not None and names != columns:
            raise semantic_error(
                None,
                "every part of a UNION must return the same columns: "
                f"{', '.join(columns)} against {', '.join(names)}",
            )
        columns = names
        parts.append(steps)
    distinct = bool(query.union_all) and not all(query.union_all)
    if query.union_all and any(query.union_all) and not all(query.union_all):
        raise semantic_error(None, "a query cannot mix UNION and UNION ALL")
    assert columns is not None
    return Plan(parts, columns, distinct, lines)


def plan_single(query: syntax.SingleQuery, compiler: Compiler) -> tuple[list[Step], list[str]]:
    single = single_node(query, compiler)
    if single is not None:
        description, run, names = single
        return [Step(description, run)], names
    scope: frozenset[str] = frozenset()
    steps: list[Step] = []
    columns: list[str] = []
    clauses = list(query.clauses)
    first = clauses[0] if clauses else None
    if len(clauses) > 1 and isinstance(first, syntax.Match):
        following = clauses[1]
        if isinstance(following, syntax.With | syntax.Return):
            kind = "WITH" if isinstance(following, syntax.With) else "RETURN"
            counted = pair_counts(first, following.projection, kind, compiler)
            if counted is not None:
                description, run, rest = counted
                steps.append(Step(description, run))
                scope = frozenset(item.name for item in rest.items)
                where = following.where if isinstance(following, syntax.With) else None
                step, scope, columns = plan_projection(rest, where, compiler, scope, kind)
                steps.append(step)
                clauses = clauses[2:]
            else:
                reached = reached_ends(first, following.projection, compiler)
                if reached is not None:
                    description, run, end = reached
                    steps.append(Step(description, run))
                    scope = frozenset({end})
                    clauses = clauses[1:]
    for clause in clauses:
        if isinstance(clause, syntax.Match):
            step, scope = plan_match(clause, compiler, scope)
        elif isinstance(clause, syntax.Unwind):
            step, scope = plan_unwind(clause, compiler, scope)
        elif isinstance(clause, syntax.With):
            step, scope, _ = plan_projection(
                clause.projection, clause.where, compiler, scope, "WITH"
            )
        elif isinstance(clause, syntax.Return):
            step, scope, columns = plan_projection(
                clause.projection, None, compiler, scope, "RETURN"
            )
        else:
            raise semantic_error(clause.at, f"{type(clause).__name__} is not supported")
        steps.append(step)
    return steps, columns


# --- MATCH ---------------------------------------------------------------------------------


def plan_match(
    clause: syntax.Match, compiler: Compiler, scope: frozenset[str]
) -> tuple[Step, frozenset[str]]:
    new_names: set[str] = set()
    for pattern in clause.patterns:
        new_names |= pattern_variables(pattern)
    after = scope | new_names
    conjuncts = [
        Conjunct(compiler.predicate(part, after), free_variables(part) & after, part)
        for part in split_conjuncts(clause.where)
    ]
    matchers = []
    bound = scope
    described = []
    for pattern in clause.patterns:
        before = len(conjuncts)
        matchers.append(compile_pattern(compiler, pattern, bound, conjuncts))
        placed = before - len(conjuncts)
        described.append(
            describe_pattern(pattern)
            + (f" (testing {placed} WHERE part(s) on the way)" if placed else "")
        )
        bound = bound | pattern_variables(pattern)
    remaining = conjuncts
    optional = clause.optional
    added = sorted(new_names - scope)
    run = compiler.run

    def matched(rows: Iterable[Row]) -> Iterator[Row]:
        for row in rows:
            found: Iterable[Row] = iter([row])
            for matcher in matchers:
                found = chain_matches(found, matcher)
            any_found = False
            for result in found:
                run.tick()
                if all(c.test(result) for c in remaining):
                    any_found = True
                    result.pop(USED, None)
                    yield result
            if optional and not any_found:
                yield {**row, **{name: None for name in added}}

    description = ("OPTIONAL MATCH " if optional else "MATCH ") + ", ".join(described)
    if remaining:
        description += f", then testing {len(remaining)} WHERE part(s)"
    return Step(description, matched), after


def chain_matches(rows: Iterable[Row], matcher: Callable[[Row], Iterator[Row]]) -> Iterator[Row]:
    for row in rows:
        yield from matcher(row)


# --- UNWIND ---------------------------------------------------------------------------------


def plan_unwind(
    clause: syntax.Unwind, compiler: Compiler, scope: frozenset[str]
) -> tuple[Step, frozenset[str]]:
    value = compiler.compile(clause.expression, scope)
    name = clause.variable
    run = compiler.run

    def unwound(rows: Iterable[Row]) -> Iterator[Row]:
        for row in rows:
            items = value(row)
            if items is None:
                continue
            for item in items if isinstance(items, list) else [items]:
                run.tick()
                yield {**row, name: item}

    return Step(f"UNWIND as {name}", unwound), scope | {name}


# --- WITH and RETURN ------------------------------------------------------------------------


class Aggregate:
    """One aggregating call's state for one group."""

    def __init__(self, name: str, distinct: bool, at: syntax.At) -> None:
        self.name, self.distinct, self.at = name, distinct, at
        self.values: list[Any] = []
        self.seen: set[Any] = set()
        self.count = 0

    def add(self, value: Any) -> None:
        if value is None:
            return
        if self.distinct:
            key = group_key(value)
            if key in self.seen:
                return
            self.seen.add(key)
        self.count += 1
        if self.name != "count":
            self.values.append(value)

    def result(self) -> Any:
        name, values = self.name, self.values
        if name == "count":
            return self.count
        if name == "collect":
            return values
        if not values:
            return 0 if name == "sum" else None
        if name in ("min", "max"):
            best = values[0]
            for value in values[1:]:
                order = compare(value, best)
                if order is None:  # mixed types: ORDER BY's order decides
                    order = (order_key(value) > order_key(best)) - (
                        order_key(value) < order_key(best)
                    )
                if (order < 0) if name == "min" else (order > 0):
                    best = value
            return best
        for value in values:
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise type_error(self.at, f"{name}() needs numbers, got a {type_name(value)}")
        if name == "sum":
            return within_64_bits(sum(values), self.at)
        mean = sum(values) / len(values)
        if name == "avg":
            return mean
        spread = sum((v - mean) ** 2 for v in values)
        if name == "stdevp":
            return math.sqrt(spread / len(values))
        return math.sqrt(spread / (len(values) - 1)) if len(values) > 1 else 0.0


def plan_projection(
    projection: syntax.Projection,
    where: syntax.Expr | None,
    compiler: Compiler,
    scope: frozenset[str],
    clause: str,
) -> tuple[Step, frozenset[str], list[str]]:
    items = list(projection.items)
    if projection.star:
        if not scope:
            raise semantic_error(projection.at, f"{clause} * has no variables to return")
        items = [
            syntax.ProjectionItem(syntax.Variable(name, at=projection.at), name, True)
            for name in sorted(n for n in scope if not n.startswith("\x00"))
        ] + items
    names = [item.name for item in items]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:
        raise semantic_error(
            projection.at, f"{clause} names a column twice: {', '.join(sorted(duplicated))}"
        )
    for item in items:
        if (
            clause == "WITH"
            and not item.aliased
            and not isinstance(item.expression, syntax.Variable)
        ):
            raise semantic_error(item.expression.at, f"WITH {item.name} needs a name: add AS")
    after = frozenset(names)
    aggregating = any(contains_aggregate(item.expression) for item in items)
    run = compiler.run
    skip = constant_count(projection.skip, compiler, "SKIP")
    limit = constant_count(projection.limit, compiler, "LIMIT")

    # ORDER BY may name the items' expressions, the items' names, and (without aggregation)
    # the variables before the projection.
    def as_item(expr: syntax.Expr) -> Any:
        for item in items:
            if expr == item.expression and not isinstance(expr, syntax.Variable):
                return syntax.Variable(item.name, at=expr.at)
        return None

    sort_scope = after if aggregating or projection.distinct else after | scope
    sorts = [
        (compiler.compile(rewrite(s.expression, as_item), sort_scope), s.descending)
        for s in projection.order
    ]
    keep = compiler.predicate(where, after) if where is not None else None

    # `WITH a, b` over rows of a and b alone: the rows go on as they are.
    unchanged = frozenset(names) == scope and all(
        isinstance(item.expression, syntax.Variable) and item.expression.name == item.name
        for item in items
    )
    if aggregating:
        project = plan_aggregation(items, compiler, scope)
    elif unchanged:

        def project(rows: Iterable[Row]) -> Iterator[Row]:
            for row in rows:
                run.tick()
                yield row

    else:
        compiled = [(item.name, compiler.compile(item.expression, scope)) for item in items]

        def project(rows: Iterable[Row]) -> Iterator[Row]:
            for row in rows:
                run.tick()
                out = {name: value(row) for name, value in compiled}
                if sorts and not projection.distinct:
                    out["\x00before"] = row
                yield out

    def projected(rows: Iterable[Row]) -> Iterator[Row]:
        out: Iterable[Row] = project(rows)
        if projection.distinct:
            out = distinct(out, names, run)
        if sorts:
            out = sort(out, sorts, run)
        if skip:
            out = itertools.islice(out, skip, None)
        if limit is not None:
            out = itertools.islice(out, limit)
        for row in out:
            if keep is None or keep(row):
                yield row

    parts = [f"{clause}{' DISTINCT' if projection.distinct else ''} {', '.join(names)}"]
    if aggregating:
        parts.append("(aggregating)")
    if sorts:
        parts.append(f"ORDER BY {len(sorts)} key(s)")
    if skip:
        parts.append(f"SKIP {skip}")
    if limit is not None:
        parts.append(f"LIMIT {limit}")
    if keep is not None:
        parts.append("WHERE")
    return Step(" ".join(parts), projected), after, names


def distinct(rows: Iterable[Row], names: list[str], run: Run) -> Iterator[Row]:
    seen: set[Any] = set()
    for row in rows:
        key = tuple(group_key(row[n]) for n in names)
        if key not in seen:
            seen.add(key)
            if len(seen) > run.caps.rows:
                raise run.too_many_rows()
            yield row


def sort(rows: Iterable[Row], sorts: list[tuple[Any, bool]], run: Run) -> Iterator[Row]:
    held = []
    for row in rows:
        held.append(row)
        if len(held) > run.caps.rows:
            raise run.too_many_rows()
    # Stable sorts from the last key to the first give each key its own direction. A row
    # that carries no variables from before its projection is read as it is, not copied.
    for value, descending in reversed(sorts):
        held.sort(
            key=lambda r: order_key(
                value(r if "\x00before" not in r else {**r["\x00before"], **r})
            ),
            reverse=descending,
        )
    for row in held:
        row.pop("\x00before", None)
        yield row


def plan_aggregation(
    items: list[syntax.ProjectionItem], compiler: Compiler, scope: frozenset[str]
) -> Callable[[Iterable[Row]], Iterator[Row]]:
    """Rows grouped by the items without an aggregate; each aggregating call computed per
    group, then each item made of the group's keys and the calls' results."""
    calls: list[syntax.Expr] = []

    def slot(expr: Any) -> Any:
        if isinstance(expr, syntax.Expr) and is_aggregate(expr):
            for inner in walk(expr)[1:]:
                if isinstance(inner, syntax.Expr) and is_aggregate(inner):
                    raise semantic_error(inner.at, "an aggregation cannot hold another")
            calls.append(expr)
            return syntax.Variable(f"\x00agg{len(calls) - 1}", at=expr.at)
        return None

    keys = [
        (item.name, compiler.compile(item.expression, scope))
        for item in items
        if not contains_aggregate(item.expression)
    ]
    key_names = [name for name, _ in keys]
    finals = [
        (item.name, rewrite(item.expression, slot))
        for item in items
        if contains_aggregate(item.expression)
    ]
    arguments: list[Any] = []
    for call in calls:
        if isinstance(call, syntax.CountStar):
            arguments.append(None)
        else:
            assert isinstance(call, syntax.FunctionCall)
            if len(call.args) != 1:
                raise semantic_error(call.at, f"{call.name}() takes one argument")
            arguments.append(compiler.compile(call.args[0], scope))
    final_scope = frozenset(key_names) | {f"\x00agg{i}" for i in range(len(calls))}
    compiled_finals = {name: compiler.compile(expr, final_scope) for name, expr in finals}
    names = [item.name for item in items]
    run = compiler.run

    def aggregated(rows: Iterable[Row]) -> Iterator[Row]:
        groups: dict[Any, tuple[Row, list[Aggregate]]] = {}
        for row in rows:
            run.tick()
            values = {name: value(row) for name, value in keys}
            key = tuple(group_key(values[n]) for n in key_names)
            group = groups.get(key)
            if group is None:
                if len(groups) >= run.caps.rows:
                    raise run.too_many_rows()
                group = (values, [new_aggregate(c) for c in calls])
                groups[key] = group
            for aggregate, argument in zip(group[1], arguments, strict=True):
                aggregate.add(True if argument is None else argument(row))
        if not groups and not keys:  # aggregating nothing: one row (count 0, collect [])
            groups[()] = ({}, [new_aggregate(c) for c in calls])
        for values, aggregates in groups.values():
            local = {**values, **{f"\x00agg{i}": a.result() for i, a in enumerate(aggregates)}}
            yield {
                name: local[name] if name in values else compiled_finals[name](local)
                for name in names
            }

    return aggregated


def new_aggregate(call: syntax.Expr) -> Aggregate:
    if isinstance(call, syntax.CountStar):
        return Aggregate("count", False, call.at)
    assert isinstance(call, syntax.FunctionCall) and call.name in AGGREGATES
    return Aggregate(call.name, call.distinct, call.at)
