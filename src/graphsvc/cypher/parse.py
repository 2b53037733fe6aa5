"""The Cypher parser: `parse(text)` turns a read-only openCypher query into the syntax tree
of syntax.py, or raises an `ApiError` (400, context "cypher") that says what is wrong and
where.

The grammar is grammar.lark, run by lark's LALR parser; `_Builder` turns lark's tree into
syntax.py's dataclasses and settles the constructs that the grammar leaves open (a
parenthesised expression or a node pattern, a list literal or a comprehension, see the
grammar's header).

Every refusal's message starts with `line L:C`, the line and the column where the fault is,
both counted from 1 as editors count them. Its code says what kind of refusal it is:

    cypher_empty        the query is empty
    cypher_syntax       not Cypher: an unexpected token, a bad literal
    cypher_updating     CREATE, MERGE, SET, DELETE, DETACH DELETE, REMOVE, FOREACH, LOAD CSV
    cypher_procedure    CALL, of a procedure or a subquery
    cypher_unsupported  valid Cypher that graphsvc does not run (EXISTS { }, reduce(), ...)
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import marshal
import math
import re
import typing
from collections.abc import Callable, Iterator
from importlib import resources

import lark
from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError
from lark.grammar import Rule
from lark.lark import PostLex
from lark.lexer import PatternStr, TerminalDef
from lark.tree import Meta

from graphsvc.cypher.syntax import (
    At,
    Binary,
    BinaryOp,
    Case,
    CountStar,
    Expr,
    FunctionCall,
    HasLabels,
    Index,
    IsNull,
    Length,
    ListComprehension,
    ListExpr,
    Literal,
    MapExpr,
    Match,
    NodePattern,
    Parameter,
    PatternComprehension,
    PatternPath,
    PatternPredicate,
    Projection,
    ProjectionItem,
    Property,
    Quantifier,
    Query,
    RelationshipPattern,
    Return,
    SingleQuery,
    Slice,
    SortItem,
    Unary,
    Unwind,
    Variable,
    With,
)
from graphsvc.errors import ApiError

__all__ = ["ApiError", "parse"]

_LARGEST_INT = 2**63 - 1


# Parsing is about half of a short query's time (1 ms of 2.1 for `MATCH (n:Computer) RETURN
# count(n)`), and scripts and dashboards ask the same texts again: the trees of the latest
# texts are kept (they are immutable). Only short texts, so that what is kept stays small.
KEPT_TREES = 512
KEPT_TEXT_CHARACTERS = 4096


def parse(text: str) -> Query:
    """The syntax tree of the query `text`; raises `ApiError` (400) when it is not one that
    graphsvc runs."""
    if len(text) <= KEPT_TEXT_CHARACTERS:
        return _parse_kept(text)
    return _parse(text)


@functools.lru_cache(maxsize=KEPT_TREES)
def _parse_kept(text: str) -> Query:
    return _parse(text)


def _parse(text: str) -> Query:
    if not text.strip():
        raise ApiError(400, "the query is empty", "cypher", code="cypher_empty")
    try:
        tree = _parser().parse(text)
        query: Query = _Builder(text).transform(tree)
    except UnexpectedInput as exc:
        raise _refusal(text, exc) from None
    except VisitError as exc:  # lark wraps what a _Builder method raises
        if isinstance(exc.orig_exc, ApiError):
            raise exc.orig_exc from None
        if isinstance(exc.orig_exc, RecursionError):
            raise _too_deep() from None
        raise exc.orig_exc from None  # a bug of the builder: its own traceback, not lark's
    except RecursionError:  # lark's tree walk recurses once a level of nesting
        raise _too_deep() from None
    return query


def _error(code: str, at: At, what: str) -> ApiError:
    return ApiError(400, f"line {at.line}:{at.column} {what}", "cypher", code=code)


def _too_deep() -> ApiError:
    return _error("cypher_unsupported", At(1, 1), "the query nests too deeply")


class _NameEverywhere(PostLex):
    """Lets the lexer read a NAME in every parser state, so that a word the grammar does not
    expect is one token (`RETRN`, `CREATE`) that the error names, rather than a keyword
    matched by its first letters (`RETURN` in `RETURNS`)."""

    always_accept = ("NAME",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        return stream


# lark's LALR tables for grammar.lark, made ahead by `python -m graphsvc.cypher.parse`: making
# them is 0.15 s of CPU, loading them 0.013 s, and every `graphsvc query` and server start
# paid the making (bench/README "The command line's CPU"). marshal, not pickle: the tables
# are plain lists, dicts, strings and numbers, and loading them runs no code.
TABLES_FILE = "grammar.tables"


def _tables_key(grammar: str) -> str:
    """What the tables were made from: the grammar, lark's release and marshal's format.
    Tables of another key are not used: the parser is made from the grammar instead."""
    digest = hashlib.sha256(grammar.encode()).hexdigest()
    return f"{digest} lark {lark.__version__} marshal {marshal.version}"


@functools.cache
def _parser() -> Lark:
    grammar = resources.files(__package__).joinpath("grammar.lark").read_text("utf-8")
    tables = resources.files(__package__).joinpath(TABLES_FILE)
    try:
        kept = marshal.loads(tables.read_bytes())  # noqa: S302 - the package's own file, as its .pyc
    except (OSError, EOFError, ValueError, TypeError):
        kept = None
    if isinstance(kept, dict) and kept.get("key") == _tables_key(grammar):
        parser: Lark = Lark.__new__(Lark)._load(
            kept["tables"], postlex=_NameEverywhere(), propagate_positions=True
        )
        return parser
    return _make_parser(grammar)


def _make_parser(grammar: str) -> Lark:
    return Lark(
        grammar,
        start="query",
        parser="lalr",
        lexer="contextual",
        postlex=_NameEverywhere(),
        propagate_positions=True,
        maybe_placeholders=True,
    )


def made_tables(grammar: str) -> bytes:
    """The content of TABLES_FILE for `grammar`, made with the lark installed."""
    data, memo = _make_parser(grammar).memo_serialize([TerminalDef, Rule])
    data["options"] = {k: v for k, v in data["options"].items() if k != "postlex"}
    return marshal.dumps({"key": _tables_key(grammar), "tables": {"data": data, "memo": memo}})


# --- building the syntax tree ---------------------------------------------------------------


def _at(meta: Meta) -> At:
    return At(meta.line, meta.column)


def _unquote(name: str) -> str:
    """A name as written: `` `a b` `` is `a b`, a doubled backquote is one."""
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", re.DOTALL)
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_COMPARATORS: dict[str, BinaryOp] = {
    "EQ": "=",
    "NE": "<>",
    "LT": "<",
    "GT": ">",
    "LE": "<=",
    "GE": ">=",
}
# A quantifier's name as the kind that Quantifier takes.
_QUANTIFIERS: dict[str, typing.Literal["any", "all", "none", "single"]] = {
    "any": "any",
    "all": "all",
    "none": "none",
    "single": "single",
}
_Direction = typing.Literal["out", "in", "both"]


def _binary(op: BinaryOp) -> Callable[[_Builder, Meta, Expr, Expr], Binary]:
    def build(self: _Builder, meta: Meta, left: Expr, right: Expr) -> Binary:
        return Binary(op, left, right, at=_at(meta))

    return build


@dataclasses.dataclass(frozen=True)
class _Paren:
    """`( ... )`: a parenthesised expression or a node pattern, which the parser tells only by
    what follows (a relationship, or where it stands)."""

    at: At
    expression: Expr | None
    labels: tuple[str, ...]  # of `(:A:B ...)`; `(n:A)` is a HasLabels expression
    properties: MapExpr | Parameter | None

    def as_expression(self) -> Expr:
        if self.expression is None or self.labels or self.properties is not None:
            raise _error(
                "cypher_syntax",
                self.at,
                "a node pattern is not an expression: as a predicate, a pattern needs a "
                "relationship, as in (a)-->()",
            )
        return self.expression

    def as_node(self) -> NodePattern:
        variable, labels, properties = self.expression, self.labels, self.properties
        if isinstance(variable, HasLabels):
            labels = variable.labels
            variable = variable.subject
        elif isinstance(variable, MapExpr | Parameter) and properties is None:
            variable, properties = None, variable
        if variable is not None and not isinstance(variable, Variable):
            raise _error(
                "cypher_syntax",
                self.at,
                "expected a node pattern: (variable:Label {key: value}), each part optional",
            )
        name = variable.name if isinstance(variable, Variable) else None
        return NodePattern(self.at, name, labels, properties)


def _path(meta: Meta, items: tuple[_Paren | RelationshipPattern, ...]) -> PatternPath:
    elements = tuple(item.as_node() if isinstance(item, _Paren) else item for item in items)
    return PatternPath(_at(meta), None, elements)


@v_args(meta=True, inline=True)
class _Builder(Transformer[Token, Query]):
    """Builds syntax.py's tree from lark's, bottom-up: one method per rule or alias of the
    grammar, given the rule's position (`meta`) and its children."""

    def __init__(self, text: str) -> None:
        super().__init__(visit_tokens=False)
        self._text = text
        # 9223372036854775808 is an integer only as the operand of a minus: the literals
        # of that value that no minus has claimed yet.
        self._unclaimed: list[tuple[Literal, str]] = []

    # --- clauses

    def query(self, meta: Meta, *children: SingleQuery | bool) -> Query:
        if self._unclaimed:
            literal, written = self._unclaimed[0]
            raise _error("cypher_syntax", literal.at, f"the integer {written} is too large")
        parts = tuple(child for child in children if isinstance(child, SingleQuery))
        union_all = tuple(child for child in children if isinstance(child, bool))
        return Query(parts, union_all)

    def union(self, meta: Meta, all_: Token | None) -> bool:
        return all_ is not None

    def single_query(self, meta: Meta, *clauses: Match | Unwind | With | Return) -> SingleQuery:
        return SingleQuery(clauses)

    def match(self, meta: Meta, optional: Token | None, *rest: typing.Any) -> Match:
        *patterns, where = rest
        return Match(tuple(patterns), where, optional=optional is not None, at=_at(meta))

    def unwind(self, meta: Meta, expression: Expr, variable: str) -> Unwind:
        return Unwind(expression, variable, at=_at(meta))

    def with_clause(self, meta: Meta, projection: Projection, where: Expr | None) -> With:
        return With(projection, where, at=_at(meta))

    def return_clause(self, meta: Meta, projection: Projection) -> Return:
        return Return(projection, at=_at(meta))

    def projection(self, meta: Meta, distinct: Token | None, *rest: typing.Any) -> Projection:
        *items, order, skip, limit = rest
        star = isinstance(items[0], Token)
        return Projection(
            _at(meta),
            tuple(items[1:] if star else items),
            star=star,
            distinct=distinct is not None,
            order=order or (),
            skip=skip,
            limit=limit,
        )

    def projection_item(self, meta: Meta, expression: Expr, alias: str | None) -> ProjectionItem:
        if alias is not None:
            return ProjectionItem(expression, alias, aliased=True)
        return ProjectionItem(expression, self._text[meta.start_pos : meta.end_pos], False)

    def order(self, meta: Meta, *items: SortItem) -> tuple[SortItem, ...]:
        return items

    def sort_item(self, meta: Meta, expression: Expr, direction: Token | None) -> SortItem:
        return SortItem(expression, direction is not None and direction.type.startswith("DESC"))

    def skip(self, meta: Meta, expression: Expr) -> Expr:
        return expression

    def limit(self, meta: Meta, expression: Expr) -> Expr:
        return expression

    # --- patterns

    def pattern_part(self, meta: Meta, variable: str | None, path: PatternPath) -> PatternPath:
        return dataclasses.replace(path, at=_at(meta), variable=variable)

    def shortest(self, meta: Meta, function: Token, path: PatternPath) -> PatternPath:
        kind: typing.Literal["one", "all"] = "one" if function.type == "SHORTESTPATH" else "all"
        return dataclasses.replace(path, at=_at(meta), shortest=kind)

    def chain(self, meta: Meta, *items: _Paren | RelationshipPattern) -> PatternPath:
        return _path(meta, items)

    def paren(
        self, meta: Meta, expression: Expr | None, properties: MapExpr | Parameter | None
    ) -> _Paren:
        return _Paren(_at(meta), expression, (), properties)

    def anonymous_node(
        self, meta: Meta, labels: tuple[str, ...], properties: MapExpr | Parameter | None
    ) -> _Paren:
        return _Paren(_at(meta), None, labels, properties)

    def node_labels(self, meta: Meta, *labels: str) -> tuple[str, ...]:
        return labels

    def relationship(
        self,
        meta: Meta,
        opening: Token,
        detail: RelationshipPattern | None,
        arrow: Token | None,
    ) -> RelationshipPattern:
        left, right = opening.type == "LARROW", arrow is not None
        direction: _Direction = "both" if left == right else "in" if left else "out"
        if detail is None:
            return RelationshipPattern(_at(meta), None, (), direction, None, None)
        return dataclasses.replace(detail, at=_at(meta), direction=direction)

    def relationship_detail(
        self,
        meta: Meta,
        variable: str | None,
        types: tuple[str, ...] | None,
        length: Length | None,
        properties: MapExpr | Parameter | None,
    ) -> RelationshipPattern:
        # The direction is the relationship's, which sets it.
        return RelationshipPattern(_at(meta), variable, types or (), "both", properties, length)

    def relationship_types(self, meta: Meta, *types: str) -> tuple[str, ...]:
        return types

    def length(
        self, meta: Meta, low: Token | None, dots: Token | None, high: Token | None
    ) -> Length:
        bounds = [self._bound(token) for token in (low, high)]
        minimum = 1 if bounds[0] is None else bounds[0]
        if dots is None:  # `*` or `*2`
            return Length(minimum, bounds[0])
        return Length(minimum, bounds[1])

    def _bound(self, token: Token | None) -> int | None:
        if token is None:
            return None
        if not token.value.isdigit():
            what = f"expected an integer in a relationship's length, not {token.value}"
            raise _error("cypher_syntax", At(token.line or 1, token.column or 1), what)
        return int(token.value)

    # --- expressions

    op_or = _binary("or")
    op_xor = _binary("xor")
    op_and = _binary("and")
    op_in = _binary("in")
    op_starts_with = _binary("starts with")
    op_ends_with = _binary("ends with")
    op_contains = _binary("contains")
    op_regex = _binary("=~")
    op_add = _binary("+")
    op_sub = _binary("-")
    op_mul = _binary("*")
    op_div = _binary("/")
    op_mod = _binary("%")
    op_pow = _binary("^")

    def op_not(self, meta: Meta, operand: Expr) -> Expr:
        return Unary("not", operand, at=_at(meta))

    def op_plus(self, meta: Meta, operand: Expr) -> Expr:
        return Unary("+", operand, at=_at(meta))

    def op_negate(self, meta: Meta, operand: Expr) -> Expr:
        if any(operand is literal for literal, _ in self._unclaimed):
            self._unclaimed = [item for item in self._unclaimed if item[0] is not operand]
            return Literal(-(2**63), at=_at(meta))
        return Unary("-", operand, at=_at(meta))

    def comparisons(self, meta: Meta, left: Expr, *rest: typing.Any) -> Expr:
        """`a < b < c` is `a < b AND b < c`."""
        comparisons = []
        for comparator, right in zip(rest[::2], rest[1::2], strict=True):
            comparisons.append(Binary(_COMPARATORS[comparator.type], left, right, at=left.at))
            left = right
        return functools.reduce(lambda a, b: Binary("and", a, b, at=_at(meta)), comparisons)

    def is_null(self, meta: Meta, operand: Expr) -> Expr:
        return IsNull(operand, negated=False, at=_at(meta))

    def is_not_null(self, meta: Meta, operand: Expr) -> Expr:
        return IsNull(operand, negated=True, at=_at(meta))

    def has_label(self, meta: Meta, subject: Expr, label: str) -> Expr:
        if isinstance(subject, HasLabels):  # `n:A:B`, parsed as `(n:A):B`
            return HasLabels(subject.subject, (*subject.labels, label), at=subject.at)
        return HasLabels(subject, (label,), at=_at(meta))

    def property(self, meta: Meta, subject: Expr, key: str) -> Expr:
        return Property(subject, key, at=_at(meta))

    def index(self, meta: Meta, subject: Expr, index: Expr) -> Expr:
        return Index(subject, index, at=_at(meta))

    def slice(self, meta: Meta, subject: Expr, start: Expr | None, end: Expr | None) -> Expr:
        return Slice(subject, start, end, at=_at(meta))

    def call(
        self,
        meta: Meta,
        callee: Expr,
        distinct: Token | None,
        arguments: tuple[Expr, ...] | None,
    ) -> Expr:
        name = self._function_name(callee)
        if name == "reduce":  # reduce(acc = 0, x IN list | ...) fails before it gets here
            raise _error("cypher_unsupported", callee.at, "reduce(...) is not supported")
        if name in _QUANTIFIERS:
            what = f"{name}() needs WHERE: {name}(x IN list WHERE predicate)"
            raise _error("cypher_syntax", callee.at, what)
        if distinct is not None and arguments is None:
            raise _error("cypher_syntax", callee.at, f"{name}(DISTINCT) needs an argument")
        if name == "exists" and distinct is None and arguments and len(arguments) == 1:
            (argument,) = arguments
            if isinstance(argument, PatternPredicate):
                return PatternPredicate(argument.pattern, at=_at(meta))
        return FunctionCall(name, arguments or (), distinct is not None, at=_at(meta))

    def call_star(self, meta: Meta, callee: Expr) -> Expr:
        name = self._function_name(callee)
        if name != "count":
            raise _error("cypher_syntax", callee.at, f"only count takes *, not {name}")
        return CountStar(at=_at(meta))

    def quantifier(self, meta: Meta, callee: Expr, head: Expr, where: Expr) -> Expr:
        name = self._function_name(callee)
        kind = _QUANTIFIERS.get(name)
        if kind is None:
            what = f"{name}(... WHERE ...) is not a quantifier: any, all, none or single"
            raise _error("cypher_syntax", callee.at, what)
        variable, source = self._iteration(head, f"{name}()")
        return Quantifier(kind, variable, source, where, at=_at(meta))

    def _function_name(self, callee: Expr) -> str:
        """`f` or `ns.f` (lower-cased), from the expression before `(`."""
        if isinstance(callee, Variable):
            return callee.name.lower()
        if isinstance(callee, Property):
            return f"{self._function_name(callee.subject)}.{callee.key.lower()}"
        raise _error("cypher_syntax", callee.at, "expected a function's name before '('")

    def _iteration(self, head: Expr, construct: str) -> tuple[str, Expr]:
        """`variable IN source`, which a comprehension or a quantifier begins with."""
        if isinstance(head, Binary) and head.op == "in" and isinstance(head.left, Variable):
            return head.left.name, head.right
        raise _error("cypher_syntax", head.at, f"expected `variable IN list` in {construct}")

    def arguments(self, meta: Meta, *expressions: Expr) -> tuple[Expr, ...]:
        return expressions

    # --- atoms

    def number(self, meta: Meta, token: Token) -> Expr:
        written = token.value.lower()
        base = 16 if written.startswith("0x") else 8 if written.startswith("0o") else 10
        digits = written[2:] if base != 10 else written
        if base == 10 and not digits.isdigit():
            number = float(written)
            if math.isinf(number):
                raise _error("cypher_syntax", _at(meta), f"the number {_cut(token)} is too large")
            return Literal(number, at=_at(meta))
        # 22 digits hold 2**63 in octal; int() would refuse a number of over 4300 digits.
        value = int(digits, base) if len(digits.lstrip("0")) <= 22 else _LARGEST_INT + 2
        if value > _LARGEST_INT + 1:
            raise _error("cypher_syntax", _at(meta), f"the integer {_cut(token)} is too large")
        literal = Literal(value, at=_at(meta))
        if value == _LARGEST_INT + 1:
            self._unclaimed.append((literal, token.value))
        return literal

    def string(self, meta: Meta, token: Token) -> Expr:
        start = token.start_pos or 0

        def unescape(match: re.Match[str]) -> str:
            escape = match[1]
            if len(escape) > 1 and int(escape[1:], 16) <= 0x10FFFF:
                return chr(int(escape[1:], 16))
            if escape in _ESCAPES:
                return _ESCAPES[escape]
            at = _at_offset(self._text, start + 1 + match.start())
            raise _error("cypher_syntax", at, f"unknown escape \\{escape} in a string")

        value = _ESCAPE.sub(unescape, token.value[1:-1])
        try:  # `\uD83D\uDE00` is one character, written as UTF-16 writes it
            value = value.encode("utf-16", "surrogatepass").decode("utf-16")
        except UnicodeDecodeError:
            raise _error(
                "cypher_syntax",
                _at(meta),
                "the string has half of a surrogate pair (\\uD800-\\uDFFF)",
            ) from None
        return Literal(value, at=_at(meta))

    def true(self, meta: Meta) -> Expr:
        return Literal(True, at=_at(meta))

    def false(self, meta: Meta) -> Expr:
        return Literal(False, at=_at(meta))

    def null(self, meta: Meta) -> Expr:
        return Literal(None, at=_at(meta))

    def parameter(self, meta: Meta, token: Token) -> Parameter:
        return Parameter(_unquote(token.value[1:]), at=_at(meta))

    def variable(self, meta: Meta, name: str) -> Expr:
        return Variable(name, at=_at(meta))

    def name(self, meta: Meta, token: Token) -> str:
        return _unquote(token.value)

    def map(self, meta: Meta, *entries: tuple[str, Expr] | None) -> MapExpr:
        # `{}` gives one placeholder
        return MapExpr(tuple(entry for entry in entries if entry is not None), at=_at(meta))

    def map_entry(self, meta: Meta, key: str, value: Expr) -> tuple[str, Expr]:
        return key, value

    def list(self, meta: Meta, items: tuple[Expr, ...] | None) -> Expr:
        # `[x IN list]` is a comprehension (that copies the list), as in Neo4j.
        if items is not None and len(items) == 1:
            head = items[0]
            if isinstance(head, Binary) and head.op == "in" and isinstance(head.left, Variable):
                return self.comprehension(meta, head, None, None)
        return ListExpr(items or (), at=_at(meta))

    def comprehension(
        self, meta: Meta, head: Expr, where: Expr | None, projection: Expr | None
    ) -> Expr:
        """`[x IN list WHERE .. | ..]`, or `[p = (a)-->(b) WHERE .. | ..]` when `head` is
        a pattern (or `p = ` and a pattern, which parses as a comparison)."""
        path: PatternPath | None = None
        if isinstance(head, PatternPredicate):
            path = head.pattern
        elif (
            isinstance(head, Binary)
            and head.op == "="
            and isinstance(head.left, Variable)
            and isinstance(head.right, PatternPredicate)
        ):
            path = dataclasses.replace(head.right.pattern, at=head.at, variable=head.left.name)
        if path is not None:
            if projection is None:
                what = "a pattern comprehension needs a projection: [(a)-->(b) | b]"
                raise _error("cypher_syntax", _at(meta), what)
            return PatternComprehension(path, where, projection, at=_at(meta))
        variable, source = self._iteration(head, "a list comprehension")
        return ListComprehension(variable, source, where, projection, at=_at(meta))

    def filter_comprehension(self, meta: Meta, head: Expr, where: Expr) -> Expr:
        return self.comprehension(meta, head, where, None)

    def case(self, meta: Meta, subject: Expr | None, *rest: typing.Any) -> Expr:
        *whens, default = rest
        return Case(subject, tuple(whens), default, at=_at(meta))

    def case_when(self, meta: Meta, when: Expr, then: Expr) -> tuple[Expr, Expr]:
        return when, then

    def parenthesised(self, meta: Meta, paren: _Paren) -> Expr:
        return paren.as_expression()

    def pattern_predicate(self, meta: Meta, *items: _Paren | RelationshipPattern) -> Expr:
        return PatternPredicate(_path(meta, items), at=_at(meta))


# --- refusals -------------------------------------------------------------------------------

_UPDATING = ("CREATE", "MERGE", "SET", "DELETE", "DETACH", "REMOVE", "FOREACH", "LOAD")
_READ_ONLY = "graphsvc's graph is written by ingest only"
_SECOND_WORD = {"DETACH": "DELETE", "LOAD": "CSV"}
_SUBQUERIES = ("exists", "count", "collect")

_CLAUSES = ("_MATCH", "OPTIONAL", "_UNWIND", "_WITH", "_RETURN")
# What the parser expects, in words: a group of terminals is named as one when its first
# terminal is among those expected.
_GROUPS = (
    (_CLAUSES, "a clause (MATCH, OPTIONAL MATCH, UNWIND, WITH, RETURN)"),
    (
        (
            *("NUMBER", "STRING", "PARAM", "NAME", "QUOTED_NAME", "_TRUE", "_FALSE", "_NULL"),
            *("_CASE", "_NOT", "LSQB", "LBRACE", "LPAR", "MINUS", "PLUS"),
        ),
        "an expression",
    ),
    (
        (
            *("_AND", "_OR", "_XOR", "_IN", "_STARTS", "_ENDS", "_CONTAINS", "_IS", "EQ", "NE"),
            *("LT", "GT", "LE", "GE", "REGEX", "PLUS", "MINUS", "STAR", "SLASH", "PERCENT"),
            *("CIRCUMFLEX", "DOT", "LSQB", "LPAR", "COLON"),
        ),
        "an operator",
    ),
    (("REL_DASH", "LARROW"), "a relationship (-->, <--, --)"),
    (("NAME", "QUOTED_NAME"), "a name"),
)
_WORDS = {
    "_ORDER": "ORDER BY",
    "OPTIONAL": "OPTIONAL MATCH",
    "_STARTS": "STARTS WITH",
    "_ENDS": "ENDS WITH",
    "NUMBER": "a number",
    "STRING": "a string",
    "PARAM": "a parameter",
}


def _refusal(text: str, exc: UnexpectedInput) -> ApiError:
    """The error that tells the user why lark could not parse `text`."""
    if isinstance(exc, UnexpectedCharacters):
        at = At(exc.line, exc.column)
        char = text[exc.pos_in_stream or 0]
        accepted, _ = _replay(text, exc.pos_in_stream or 0)
        if char in "'\"":
            return _error("cypher_syntax", at, f"unexpected {_quoted(char)}: the string never ends")
        if char == "`":
            return _error("cypher_syntax", at, "unexpected '`': the quoted name never ends")
        return _error("cypher_syntax", at, f"unexpected {_quoted(char)}{_expecting(accepted)}")
    token: Token = exc.token if isinstance(exc, UnexpectedToken) else Token("$END", "")
    if token.type == "$END":
        at = At(token.end_line or token.line or 1, token.end_column or token.column or 1)
        accepted, before = _replay(text, None)
    else:
        at = At(token.line or 1, token.column or 1)
        accepted, before = _replay(text, token.start_pos or 0)
    clause_may_start = "_MATCH" in accepted or "_UNION" in accepted
    if clause_may_start and token.type in ("$END", "_UNION", "SEMICOLON") and "_RETURN" in accepted:
        return _error("cypher_syntax", at, "a query must end with RETURN")
    word = token.value.upper()
    if clause_may_start and word in _UPDATING:
        second = _SECOND_WORD.get(word)
        end = token.end_pos or 0
        if second and re.match(rf"\s+{second}\b", text[end:], re.IGNORECASE):
            word = f"{word} {second}"
        what = f"updating clauses are not supported: {word} ({_READ_ONLY})"
        return _error("cypher_updating", at, what)
    if clause_may_start and word == "CALL":
        procedure = re.match(r"\s*(\w+(?:\s*\.\s*\w+)*)", text[token.end_pos or 0 :])
        called = "CALL " + re.sub(r"\s", "", procedure[1]) if procedure else "CALL"
        return _error("cypher_procedure", at, f"procedure calls are not supported: {called}")
    if clause_may_start and word in ("USE", "EXPLAIN", "PROFILE"):
        return _error("cypher_unsupported", at, f"{word} is not supported")
    unsupported = _unsupported([*before, token])
    if unsupported is not None:
        return unsupported
    if token.type == "$END":
        return _error("cypher_syntax", at, f"unexpected end of the query{_expecting(accepted)}")
    return _error("cypher_syntax", at, f"unexpected {_shown(token)}{_expecting(accepted)}")


def _unsupported(tokens: list[Token]) -> ApiError | None:
    """The refusal of a Cypher construct graphsvc does not run, when it is what the parser
    stumbled on: `EXISTS { }` (and COUNT, COLLECT), `reduce(...)`, `n{.key}`. `tokens` are
    the query's up to the one the parser failed at."""
    for token, following in itertools.pairwise(tokens):
        at = At(token.line or 1, token.column or 1)
        word = token.value.lower()
        if token.type == "NAME" and word in _SUBQUERIES and following.value == "{":
            return _error("cypher_unsupported", at, f"{word.upper()} {{ }} is not supported")
        if token.type == "NAME" and word == "reduce" and following.value == "(":
            return _error("cypher_unsupported", at, "reduce(...) is not supported")
    # `n{` where no map may follow a name, or `n {.` where a map's key should be
    failed = tokens[-1].value
    brace = len(tokens) - (1 if failed == "{" else 2)
    if failed in ("{", ".", "*") and brace >= 1 and tokens[brace].value == "{":
        subject = tokens[brace - 1]
        if subject.type in ("NAME", "QUOTED_NAME"):
            at = At(subject.line or 1, subject.column or 1)
            return _error("cypher_unsupported", at, "map projection is not supported")
    return None


def _replay(text: str, stop: int | None) -> tuple[set[str], list[Token]]:
    """The terminals the parser would take at offset `stop` of `text` (at its end if None),
    and the tokens before it.

    Parses again up to there: where lark fails, it has already made the reductions that the
    unexpected token set off, which forget much of what else could have come."""
    interactive = _parser().parse_interactive(text)
    tokens = []
    try:
        for token in interactive.iter_parse():  # gives each token before feeding it
            if stop is not None and (token.start_pos or 0) >= stop:
                break
            tokens.append(token)
    except UnexpectedInput:
        pass  # at `stop`: a character that is not Cypher, or a token no state expects
    accepted: set[str] = interactive.accepts()  # type: ignore[no-untyped-call]  # lark's is untyped
    return accepted, tokens


def _expecting(accepted: set[str]) -> str:
    """`: expected a, b or c`, in words, or nothing when the parser expected nothing."""
    left = set(accepted)
    phrases = []
    for terminals, phrase in _GROUPS:
        if terminals[0] in left:
            phrases.append(phrase)
            left -= set(terminals)
    end = "$END" in left
    left.discard("$END")
    words = []
    for name in left:
        if name in _WORDS:
            words.append(_WORDS[name])
            continue
        pattern = _parser().get_terminal(name).pattern
        value = pattern.value if isinstance(pattern, PatternStr) else name
        words.append(value.upper() if value.isalpha() else _quoted(value))
    phrases += sorted(words)
    if end:
        phrases.append("the end of the query")
    if not phrases:
        return ""
    if len(phrases) == 1:
        return f": expected {phrases[0]}"
    return f": expected {', '.join(phrases[:-1])} or {phrases[-1]}"


def _quoted(text: str) -> str:
    return f'"{text}"' if "'" in text else f"'{text}'"


def _cut(token: Token) -> str:
    """A token as the user wrote it, cut short when long."""
    return token.value if len(token.value) <= 40 else f"{token.value[:37]}..."


def _shown(token: Token) -> str:
    return _quoted(_cut(token))


def _at_offset(text: str, offset: int) -> At:
    line_start = text.rfind("\n", 0, offset) + 1
    return At(text.count("\n", 0, offset) + 1, offset - line_start + 1)


def write_tables() -> None:
    """Make TABLES_FILE again from grammar.lark (after a change of either, or of lark)."""
    folder = resources.files(__package__)
    made = made_tables(folder.joinpath("grammar.lark").read_text("utf-8"))
    with resources.as_file(folder.joinpath(TABLES_FILE)) as written:
        written.write_bytes(made)
    print(f"wrote {written} ({len(made):,} bytes)")


if __name__ == "__main__":  # python -m graphsvc.cypher.parse
    write_tables()
