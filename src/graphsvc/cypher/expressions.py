"""Expressions compiled into Python closures over a row (a dict of the variables bound so
far), once per query: a closure costs about a third of walking the tree at every row.

Cypher's three-valued logic: a predicate is True, False or None (null), and WHERE keeps a
row only when it is True.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import fields, is_dataclass, replace
from decimal import Decimal
from functools import cache, lru_cache
from typing import Any, TypeVar, cast

from graphsvc.cypher import functions, syntax
from graphsvc.cypher.errors import query_error, semantic_error, type_error
from graphsvc.cypher.runtime import Run
from graphsvc.cypher.values import (
    DateTime,
    Duration,
    Node,
    Rel,
    compare,
    equals,
    is_number,
    type_name,
)

Row = dict[str, Any]
Compiled = Callable[[Row], Any]

# Function names whose calls aggregate the rows of a group.
AGGREGATES = frozenset({"count", "collect", "sum", "avg", "min", "max", "stdev", "stdevp"})


def is_aggregate(expr: syntax.Expr) -> bool:
    return isinstance(expr, syntax.CountStar) or (
        isinstance(expr, syntax.FunctionCall) and expr.name in AGGREGATES
    )


def children(expr: Any) -> list[Any]:
    """The syntax nodes directly inside a node (expressions, patterns and their parts)."""
    found: list[Any] = []
    for name in field_names(expr.__class__):
        value = getattr(expr, name)
        for item in value if isinstance(value, tuple) else (value,):
            for part in item if isinstance(item, tuple) else (item,):
                if hasattr(part, "__dataclass_fields__") and not isinstance(part, syntax.At):
                    found.append(part)
    return found


@cache
def field_names(kind: Any) -> tuple[str, ...]:
    """A syntax node's fields but its position (dataclasses.fields took most of `walk`'s
    time, which every query's planning calls)."""
    return tuple(f.name for f in fields(kind) if f.name != "at")


KEPT_BY_IDENTITY = 20_000  # answers `by_identity` keeps per function, then starts again

Answer = TypeVar("Answer")


def by_identity(function: Callable[[Any], Answer]) -> Callable[[Any], Answer]:
    """`function` of a syntax node, kept by the node's identity: the parser keeps a query's
    tree (parse.py), so the next run of the query plans on the same nodes, and planning
    walked each tree a dozen times (a user's nested groups: 40 of 100 µs). The node is
    kept with its answer, so that its identity is never another's."""
    kept: dict[int, tuple[Any, Answer]] = {}

    def kept_answer(node: Any) -> Answer:
        held = kept.get(id(node))
        if held is not None and held[0] is node:
            return held[1]
        answer = function(node)
        if len(kept) >= KEPT_BY_IDENTITY:
            kept.clear()
        kept[id(node)] = (node, answer)
        return answer

    return kept_answer


@by_identity
def walk(expr: Any) -> tuple[Any, ...]:
    """The node and every node inside it."""
    found = [expr]
    for child in children(expr):
        found.extend(walk(child))
    return tuple(found)


def contains_aggregate(expr: syntax.Expr) -> bool:
    return any(is_aggregate(e) for e in walk(expr) if isinstance(e, syntax.Expr))


def rewrite(expr: Any, change: Callable[[Any], Any | None]) -> Any:
    """The tree with every node for which `change` gives a value replaced by it."""
    changed = change(expr)
    if changed is not None:
        return changed
    if not is_dataclass(expr) or isinstance(expr, syntax.At):
        return expr
    updates: dict[str, Any] = {}
    for f in fields(expr):
        if f.name == "at":
            continue
        value = getattr(expr, f.name)
        if isinstance(value, tuple):
            new: Any = tuple(
                tuple(rewrite(p, change) for p in item)
                if isinstance(item, tuple)
                else rewrite(item, change)
                for item in value
            )
        else:
            new = rewrite(value, change)
        if new is not value:
            updates[f.name] = new
    return replace(cast(Any, expr), **updates) if updates else expr


@lru_cache(maxsize=256)
def regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.DOTALL)


def truth(value: Any, at: syntax.At) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise type_error(at, f"expected a boolean, got {type_name(value)}")


def constant_count(expr: syntax.Expr | None, compiler: Compiler, what: str) -> int | None:
    if expr is None:
        return None
    value = compiler.compile(expr, frozenset())({})
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise semantic_error(expr.at, f"{what} needs a non-negative integer, got {value!r}")
    return value


class Compiler:
    """Compiles the expressions of one query for one run; `scope` is the set of variables
    bound where the expression stands (an unknown one is refused before the query runs)."""

    def __init__(self, run: Run) -> None:
        self.run = run

    def compile(self, expr: syntax.Expr, scope: frozenset[str]) -> Compiled:
        method = getattr(self, f"c_{type(expr).__name__}", None)
        if method is None:
            raise semantic_error(expr.at, f"{type(expr).__name__} is not supported here")
        compiled: Compiled = method(expr, scope)
        return compiled

    def predicate(self, expr: syntax.Expr, scope: frozenset[str]) -> Callable[[Row], bool]:
        """WHERE's test: True keeps the row; False and null drop it."""
        test = self.compile(expr, scope)
        at = expr.at

        def holds(row: Row) -> bool:
            return truth(test(row), at) is True

        return holds

    # --- atoms ---

    def c_Literal(self, expr: syntax.Literal, scope: frozenset[str]) -> Compiled:
        value = expr.value
        return lambda row: value

    def c_Parameter(self, expr: syntax.Parameter, scope: frozenset[str]) -> Compiled:
        if expr.name not in self.run.parameters:
            raise semantic_error(
                expr.at, f"parameter ${expr.name} is not given: add it to `parameters`"
            )
        value = self.run.parameters[expr.name]
        return lambda row: value

    def c_Variable(self, expr: syntax.Variable, scope: frozenset[str]) -> Compiled:
        name = expr.name
        if name not in scope:
            raise semantic_error(expr.at, f"variable `{name}` is not defined")
        return lambda row: row[name]

    def c_ListExpr(self, expr: syntax.ListExpr, scope: frozenset[str]) -> Compiled:
        items = [self.compile(e, scope) for e in expr.items]
        return lambda row: [item(row) for item in items]

    def c_MapExpr(self, expr: syntax.MapExpr, scope: frozenset[str]) -> Compiled:
        items = [(k, self.compile(e, scope)) for k, e in expr.items]
        return lambda row: {k: item(row) for k, item in items}

    def c_CountStar(self, expr: syntax.CountStar, scope: frozenset[str]) -> Compiled:
        raise semantic_error(expr.at, "count(*) is only allowed in RETURN and WITH")

    # --- access ---

    def property_of(self, value: Any, key: str, at: syntax.At) -> Any:
        graph = self.run.graph
        if isinstance(value, Node):
            return graph.nodes.value(value.id, key)
        if value is None:
            return None
        if isinstance(value, dict):
            return value.get(key)
        if isinstance(value, Rel):
            return graph.rel_properties(value.start, value.kind, value.end).get(key)
        if isinstance(value, DateTime):
            return functions.datetime_field(value, key, at)
        if isinstance(value, Duration):
            return functions.duration_field(value, key, at)
        raise type_error(at, f"a {type_name(value)} has no property `{key}`")

    def c_Property(self, expr: syntax.Property, scope: frozenset[str]) -> Compiled:
        subject = self.compile(expr.subject, scope)
        key, at = expr.key, expr.at
        graph = self.run.graph
        column = graph.nodes.columns.get(key)  # read before the query ran (query_needs)
        property_of = self.property_of

        def read(row: Row) -> Any:
            value = subject(row)
            if type(value) is Node and column is not None:  # the common case
                return column.value(value.id)
            return property_of(value, key, at)

        return read

    def c_Index(self, expr: syntax.Index, scope: frozenset[str]) -> Compiled:
        subject, index, at = (
            self.compile(expr.subject, scope),
            self.compile(expr.index, scope),
            expr.at,
        )

        def element(row: Row) -> Any:
            value, position = subject(row), index(row)
            if value is None or position is None:
                return None
            if isinstance(value, list):
                if not isinstance(position, int) or isinstance(position, bool):
                    raise type_error(
                        at, f"a list index must be an integer, got {type_name(position)}"
                    )
                return value[position] if -len(value) <= position < len(value) else None
            if isinstance(position, str):
                return self.property_of(value, position, at)
            raise type_error(at, f"cannot index a {type_name(value)} with a {type_name(position)}")

        return element

    def c_Slice(self, expr: syntax.Slice, scope: frozenset[str]) -> Compiled:
        subject = self.compile(expr.subject, scope)
        start = self.compile(expr.start, scope) if expr.start is not None else None
        end = self.compile(expr.end, scope) if expr.end is not None else None
        at, built = expr.at, self.run.built

        def part(row: Row) -> Any:
            value = subject(row)
            low = start(row) if start is not None else 0
            high = end(row) if end is not None else None
            if value is None or low is None or (end is not None and high is None):
                return None
            if not isinstance(value, list):
                raise type_error(at, f"cannot slice a {type_name(value)}")
            return built(value[low:high])

        return part

    # --- operators ---

    def c_Unary(self, expr: syntax.Unary, scope: frozenset[str]) -> Compiled:
        operand, at = self.compile(expr.operand, scope), expr.at
        if expr.op == "not":

            def negation(row: Row) -> Any:
                value = truth(operand(row), at)
                return None if value is None else not value

            return negation

        sign = -1 if expr.op == "-" else 1

        def signed(row: Row) -> Any:
            value = operand(row)
            if value is None:
                return None
            if not is_number(value):
                raise type_error(at, f"cannot negate a {type_name(value)}")
            return within_64_bits(sign * value, at)

        return signed

    def c_Binary(self, expr: syntax.Binary, scope: frozenset[str]) -> Compiled:
        left, right = self.compile(expr.left, scope), self.compile(expr.right, scope)
        op, at = expr.op, expr.at
        if op in ("and", "or", "xor"):
            return logic(op, left, right, at)
        if op in COMPARISONS:
            return comparison(op, left, right)
        if op in STRING_TESTS:
            test = STRING_TESTS[op]

            def string_test(row: Row) -> Any:
                a, b = left(row), right(row)
                if not isinstance(a, str) or not isinstance(b, str):
                    return None
                return test(a, b)

            return string_test
        if op == "in":

            def member(row: Row) -> Any:
                value, items = left(row), right(row)
                if items is None:
                    return None
                if not isinstance(items, list):
                    raise type_error(at, f"IN needs a list, got {type_name(items)}")
                unknown = False
                for item in items:
                    same = equals(value, item)
                    if same:
                        return True
                    if same is None:
                        unknown = True
                return None if unknown else False

            return member

        built = self.run.built

        def arithmetic_of(row: Row) -> Any:
            return built(arithmetic(op, left(row), right(row), at))

        return arithmetic_of

    def c_IsNull(self, expr: syntax.IsNull, scope: frozenset[str]) -> Compiled:
        operand = self.compile(expr.operand, scope)
        if expr.negated:
            return lambda row: operand(row) is not None
        return lambda row: operand(row) is None

    def c_HasLabels(self, expr: syntax.HasLabels, scope: frozenset[str]) -> Compiled:
        subject, wanted, at = self.compile(expr.subject, scope), set(expr.labels), expr.at
        labels = self.run.graph.nodes.labels

        def has(row: Row) -> Any:
            value = subject(row)
            if value is None:
                return None
            if not isinstance(value, Node):
                raise type_error(at, f"a label test needs a node, got {type_name(value)}")
            return wanted.issubset(labels(value.id))

        return has

    def c_Case(self, expr: syntax.Case, scope: frozenset[str]) -> Compiled:
        subject = self.compile(expr.subject, scope) if expr.subject is not None else None
        whens = [(self.compile(w, scope), self.compile(t, scope)) for w, t in expr.whens]
        default = self.compile(expr.default, scope) if expr.default is not None else None

        def choose(row: Row) -> Any:
            value = subject(row) if subject is not None else None
            for when, then in whens:
                if subject is not None:
                    if equals(value, when(row)):
                        return then(row)
                elif when(row) is True:
                    return then(row)
            return default(row) if default is not None else None

        return choose

    def c_ListComprehension(
        self, expr: syntax.ListComprehension, scope: frozenset[str]
    ) -> Compiled:
        source, name = self.compile(expr.source, scope), expr.variable
        inner = scope | {name}
        where = self.predicate(expr.where, inner) if expr.where is not None else None
        projection = self.compile(expr.projection, inner) if expr.projection is not None else None
        at, tick = expr.at, self.run.tick

        def comprehension(row: Row) -> Any:
            items = source(row)
            if items is None:
                return None
            if not isinstance(items, list):
                raise type_error(at, f"IN needs a list, got {type_name(items)}")
            found = []
            for item in items:
                tick()
                local = {**row, name: item}
                if where is None or where(local):
                    found.append(projection(local) if projection is not None else item)
            return found

        return comprehension

    def c_Quantifier(self, expr: syntax.Quantifier, scope: frozenset[str]) -> Compiled:
        source, name, kind, at = self.compile(expr.source, scope), expr.variable, expr.kind, expr.at
        where = self.compile(expr.where, scope | {name})
        tick = self.run.tick

        def quantified(row: Row) -> Any:
            items = source(row)
            if items is None:
                return None
            if not isinstance(items, list):
                raise type_error(at, f"{kind}() needs a list, got {type_name(items)}")
            results = []
            for item in items:
                tick()
                results.append(truth(where({**row, name: item}), at))
            trues = results.count(True)
            unknown = None in results
            if kind == "any":
                return True if trues else (None if unknown else False)
            if kind == "all":
                return False if False in results else (None if unknown else True)
            if kind == "none":
                return False if trues else (None if unknown else True)
            if unknown:
                return None if trues <= 1 else False
            return trues == 1

        return quantified

    def c_FunctionCall(self, expr: syntax.FunctionCall, scope: frozenset[str]) -> Compiled:
        if expr.name in AGGREGATES:
            raise semantic_error(
                expr.at, f"{expr.name}() aggregates rows: only in RETURN and WITH items"
            )
        if expr.name == "size" and [type(a) for a in expr.args] == [syntax.PatternPredicate]:
            # size((a)-->(b)), the older Cypher's count of a pattern's matches.
            pattern = expr.args[0]
            assert isinstance(pattern, syntax.PatternPredicate)
            matches = self.c_PatternComprehension(
                syntax.PatternComprehension(
                    pattern.pattern, None, syntax.Literal(True, at=expr.at), at=expr.at
                ),
                scope,
            )
            return lambda row: len(matches(row))
        args = [self.compile(a, scope) for a in expr.args]
        return functions.call(expr.name, args, expr.at, self.run)

    def c_PatternPredicate(self, expr: syntax.PatternPredicate, scope: frozenset[str]) -> Compiled:
        from graphsvc.cypher.match import compile_pattern, pattern_variables

        new = sorted(pattern_variables(expr.pattern) - scope)
        if new:
            raise semantic_error(
                expr.at,
                f"a pattern predicate cannot bring in a new variable ({', '.join(new)}): bind "
                "it in MATCH, or leave the node unnamed",
            )
        matches = compile_pattern(self, expr.pattern, scope, None)
        # Its own match: the relationships the enclosing MATCH has bound may be matched again.
        return lambda row: next(iter(matches(outside_match(row))), None) is not None

    def c_PatternComprehension(
        self, expr: syntax.PatternComprehension, scope: frozenset[str]
    ) -> Compiled:
        from graphsvc.cypher.match import compile_pattern, pattern_variables

        inner = scope | pattern_variables(expr.pattern)
        where = self.predicate(expr.where, inner) if expr.where is not None else None
        matches = compile_pattern(self, expr.pattern, scope, None)
        projection = self.compile(expr.projection, inner)
        return lambda row: [
            projection(found)
            for found in matches(outside_match(row))
            if where is None or where(found)
        ]


def outside_match(row: Row) -> Row:
    """The row without what its MATCH keeps while it matches (the relationships used)."""
    from graphsvc.cypher.match import USED

    return {k: v for k, v in row.items() if k != USED} if USED in row else row


def logic(op: str, left: Compiled, right: Compiled, at: syntax.At) -> Compiled:
    if op == "and":

        def conjunction(row: Row) -> Any:
            a = truth(left(row), at)
            if a is False:
                return False
            b = truth(right(row), at)
            if b is False:
                return False
            return None if a is None or b is None else True

        return conjunction
    if op == "or":

        def disjunction(row: Row) -> Any:
            a = truth(left(row), at)
            if a is True:
                return True
            b = truth(right(row), at)
            if b is True:
                return True
            return None if a is None or b is None else False

        return disjunction

    def exclusive(row: Row) -> Any:
        a, b = truth(left(row), at), truth(right(row), at)
        return None if a is None or b is None else a != b

    return exclusive


COMPARISONS = frozenset({"=", "<>", "<", ">", "<=", ">="})


def comparison(op: str, left: Compiled, right: Compiled) -> Compiled:
    if op == "=":
        return lambda row: equals(left(row), right(row))
    if op == "<>":

        def unequal(row: Row) -> Any:
            same = equals(left(row), right(row))
            return None if same is None else not same

        return unequal
    accept = {"<": (-1,), ">": (1,), "<=": (-1, 0), ">=": (1, 0)}[op]

    def ordered(row: Row) -> Any:
        order = compare(left(row), right(row))
        return None if order is None else order in accept

    return ordered


STRING_TESTS: dict[str, Callable[[str, str], bool]] = {
    "starts with": str.startswith,
    "ends with": str.endswith,
    "contains": lambda a, b: b in a,
    "=~": lambda a, b: regex(b).fullmatch(a) is not None,
}


def arithmetic(op: str, a: Any, b: Any, at: syntax.At) -> Any:
    if a is None or b is None:
        return None
    if op == "+":
        if isinstance(a, list):
            return a + b if isinstance(b, list) else [*a, b]
        if isinstance(b, list):
            return [a, *b]
        texts = isinstance(a, str) or isinstance(b, str)
        numbers_or_texts = all(
            isinstance(v, str | int | float) and not isinstance(v, bool) for v in (a, b)
        )
        if texts and numbers_or_texts:
            return stringify(a) + stringify(b)
    if isinstance(a, DateTime) and isinstance(b, Duration) and op in ("+", "-"):
        return DateTime(a.epoch + b.seconds if op == "+" else a.epoch - b.seconds)
    if isinstance(a, Duration) and isinstance(b, DateTime) and op == "+":
        return DateTime(b.epoch + a.seconds)
    if isinstance(a, Duration) and isinstance(b, Duration) and op in ("+", "-"):
        return Duration(a.seconds + b.seconds if op == "+" else a.seconds - b.seconds)
    if isinstance(a, Duration) and is_number(b) and op in ("*", "/"):
        return Duration(a.seconds * b if op == "*" else a.seconds / b)
    if not is_number(a) or not is_number(b):
        raise type_error(at, f"cannot apply {op} to a {type_name(a)} and a {type_name(b)}")
    if op == "+":
        return within_64_bits(a + b, at)
    if op == "-":
        return within_64_bits(a - b, at)
    if op == "*":
        return within_64_bits(a * b, at)
    if op == "^":
        power = float(a) ** float(b)
        return power if isinstance(power, float) else math.nan  # a negative's root: no real
    both_integers = isinstance(a, int) and isinstance(b, int)
    if op == "/":
        if both_integers:
            if b == 0:
                raise type_error(at, "division by zero")
            quotient = abs(a) // abs(b)
            return quotient if (a >= 0) == (b >= 0) else -quotient
        if b == 0:
            return math.nan if a == 0 else math.copysign(math.inf, a) * math.copysign(1, b)
        return a / b
    if both_integers:
        if b == 0:
            raise type_error(at, "division by zero")
        remainder = abs(a) % abs(b)  # exact, where fmod's floats are not past 2**53
        return remainder if a >= 0 else -remainder
    return math.fmod(a, b) if b != 0 else math.nan


LONGEST = 2**63  # Cypher's integers are 64-bit: past them, an overflow, never a bigger number


def within_64_bits(value: Any, at: syntax.At) -> Any:
    """An integer result, refused when it does not fit Cypher's 64 bits (floats pass)."""
    if isinstance(value, int) and not -LONGEST <= value < LONGEST:
        raise query_error(
            at, "integer overflow: the result does not fit in 64 bits", "cypher_value"
        )
    return value


def stringify(value: Any) -> str:
    """A value as `toString` writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return float_text(value)
    return str(value)


def float_text(value: float) -> str:
    """A float as Cypher writes it (Java's shortest form): `1.5`, `3.0`, `1.0E16`, `1.0E-5`,
    `NaN`, `Infinity`; the scientific form below 10**-3 and from 10**7 on."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)  # Python's plain form here, with its ".0" for a whole number
    _, digits, exponent = Decimal(repr(value)).as_tuple()
    shown = "".join(map(str, digits)).rstrip("0") or "0"
    assert isinstance(exponent, int)  # a finite float's
    power = len(digits) + exponent - 1
    return f"{'-' if value < 0 else ''}{shown[0]}.{shown[1:] or '0'}E{power}"
