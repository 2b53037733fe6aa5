"""A read-only Cypher query as the parser (cypher/parse.py) gives it to the planner: frozen
dataclasses, one per construct, each with the line and column it starts at so that the
planner's and the executor's refusals name where the construct is.

Names are kept as written (labels, relationship types, property keys, variables); function
names are lower-cased (Cypher's functions are case-insensitive); keywords are gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal as Choice

# --- expressions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class At:
    """Where a construct starts in the query: 1-based line and column."""

    line: int
    column: int


@dataclass(frozen=True)
class Expr:
    at: At = field(compare=False, kw_only=True)


@dataclass(frozen=True)
class Literal(Expr):
    value: bool | int | float | str | None


@dataclass(frozen=True)
class Parameter(Expr):
    """`$name` (or `$0`): a value of the request's `parameters` object."""

    name: str


@dataclass(frozen=True)
class Variable(Expr):
    name: str


@dataclass(frozen=True)
class Property(Expr):
    """`subject.key`."""

    subject: Expr
    key: str


@dataclass(frozen=True)
class ListExpr(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class MapExpr(Expr):
    items: tuple[tuple[str, Expr], ...]


@dataclass(frozen=True)
class Unary(Expr):
    op: Choice["not", "-", "+"]
    operand: Expr


BinaryOp = Choice[
    "or", "xor", "and",
    "=", "<>", "<", ">", "<=", ">=",
    "+", "-", "*", "/", "%", "^",
    "in", "starts with", "ends with", "contains", "=~",
]  # fmt: skip


@dataclass(frozen=True)
class Binary(Expr):
    """A binary operator. A chain of comparisons `a < b < c` is given as
    `(a < b) and (b < c)`, as Cypher defines it."""

    op: BinaryOp
    left: Expr
    right: Expr


@dataclass(frozen=True)
class IsNull(Expr):
    """`operand IS NULL`, or `IS NOT NULL` when `negated`."""

    operand: Expr
    negated: bool


@dataclass(frozen=True)
class HasLabels(Expr):
    """`n:User` or `n:User:Group` (every label), as a predicate."""

    subject: Expr
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Index(Expr):
    """`subject[index]`: a list's element or a map's value."""

    subject: Expr
    index: Expr


@dataclass(frozen=True)
class Slice(Expr):
    """`subject[start..end]`, either bound left out."""

    subject: Expr
    start: Expr | None
    end: Expr | None


@dataclass(frozen=True)
class FunctionCall(Expr):
    """`name(args)`; `name` lower-cased, with its namespace (`date.truncate`) if any.
    `count(*)` is `CountStar`."""

    name: str
    args: tuple[Expr, ...]
    distinct: bool = False


@dataclass(frozen=True)
class CountStar(Expr):
    pass


@dataclass(frozen=True)
class Case(Expr):
    """`CASE [subject] WHEN .. THEN .. [ELSE ..] END`: with a subject, each `when` is a value
    compared with it; without one, each is a predicate."""

    subject: Expr | None
    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr | None


@dataclass(frozen=True)
class ListComprehension(Expr):
    """`[variable IN source WHERE where | projection]`."""

    variable: str
    source: Expr
    where: Expr | None
    projection: Expr | None


@dataclass(frozen=True)
class Quantifier(Expr):
    """`any(variable IN source WHERE where)`, and all, none, single."""

    kind: Choice["any", "all", "none", "single"]
    variable: str
    source: Expr
    where: Expr


@dataclass(frozen=True)
class PatternPredicate(Expr):
    """A pattern used as a predicate: `(a)-[:X]->(b)` in WHERE, or `exists((a)-->(b))`:
    true when the pattern has at least one match with the variables bound so far."""

    pattern: PatternPath


@dataclass(frozen=True)
class PatternComprehension(Expr):
    """`[path = (a)-->(b) WHERE where | projection]`."""

    pattern: PatternPath
    where: Expr | None
    projection: Expr


# --- patterns -------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodePattern:
    at: At = field(compare=False)
    variable: str | None
    labels: tuple[str, ...]  # every one must hold
    properties: MapExpr | Parameter | None


@dataclass(frozen=True)
class Length:
    """A relationship's `*` range: `*` is (1, None), `*2` is (2, 2), `*..3` is (1, 3),
    `*2..` is (2, None), `*0..1` is (0, 1)."""

    minimum: int
    maximum: int | None


@dataclass(frozen=True)
class RelationshipPattern:
    at: At = field(compare=False)
    variable: str | None
    types: tuple[str, ...]  # any one of them; empty: any type
    direction: Choice["out", "in", "both"]  # -->, <--, -- (or <-->)
    properties: MapExpr | Parameter | None
    length: Length | None  # None: exactly one relationship


@dataclass(frozen=True)
class PatternPath:
    """`[variable =] (a)-[r]->(b)...`, alternately nodes and relationships, a node first and
    last; `shortest` when wrapped in `shortestPath(...)` or `allShortestPaths(...)`."""

    at: At = field(compare=False)
    variable: str | None
    elements: tuple[NodePattern | RelationshipPattern, ...]
    shortest: Choice["one", "all"] | None = None


# --- clauses --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProjectionItem:
    """`expression [AS alias]`; `name` is the column's name: the alias, or the expression as
    written (whitespace kept) when it has none."""

    expression: Expr
    name: str
    aliased: bool


@dataclass(frozen=True)
class SortItem:
    expression: Expr
    descending: bool


@dataclass(frozen=True)
class Projection:
    """What RETURN and WITH share. `star`: `*` was asked for, before the items."""

    at: At = field(compare=False)
    items: tuple[ProjectionItem, ...]
    star: bool = False
    distinct: bool = False
    order: tuple[SortItem, ...] = ()
    skip: Expr | None = None
    limit: Expr | None = None


@dataclass(frozen=True)
class Clause:
    at: At = field(compare=False, kw_only=True)


@dataclass(frozen=True)
class Match(Clause):
    patterns: tuple[PatternPath, ...]
    where: Expr | None
    optional: bool = False


@dataclass(frozen=True)
class Unwind(Clause):
    expression: Expr
    variable: str


@dataclass(frozen=True)
class With(Clause):
    projection: Projection
    where: Expr | None


@dataclass(frozen=True)
class Return(Clause):
    projection: Projection


@dataclass(frozen=True)
class SingleQuery:
    """Reading clauses and WITHs, ending with a RETURN."""

    clauses: tuple[Clause, ...]


@dataclass(frozen=True)
class Query:
    """One or more single queries joined by UNION (`union_all[i]`: the union between parts
    i and i+1 keeps duplicates)."""

    parts: tuple[SingleQuery, ...]
    union_all: tuple[bool, ...] = ()
