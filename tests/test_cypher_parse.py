"""The Cypher parser (cypher/parse.py): each construct's syntax tree, precedence, positions,
and every kind of refusal with its code and message. No database: parsing only."""

from __future__ import annotations

import hashlib
import marshal
import typing
from importlib import resources
from typing import get_args

import lark
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lark import Lark
from lark.exceptions import UnexpectedInput

from graphsvc.cypher import parse as cypher_parse
from graphsvc.cypher.parse import parse
from graphsvc.cypher.syntax import (
    At,
    Binary,
    BinaryOp,
    Case,
    Clause,
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

# Positions are not part of a node's equality, so the expected trees put any position.
X = At(0, 0)


# --- building expected trees ----------------------------------------------------------------


def lit(value: bool | int | float | str | None) -> Literal:
    return Literal(value, at=X)


def var(name: str) -> Variable:
    return Variable(name, at=X)


def prop(subject: Expr | str, key: str) -> Property:
    return Property(var(subject) if isinstance(subject, str) else subject, key, at=X)


def binary(op: BinaryOp, left: Expr, right: Expr) -> Binary:
    return Binary(op, left, right, at=X)


def unary(op: str, operand: Expr) -> Unary:
    assert op in ("not", "-", "+")
    return Unary(op, operand, at=X)  # type: ignore[arg-type]


def call(name: str, *args: Expr, distinct: bool = False) -> FunctionCall:
    return FunctionCall(name, args, distinct, at=X)


def node(
    variable: str | None = None,
    *labels: str,
    properties: MapExpr | Parameter | None = None,
) -> NodePattern:
    return NodePattern(X, variable, labels, properties)


def rel(
    direction: str,
    variable: str | None = None,
    *types: str,
    properties: MapExpr | Parameter | None = None,
    length: Length | None = None,
) -> RelationshipPattern:
    assert direction in ("out", "in", "both")
    return RelationshipPattern(X, variable, types, direction, properties, length)  # type: ignore[arg-type]


def path(
    *elements: NodePattern | RelationshipPattern,
    variable: str | None = None,
    shortest: str | None = None,
) -> PatternPath:
    return PatternPath(X, variable, elements, shortest)  # type: ignore[arg-type]


def mapping(**items: Expr) -> MapExpr:
    return MapExpr(tuple(items.items()), at=X)


def item(expression: Expr, name: str, aliased: bool = False) -> ProjectionItem:
    return ProjectionItem(expression, name, aliased)


def projection(*items: ProjectionItem, **options: object) -> Projection:
    return Projection(X, items, **options)  # type: ignore[arg-type]


def returning(*items: ProjectionItem, **options: object) -> Return:
    return Return(projection(*items, **options), at=X)


def query(*clauses: Clause) -> Query:
    return Query((SingleQuery(clauses),))


# --- parsing helpers ------------------------------------------------------------------------


def expr(text: str) -> Expr:
    """The expression of `RETURN text`."""
    clause = parse(f"RETURN {text}").parts[0].clauses[0]
    assert isinstance(clause, Return)
    return clause.projection.items[0].expression


def match(text: str) -> Match:
    """The clause `MATCH text`, followed by a RETURN."""
    clause = parse(f"MATCH {text} RETURN 1").parts[0].clauses[0]
    assert isinstance(clause, Match)
    return clause


def pattern(text: str) -> PatternPath:
    (only,) = match(text).patterns
    return only


def refusal(text: str) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse(text)
    assert caught.value.status == 400
    assert caught.value.context == "cypher"
    return caught.value


# --- literals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("42", 42),
        ("9223372036854775807", 2**63 - 1),
        ("0x1F", 31),
        ("0X1f", 31),
        ("0o17", 15),
        ("1.5", 1.5),
        ("1e3", 1000.0),
        ("1E-3", 0.001),
        (".5", 0.5),
        ("2.5e2", 250.0),
        ("'text'", "text"),
        ('"text"', "text"),
        ("''", ""),
        ("true", True),
        ("TRUE", True),
        ("False", False),
        ("null", None),
        ("NULL", None),
    ],
)
def test_literals(text: str, value: object) -> None:
    parsed = expr(text)
    assert parsed == lit(value)  # type: ignore[arg-type]
    assert isinstance(parsed, Literal)
    assert type(parsed.value) is type(value)  # equality alone takes True for 1


def test_the_smallest_integer_is_a_negative_literal() -> None:
    assert expr("-9223372036854775808") == lit(-(2**63))
    assert expr("-0x8000000000000000") == lit(-(2**63))
    assert expr("- 1") == unary("-", lit(1))  # any other minus stays an operator


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (r"'it\'s'", "it's"),
        (r'"say \"hi\""', 'say "hi"'),
        (r"'a\\b'", "a\\b"),
        (r"'\n\t\r\b\f'", "\n\t\r\b\f"),
        (r"'caf\u00e9'", "café"),
        (r"'\uD83D\uDE00'", "\U0001f600"),
        (r"'\U0001F600'", "\U0001f600"),
        ("'two\nlines'", "two\nlines"),
        ('"it\'s"', "it's"),
        ("'say \"hi\"'", 'say "hi"'),
    ],
)
def test_string_escapes(text: str, value: str) -> None:
    assert expr(text) == lit(value)


def test_parameters() -> None:
    assert expr("$name") == Parameter("name", at=X)
    assert expr("$0") == Parameter("0", at=X)
    assert expr("$`a b`") == Parameter("a b", at=X)


def test_lists_and_maps() -> None:
    assert expr("[]") == ListExpr((), at=X)
    assert expr("[1, 'a', [2]]") == ListExpr((lit(1), lit("a"), ListExpr((lit(2),), at=X)), at=X)
    assert expr("{}") == mapping()
    assert expr("{a: 1, `b c`: 2}") == MapExpr((("a", lit(1)), ("b c", lit(2))), at=X)


def test_keywords_as_map_keys_property_keys_and_labels() -> None:
    keys = ("name", "count", "type", "end", "contains", "match", "return", "where", "in")
    assert expr("{" + ", ".join(f"{key}: 1" for key in keys) + "}") == MapExpr(
        tuple((key, lit(1)) for key in keys), at=X
    )
    for key in keys:
        assert expr(f"n.{key}") == prop("n", key)
    assert pattern("(n:Set:Match:Return)") == path(node("n", "Set", "Match", "Return"))
    assert expr("count") == var("count")


def test_backquoted_names() -> None:
    assert expr("`a b`.`c d`") == prop(var("a b"), "c d")
    assert expr("`a``b`") == var("a`b")
    assert expr("`MATCH`") == var("MATCH")
    assert pattern("(`n 1`:`Label x`)-[`r 2`:`TYPE y`]->()") == path(
        node("n 1", "Label x"), rel("out", "r 2", "TYPE y"), node()
    )


# --- operators ------------------------------------------------------------------------------

a, b, c, d = var("a"), var("b"), var("c"), var("d")


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("1 - 2 - 3", binary("-", binary("-", lit(1), lit(2)), lit(3))),
        ("1 + 2 * 3", binary("+", lit(1), binary("*", lit(2), lit(3)))),
        ("(1 + 2) * 3", binary("*", binary("+", lit(1), lit(2)), lit(3))),
        ("8 / 4 / 2", binary("/", binary("/", lit(8), lit(4)), lit(2))),
        ("7 % 4 * 2", binary("*", binary("%", lit(7), lit(4)), lit(2))),
        ("2 ^ 3 ^ 2", binary("^", binary("^", lit(2), lit(3)), lit(2))),
        ("2 * 3 ^ 2", binary("*", lit(2), binary("^", lit(3), lit(2)))),
        ("-2 ^ 2", binary("^", unary("-", lit(2)), lit(2))),
        ("- -a", unary("-", unary("-", a))),
        ("+a", unary("+", a)),
        ("-a.b", unary("-", prop(a, "b"))),
        ("a OR b XOR c AND d", binary("or", a, binary("xor", b, binary("and", c, d)))),
        ("a AND b OR c", binary("or", binary("and", a, b), c)),
        ("a OR b OR c", binary("or", binary("or", a, b), c)),
        ("NOT a AND b", binary("and", unary("not", a), b)),
        ("NOT NOT a", unary("not", unary("not", a))),
        ("NOT a = b", unary("not", binary("=", a, b))),
        ("a = b AND c <> d", binary("and", binary("=", a, b), binary("<>", c, d))),
        ("a != b", binary("<>", a, b)),
        ("a <= b", binary("<=", a, b)),
        ("a >= b", binary(">=", a, b)),
        ("a + 1 < b * 2", binary("<", binary("+", a, lit(1)), binary("*", b, lit(2)))),
        ("a IN [1] = true", binary("=", binary("in", a, ListExpr((lit(1),), at=X)), lit(True))),
        ("a + b IN c", binary("in", binary("+", a, b), c)),
        ("a STARTS WITH 'x'", binary("starts with", a, lit("x"))),
        ("a ends  with 'x'", binary("ends with", a, lit("x"))),
        ("a CONTAINS 'x' + b", binary("contains", a, binary("+", lit("x"), b))),
        ("a =~ 'x.*'", binary("=~", a, lit("x.*"))),
        ("a IS NULL", IsNull(a, False, at=X)),
        ("a IS NOT NULL", IsNull(a, True, at=X)),
        ("NOT a.b IS NULL", unary("not", IsNull(prop(a, "b"), False, at=X))),
        ("a = b IS NULL", binary("=", a, IsNull(b, False, at=X))),
        ("a:User", HasLabels(a, ("User",), at=X)),
        ("a:User:Group AND b", binary("and", HasLabels(a, ("User", "Group"), at=X), b)),
        ("a.b.c", prop(prop(a, "b"), "c")),
        ("a[0]", Index(a, lit(0), at=X)),
        ("a[0][1]", Index(Index(a, lit(0), at=X), lit(1), at=X)),
        ("a.b[0].c", prop(Index(prop(a, "b"), lit(0), at=X), "c")),
        ("a[1..2]", Slice(a, lit(1), lit(2), at=X)),
        ("a[..2]", Slice(a, None, lit(2), at=X)),
        ("a[1..]", Slice(a, lit(1), None, at=X)),
        ("a[..]", Slice(a, None, None, at=X)),
        ("(a)", a),
        ("((a + b))", binary("+", a, b)),
    ],
)
def test_precedence_and_associativity(text: str, tree: Expr) -> None:
    assert expr(text) == tree


def test_comparison_chains_are_conjunctions() -> None:
    assert expr("a < b < c") == binary("and", binary("<", a, b), binary("<", b, c))
    assert expr("a = b <> c <= d") == binary(
        "and", binary("and", binary("=", a, b), binary("<>", b, c)), binary("<=", c, d)
    )
    assert expr("(a < b) < c") == binary("<", binary("<", a, b), c)


# --- functions and other expressions --------------------------------------------------------


def test_function_calls() -> None:
    assert expr("count(*)") == CountStar(at=X)
    assert expr("COUNT( * )") == CountStar(at=X)
    assert expr("count(n)") == call("count", var("n"))
    assert expr("Count(DISTINCT n.name)") == call("count", prop("n", "name"), distinct=True)
    assert expr("toLower(a, 'b')") == call("tolower", a, lit("b"))
    assert expr("rand()") == call("rand")
    assert expr("date.Truncate('day', a)") == call("date.truncate", lit("day"), a)
    assert expr("datetime().epochseconds") == prop(call("datetime"), "epochseconds")
    assert expr("exists(n.prop)") == call("exists", prop("n", "prop"))


def test_case() -> None:
    assert expr("CASE WHEN a THEN 1 WHEN b THEN 2 ELSE 3 END") == Case(
        None, ((a, lit(1)), (b, lit(2))), lit(3), at=X
    )
    assert expr("case a.x when 1 then 'one' end") == Case(
        prop(a, "x"), ((lit(1), lit("one")),), None, at=X
    )


def test_list_comprehensions() -> None:
    source = ListExpr((lit(1), lit(2)), at=X)
    x = var("x")
    assert expr("[x IN [1, 2] WHERE x > 1 | x * 2]") == ListComprehension(
        "x", source, binary(">", x, lit(1)), binary("*", x, lit(2)), at=X
    )
    assert expr("[x IN [1, 2] WHERE x > 1]") == ListComprehension(
        "x", source, binary(">", x, lit(1)), None, at=X
    )
    assert expr("[x IN [1, 2] | x.name]") == ListComprehension(
        "x", source, None, prop(x, "name"), at=X
    )
    assert expr("[x IN [1, 2]]") == ListComprehension("x", source, None, None, at=X)
    assert expr("[x IN a + b | x]") == ListComprehension("x", binary("+", a, b), None, x, at=X)


def test_pattern_comprehensions() -> None:
    ab = path(node("a"), rel("out"), node("b"))
    assert expr("[(a)-->(b) | b.name]") == PatternComprehension(ab, None, prop(b, "name"), at=X)
    assert expr("[(a)-->(b) WHERE b.x | b]") == PatternComprehension(ab, prop(b, "x"), b, at=X)
    assert expr("[p = (a)-->(b) | p]") == PatternComprehension(
        path(node("a"), rel("out"), node("b"), variable="p"), None, var("p"), at=X
    )
    assert expr("size([(c)<-[:AdminTo]-(x) | x])") == call(
        "size",
        PatternComprehension(
            path(node("c"), rel("in", None, "AdminTo"), node("x")), None, var("x"), at=X
        ),
    )


def test_quantifiers() -> None:
    x = var("x")
    for kind in get_args(typing.Literal["any", "all", "none", "single"]):
        assert expr(f"{kind.upper()}(x IN a WHERE x > 1)") == Quantifier(
            kind, "x", a, binary(">", x, lit(1)), at=X
        )


def test_pattern_predicates() -> None:
    where = match("(a) WHERE NOT (a)-[:X]->(b) AND (a)-->()").where
    assert where == binary(
        "and",
        unary("not", PatternPredicate(path(node("a"), rel("out", None, "X"), node("b")), at=X)),
        PatternPredicate(path(node("a"), rel("out"), node()), at=X),
    )
    assert expr("exists((a)<-[:MemberOf*1..]-(:Group))") == PatternPredicate(
        path(node("a"), rel("in", None, "MemberOf", length=Length(1, None)), node(None, "Group")),
        at=X,
    )
    # a pattern needs a relationship: otherwise parentheses are parentheses
    assert match("(a) WHERE (a)").where == a
    assert match("(a) WHERE (a:User)").where == HasLabels(a, ("User",), at=X)
    assert expr("(a) - 1") == binary("-", a, lit(1))
    assert expr("(a)-1") == binary("-", a, lit(1))
    assert expr("(a) < -1") == binary("<", a, unary("-", lit(1)))


# --- patterns -------------------------------------------------------------------------------


def test_nodes() -> None:
    user = mapping(name=lit("X"), enabled=lit(True))
    assert pattern("(a:User:Group {name: 'X', enabled: true})") == path(
        node("a", "User", "Group", properties=user)
    )
    assert pattern("()") == path(node())
    assert pattern("(a)") == path(node("a"))
    assert pattern("(:User)") == path(node(None, "User"))
    assert pattern("(:User {name: 'X'})") == path(
        node(None, "User", properties=mapping(name=lit("X")))
    )
    assert pattern("({name: 'X'})") == path(node(properties=mapping(name=lit("X"))))
    assert pattern("(a $props)") == path(node("a", properties=Parameter("props", at=X)))
    assert pattern("(a:User $props)") == path(
        node("a", "User", properties=Parameter("props", at=X))
    )


@pytest.mark.parametrize(
    ("text", "relationship"),
    [
        ("-->", rel("out")),
        ("<--", rel("in")),
        ("--", rel("both")),
        ("<-->", rel("both")),
        ("-[]->", rel("out")),
        ("-[r]-", rel("both", "r")),
        ("<-[r]-", rel("in", "r")),
        ("<-[r]->", rel("both", "r")),
        ("-[:X]->", rel("out", None, "X")),
        ("-[r:MemberOf|AdminTo]->", rel("out", "r", "MemberOf", "AdminTo")),
        ("-[r:MemberOf|:AdminTo]->", rel("out", "r", "MemberOf", "AdminTo")),
        ("-[r {k: 1}]->", rel("out", "r", properties=mapping(k=lit(1)))),
        ("-[r $p]->", rel("out", "r", properties=Parameter("p", at=X))),
        (
            "-[r:MemberOf|AdminTo*1..3 {k: 1}]->",
            rel(
                "out",
                "r",
                "MemberOf",
                "AdminTo",
                properties=mapping(k=lit(1)),
                length=Length(1, 3),
            ),
        ),
        ("- [r] ->", rel("out", "r")),
        ("- - >", rel("out")),
        ("< - -", rel("in")),
    ],
)
def test_relationships(text: str, relationship: RelationshipPattern) -> None:
    assert pattern(f"(a){text}(b)") == path(node("a"), relationship, node("b"))


@pytest.mark.parametrize(
    ("text", "length"),
    [
        ("*", Length(1, None)),
        ("*2", Length(2, 2)),
        ("*..3", Length(1, 3)),
        ("*2..", Length(2, None)),
        ("*0..1", Length(0, 1)),
        ("*1..3", Length(1, 3)),
        ("*..", Length(1, None)),
        ("* 2 .. 5", Length(2, 5)),
    ],
)
def test_lengths(text: str, length: Length) -> None:
    assert pattern(f"()-[{text}]->()") == path(node(), rel("out", length=length), node())
    assert pattern(f"()-[:X{text}]->()") == path(
        node(), rel("out", None, "X", length=length), node()
    )


def test_paths() -> None:
    assert pattern("p = (a)-->(b)<-[:X]-(c)") == path(
        node("a"), rel("out"), node("b"), rel("in", None, "X"), node("c"), variable="p"
    )
    shortest = pattern("p = shortestPath((a)-[*]->(b))")
    assert shortest == path(
        node("a"), rel("out", length=Length(1, None)), node("b"), variable="p", shortest="one"
    )
    assert pattern("ALLSHORTESTPATHS((a)-[*]-(b))") == path(
        node("a"), rel("both", length=Length(1, None)), node("b"), shortest="all"
    )
    assert match("(a), (b)-->(c), p = (d)").patterns == (
        path(node("a")),
        path(node("b"), rel("out"), node("c")),
        path(node("d"), variable="p"),
    )


# --- clauses --------------------------------------------------------------------------------


def test_match_and_optional_match() -> None:
    assert parse("MATCH (n) OPTIONAL MATCH (n)-->(m) WHERE m.x RETURN n, m") == query(
        Match((path(node("n")),), None, at=X),
        Match((path(node("n"), rel("out"), node("m")),), prop("m", "x"), optional=True, at=X),
        returning(item(var("n"), "n"), item(var("m"), "m")),
    )


def test_unwind() -> None:
    assert parse("UNWIND [1, 2] AS x RETURN x") == query(
        Unwind(ListExpr((lit(1), lit(2)), at=X), "x", at=X), returning(item(var("x"), "x"))
    )


def test_with() -> None:
    parsed = parse(
        "MATCH (n) WITH DISTINCT n.x AS x, count(*) AS c ORDER BY c DESC, x SKIP 1 LIMIT 5 "
        "WHERE c > 1 WITH * RETURN x"
    )
    assert parsed.parts[0].clauses[1:] == (
        With(
            projection(
                item(prop("n", "x"), "x", aliased=True),
                item(CountStar(at=X), "c", aliased=True),
                distinct=True,
                order=(SortItem(var("c"), True), SortItem(var("x"), False)),
                skip=lit(1),
                limit=lit(5),
            ),
            binary(">", var("c"), lit(1)),
            at=X,
        ),
        With(projection(star=True), None, at=X),
        returning(item(var("x"), "x")),
    )


def test_return() -> None:
    parsed = parse("MATCH (n) RETURN *, n.x AS y ORDER BY y ASCENDING, n DESCENDING")
    assert parsed.parts[0].clauses[1] == returning(
        item(prop("n", "x"), "y", aliased=True),
        star=True,
        order=(SortItem(var("y"), False), SortItem(var("n"), True)),
    )
    assert parse("RETURN 1 ORDER BY 1 asc LIMIT $n").parts[0].clauses[0] == returning(
        item(lit(1), "1"), order=(SortItem(lit(1), False),), limit=Parameter("n", at=X)
    )


def test_column_names_are_written_as_the_query_writes_them() -> None:
    clause = (
        parse("RETURN n.name, count(n), a  +  b, `x y`, f( 1 ) AS z, [x IN l | x]")
        .parts[0]
        .clauses[0]
    )
    assert isinstance(clause, Return)
    assert [(i.name, i.aliased) for i in clause.projection.items] == [
        ("n.name", False),
        ("count(n)", False),
        ("a  +  b", False),
        ("`x y`", False),
        ("z", True),
        ("[x IN l | x]", False),
    ]


def test_union() -> None:
    parsed = parse("RETURN 1 AS x UNION ALL RETURN 2 AS x union RETURN 3 AS x;")
    assert parsed == Query(
        tuple(SingleQuery((returning(item(lit(n), "x", aliased=True)),)) for n in (1, 2, 3)),
        (True, False),
    )


def test_keywords_are_case_insensitive() -> None:
    lower = parse(
        "optional match (n:User) where n.x starts with 'a' and not n.y is null "
        "with distinct n order by n.x desc skip 1 limit 2 unwind [1] as k "
        "return n union all match p = allshortestpaths((a)-[*]->(b)) return p"
    )
    upper = parse(
        "OPTIONAL MATCH (n:User) WHERE n.x STARTS WITH 'a' AND NOT n.y IS NULL "
        "WITH DISTINCT n ORDER BY n.x DESC SKIP 1 LIMIT 2 UNWIND [1] AS k "
        "RETURN n UNION ALL MATCH p = allShortestPaths((a)-[*]->(b)) RETURN p"
    )
    assert lower == upper


def test_comments_and_whitespace() -> None:
    assert parse("MATCH (n) // the nodes\n/* every\none */ RETURN\tn ;") == parse(
        "MATCH (n) RETURN n"
    )


# --- positions ------------------------------------------------------------------------------


def test_positions() -> None:
    parsed = parse("MATCH (a:User)-[r]->(b)\nWHERE a.x = 1\n  RETURN b.name AS name")
    first, last = parsed.parts[0].clauses
    assert isinstance(first, Match)
    assert isinstance(last, Return)
    assert first.at == At(1, 1)
    (ab,) = first.patterns
    assert [element.at for element in ab.elements] == [At(1, 7), At(1, 15), At(1, 21)]
    assert first.where is not None
    assert first.where.at == At(2, 7)
    assert isinstance(first.where, Binary)
    assert first.where.right.at == At(2, 13)
    assert last.at == At(3, 3)
    assert last.projection.at == At(3, 10)
    assert last.projection.items[0].expression.at == At(3, 10)


def test_positions_of_nested_expressions() -> None:
    parsed = expr("f(1, [x IN $l WHERE NOT x | -x])")
    assert isinstance(parsed, FunctionCall)
    assert parsed.at == At(1, 8)
    one, comprehension = parsed.args
    assert one.at == At(1, 10)
    assert isinstance(comprehension, ListComprehension)
    assert comprehension.at == At(1, 13)
    assert comprehension.source.at == At(1, 19)
    assert comprehension.where is not None
    assert comprehension.where.at == At(1, 28)
    assert comprehension.projection is not None
    assert comprehension.projection.at == At(1, 36)
    assert pattern("p = shortestPath((a)-->(b))").at == At(1, 7)


# --- real-world queries ---------------------------------------------------------------------


def test_kerberoastable_users() -> None:
    assert parse(
        "MATCH (u:User {hasspn: true}) WHERE u.enabled = true AND NOT u.name ENDS WITH '$' "
        "RETURN u.name AS name ORDER BY name LIMIT 10"
    ) == query(
        Match(
            (path(node("u", "User", properties=mapping(hasspn=lit(True)))),),
            binary(
                "and",
                binary("=", prop("u", "enabled"), lit(True)),
                unary("not", binary("ends with", prop("u", "name"), lit("$"))),
            ),
            at=X,
        ),
        returning(
            item(prop("u", "name"), "name", aliased=True),
            order=(SortItem(var("name"), False),),
            limit=lit(10),
        ),
    )


def test_shortest_path_to_domain_admins() -> None:
    assert parse(
        "MATCH p = shortestPath((u:User)-[:MemberOf|AdminTo*1..]->(g:Group)) "
        "WHERE u.hasspn AND g.objectid =~ '(?i)S-1-5-.*-512' RETURN p"
    ) == query(
        Match(
            (
                path(
                    node("u", "User"),
                    rel("out", None, "MemberOf", "AdminTo", length=Length(1, None)),
                    node("g", "Group"),
                    variable="p",
                    shortest="one",
                ),
            ),
            binary(
                "and",
                prop("u", "hasspn"),
                binary("=~", prop("g", "objectid"), lit("(?i)S-1-5-.*-512")),
            ),
            at=X,
        ),
        returning(item(var("p"), "p")),
    )


def test_unconstrained_delegation_with_admin_counts() -> None:
    assert parse(
        "MATCH (c:Computer) WHERE c.unconstraineddelegation = true "
        "WITH c, size([(c)<-[:AdminTo]-(x) | x]) AS admins RETURN c.name, admins"
    ) == query(
        Match(
            (path(node("c", "Computer")),),
            binary("=", prop("c", "unconstraineddelegation"), lit(True)),
            at=X,
        ),
        With(
            projection(
                item(var("c"), "c"),
                item(
                    call(
                        "size",
                        PatternComprehension(
                            path(node("c"), rel("in", None, "AdminTo"), node("x")),
                            None,
                            var("x"),
                            at=X,
                        ),
                    ),
                    "admins",
                    aliased=True,
                ),
            ),
            None,
            at=X,
        ),
        returning(item(prop("c", "name"), "c.name"), item(var("admins"), "admins")),
    )


def test_stale_passwords() -> None:
    assert parse(
        "MATCH (n) WHERE n.pwdlastset < (datetime().epochseconds - (90 * 86400)) RETURN count(n)"
    ) == query(
        Match(
            (path(node("n")),),
            binary(
                "<",
                prop("n", "pwdlastset"),
                binary(
                    "-",
                    prop(call("datetime"), "epochseconds"),
                    binary("*", lit(90), lit(86400)),
                ),
            ),
            at=X,
        ),
        returning(item(call("count", var("n")), "count(n)")),
    )


def test_multi_line_query_with_everything() -> None:
    parsed = parse(
        """
        MATCH (g:Group)
        WHERE g.objectid ENDS WITH '-512'
        OPTIONAL MATCH (g)<-[:MemberOf*1..]-(m)
        WITH g, collect(DISTINCT m) AS members
        UNWIND members AS m
        RETURN g.name AS group,
               CASE WHEN m:User THEN 'user' ELSE 'other' END AS kind,
               any(x IN members WHERE x.enabled) AS anyEnabled
        ORDER BY group
        """
    )
    clauses = parsed.parts[0].clauses
    assert [type(clause) for clause in clauses] == [Match, Match, With, Unwind, Return]
    last = clauses[-1]
    assert isinstance(last, Return)
    assert [i.name for i in last.projection.items] == ["group", "kind", "anyEnabled"]
    assert last.projection.items[1].expression == Case(
        None, ((HasLabels(var("m"), ("User",), at=X), lit("user")),), lit("other"), at=X
    )


# --- refusals -------------------------------------------------------------------------------

CLAUSE = "a clause (MATCH, OPTIONAL MATCH, UNWIND, WITH, RETURN)"
INGEST = "(graphsvc's graph is written by ingest only)"


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_query(text: str) -> None:
    error = refusal(text)
    assert (error.code, error.message) == ("cypher_empty", "the query is empty")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("RETRN n", f"line 1:1 unexpected 'RETRN': expected {CLAUSE}"),
        ("RETURNS n", f"line 1:1 unexpected 'RETURNS': expected {CLAUSE}"),
        (
            "MATCH (n) RETURN n UNION\nRETRN n",
            f"line 2:1 unexpected 'RETRN': expected {CLAUSE} or ALL",
        ),
        ("MATCH (n)", "line 1:10 a query must end with RETURN"),
        ("MATCH (n) WHERE n.x = 1 ", "line 1:24 a query must end with RETURN"),
        ("MATCH (n) UNION RETURN 1", "line 1:11 a query must end with RETURN"),
        ("MATCH (n) RETURN n UNION MATCH (m)", "line 1:35 a query must end with RETURN"),
        (
            "MATCH (n) WHERE",
            "line 1:16 unexpected end of the query: expected an expression",
        ),
        ("RETURN 1 +", "line 1:11 unexpected end of the query: expected an expression"),
        ("RETURN n.", "line 1:10 unexpected end of the query: expected a name"),
        ("RETURN [1, 2", "line 1:13 unexpected end of the query: expected an operator, ',' or ']'"),
        ("MATCH (n) RETURN n ORDER n", "line 1:26 unexpected 'n': expected BY"),
        ("MATCH (n:) RETURN n", "line 1:10 unexpected ')': expected a name"),
        ("RETURN 1; RETURN 2", "line 1:11 unexpected 'RETURN': expected the end of the query"),
        (
            "RETURN ~1",
            "line 1:8 unexpected '~': expected an expression, '*' or DISTINCT",
        ),
        (
            "RETURN n#",
            "line 1:9 unexpected '#': expected an operator, ',', ';', AS, LIMIT, ORDER BY, "
            "SKIP, UNION or the end of the query",
        ),
        ("RETURN 'abc", """line 1:8 unexpected "'": the string never ends"""),
        ('RETURN "abc', "line 1:8 unexpected '\"': the string never ends"),
        (
            "MATCH (n)\nWHERE n.x = 'a\nRETURN n",
            """line 2:13 unexpected "'": the string never ends""",
        ),
        ("RETURN `abc", "line 1:8 unexpected '`': the quoted name never ends"),
        (r"RETURN 'a\qb'", r"line 1:10 unknown escape \q in a string"),
        (r"RETURN 'a\u12'", r"line 1:10 unknown escape \u in a string"),
        (
            r"RETURN '\uD83D'",
            r"line 1:8 the string has half of a surrogate pair (\uD800-\uDFFF)",
        ),
        ("RETURN 9223372036854775808", "line 1:8 the integer 9223372036854775808 is too large"),
        (
            "RETURN -9223372036854775809",
            "line 1:9 the integer 9223372036854775809 is too large",
        ),
        ("RETURN 0x8000000000000000", "line 1:8 the integer 0x8000000000000000 is too large"),
        (
            "RETURN 1" + "0" * 5000,
            "line 1:8 the integer 1000000000000000000000000000000000000... is too large",
        ),
        ("RETURN 1e400", "line 1:8 the number 1e400 is too large"),
        (
            "RETURN ()",
            "line 1:8 a node pattern is not an expression: as a predicate, a pattern needs a "
            "relationship, as in (a)-->()",
        ),
        (
            "MATCH (a.b) RETURN a",
            "line 1:7 expected a node pattern: (variable:Label {key: value}), each part optional",
        ),
        ("RETURN any(x IN [1])", "line 1:8 any() needs WHERE: any(x IN list WHERE predicate)"),
        (
            "RETURN foo(x IN [1] WHERE x)",
            "line 1:8 foo(... WHERE ...) is not a quantifier: any, all, none or single",
        ),
        ("RETURN all(1 WHERE x)", "line 1:12 expected `variable IN list` in all()"),
        ("RETURN f(*)", "line 1:8 only count takes *, not f"),
        ("RETURN count(DISTINCT)", "line 1:8 count(DISTINCT) needs an argument"),
        ("RETURN (1)(2)", "line 1:9 expected a function's name before '('"),
        ("RETURN [x + 1 | x]", "line 1:9 expected `variable IN list` in a list comprehension"),
        (
            "RETURN [(a)-->(b) WHERE a.x]",
            "line 1:8 a pattern comprehension needs a projection: [(a)-->(b) | b]",
        ),
        (
            "MATCH (a)-[*1.5]->(b) RETURN a",
            "line 1:13 expected an integer in a relationship's length, not 1.5",
        ),
    ],
)
def test_syntax_errors(text: str, message: str) -> None:
    error = refusal(text)
    assert (error.code, error.message) == ("cypher_syntax", message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("CREATE (n)", "line 1:1 updating clauses are not supported: CREATE"),
        ("create (n:User {name: 'x'})", "line 1:1 updating clauses are not supported: CREATE"),
        ("MERGE (n)", "line 1:1 updating clauses are not supported: MERGE"),
        ("MATCH (n) SET n.x = 1", "line 1:11 updating clauses are not supported: SET"),
        ("MATCH (n) WHERE n.x DELETE n", "line 1:21 updating clauses are not supported: DELETE"),
        (
            "MATCH (n) detach  delete n",
            "line 1:11 updating clauses are not supported: DETACH DELETE",
        ),
        ("MATCH (n) REMOVE n:User", "line 1:11 updating clauses are not supported: REMOVE"),
        ("FOREACH (x IN [1] | CREATE ())", "line 1:1 updating clauses are not supported: FOREACH"),
        (
            "LOAD CSV FROM 'file:///x' AS row RETURN row",
            "line 1:1 updating clauses are not supported: LOAD CSV",
        ),
        ("WITH 1 AS x\nCREATE (n", "line 2:1 updating clauses are not supported: CREATE"),
        ("MATCH (n) RETURN n CREATE (m)", "line 1:20 updating clauses are not supported: CREATE"),
        ("RETURN 1 UNION CREATE ()", "line 1:16 updating clauses are not supported: CREATE"),
        (
            "MATCH (a)-->(b) MERGE (a)-[:X]->(b) RETURN a",
            "line 1:17 updating clauses are not supported: MERGE",
        ),
    ],
)
def test_updating_clauses(text: str, message: str) -> None:
    error = refusal(text)
    assert (error.code, error.message) == ("cypher_updating", f"{message} {INGEST}")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("CALL db.labels()", "line 1:1 procedure calls are not supported: CALL db.labels"),
        (
            "call apoc.meta.stats() YIELD labels RETURN labels",
            "line 1:1 procedure calls are not supported: CALL apoc.meta.stats",
        ),
        (
            "MATCH (n) CALL { WITH n RETURN n AS m } RETURN m",
            "line 1:11 procedure calls are not supported: CALL",
        ),
    ],
)
def test_procedure_calls(text: str, message: str) -> None:
    error = refusal(text)
    assert (error.code, error.message) == ("cypher_procedure", message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("MATCH (n) WHERE EXISTS { (n)-->() } RETURN n", "line 1:17 EXISTS { } is not supported"),
        (
            "MATCH (n) WHERE (exists {MATCH (n)-->()}) RETURN n",
            "line 1:18 EXISTS { } is not supported",
        ),
        ("MATCH (n) RETURN count { (n)-->() }", "line 1:18 COUNT { } is not supported"),
        ("MATCH (n) RETURN COLLECT { RETURN 1 }", "line 1:18 COLLECT { } is not supported"),
        ("RETURN reduce(s = 0, x IN [1, 2] | s + x)", "line 1:8 reduce(...) is not supported"),
        ("RETURN REDUCE(x)", "line 1:8 reduce(...) is not supported"),
        ("MATCH (n) RETURN n{.name, .x}", "line 1:18 map projection is not supported"),
        ("MATCH (n) RETURN n {.*}", "line 1:18 map projection is not supported"),
        ("MATCH (n) WITH (n {.name}) AS m RETURN m", "line 1:17 map projection is not supported"),
        ("USE neo4j MATCH (n) RETURN n", "line 1:1 USE is not supported"),
        ("EXPLAIN MATCH (n) RETURN n", "line 1:1 EXPLAIN is not supported"),
        ("profile RETURN 1", "line 1:1 PROFILE is not supported"),
    ],
)
def test_unsupported_constructs(text: str, message: str) -> None:
    error = refusal(text)
    assert (error.code, error.message) == ("cypher_unsupported", message)


@pytest.mark.parametrize(
    "text",
    [
        "RETURN " + "(" * 3000 + "1" + ")" * 3000,
        "RETURN " + "[" * 3000 + "]" * 3000,
        "RETURN " + "- " * 3000 + "1",
        "RETURN " + " + ".join(["1"] * 3000),
    ],
)
def test_deep_nesting_is_refused(text: str) -> None:
    error = refusal(text)
    assert (error.code, error.message) == (
        "cypher_unsupported",
        "line 1:1 the query nests too deeply",
    )


def test_long_flat_queries_parse() -> None:
    items = expr("[" + ", ".join(str(n) for n in range(5000)) + "]")
    assert isinstance(items, ListExpr)
    assert len(items.items) == 5000
    ors = match("(n) WHERE " + " OR ".join(f"n.id = {n}" for n in range(200))).where
    assert isinstance(ors, Binary)
    assert ors.op == "or"


# --- properties -----------------------------------------------------------------------------


def _quote(text: str) -> str:
    """A Cypher string literal of `text`, escaping all but printable ASCII."""
    out = []
    for char in text:
        if char in "\\'":
            out.append("\\" + char)
        elif " " <= char <= "~":
            out.append(char)
        else:
            units = char.encode("utf-16-be")
            out += (f"\\u{units[i] << 8 | units[i + 1]:04x}" for i in range(0, len(units), 2))
    return "'" + "".join(out) + "'"


def _written(tree: Expr) -> str:
    """`tree` as Cypher, every operation in parentheses."""
    match tree:
        case Literal(value=None):
            return "null"
        case Literal(value=bool() as value):
            return "true" if value else "false"
        case Literal(value=str() as value):
            return _quote(value)
        case Literal(value=value):
            return repr(value)
        case Binary(op=op, left=left, right=right):
            return f"({_written(left)} {op.upper()} {_written(right)})"
        case Unary(op=op, operand=operand):
            return f"({op.upper()} {_written(operand)})"
        case IsNull(operand=operand, negated=negated):
            return f"({_written(operand)} IS {'NOT ' if negated else ''}NULL)"
    raise AssertionError(tree)


_literals = st.one_of(
    st.integers(0, 2**63 - 1),
    st.floats(min_value=0, allow_infinity=False).map(abs),  # abs: no -0.0
    st.text(st.characters(codec="utf-8"), max_size=6),
    st.sampled_from([True, False, None]),
).map(lit)


def _operations(operands: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    return st.one_of(
        st.builds(binary, st.sampled_from(get_args(BinaryOp)), operands, operands),
        st.builds(unary, st.sampled_from(["not", "-", "+"]), operands),
        st.builds(lambda operand, negated: IsNull(operand, negated, at=X), operands, st.booleans()),
    )


@settings(max_examples=300, deadline=None)
@given(st.recursive(_literals, _operations, max_leaves=12))
def test_written_expressions_parse_back(tree: Expr) -> None:
    assert expr(_written(tree)) == tree


_PIECES = [
    *("MATCH", "OPTIONAL", "WHERE", "RETURN", "WITH", "UNWIND", "AS", "UNION", "ALL", "ORDER"),
    *("BY", "LIMIT", "DISTINCT", "CASE", "WHEN", "THEN", "END", "IN", "NOT", "AND", "IS", "NULL"),
    *("CREATE", "CALL", "exists", "count", "reduce", "shortestPath", "n", "x", "`q`", "$p"),
    *("(", ")", "[", "]", "{", "}", ":", ",", ".", "..", "*", "|", "=", "<", ">", "-", "+"),
    *("-->", "<-", "'s'", '"t', "1", "0x", "1e", ";", "//", "/*", "\\", "#", "\n"),
]


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.lists(st.sampled_from(_PIECES), max_size=20).map(" ".join),
        st.lists(st.sampled_from(_PIECES), max_size=20).map("".join),
        st.text(max_size=30),
    )
)
def test_any_text_parses_or_is_refused(text: str) -> None:
    try:
        parse(text)
    except ApiError as error:
        assert error.code in (
            "cypher_empty",
            "cypher_syntax",
            "cypher_updating",
            "cypher_procedure",
            "cypher_unsupported",
        )
        assert error.message == "the query is empty" or error.message.startswith("line ")


def test_the_tree_of_a_short_text_is_kept_and_a_long_one_parsed_again() -> None:
    short = "MATCH (n:User) RETURN count(n)"
    assert parse(short) is parse(short)
    long = "MATCH (n:User) WHERE n.name IN [" + ", ".join(["'x'"] * 1500) + "] RETURN n"
    assert len(long) > 4096
    assert parse(long) == parse(long) and parse(long) is not parse(long)


# --- the parse tables, made ahead (cypher/grammar.tables) -----------------------------------

TABLE_QUERIES = [
    "MATCH (n:Computer) RETURN count(n)",
    "MATCH p = shortestPath((u:User {name: 'DFM@TESTLAB.LOCAL'})-[:MemberOf|AdminTo*1..]->(g))"
    " WHERE g.objectid ENDS WITH '-512' RETURN p LIMIT 5",
    "MATCH (u:User) WHERE u.hasspn = true AND NOT u.name =~ '(?i)krbtgt.*'"
    " WITH u ORDER BY u.name DESC SKIP 1 LIMIT 3 RETURN u.name AS name, [x IN range(1, 3) | x * 2]",
    "MATCH (c:Computer) OPTIONAL MATCH (c)<-[r:AdminTo]-(p) RETURN c, collect(DISTINCT p)[0..2],"
    " CASE WHEN r IS NULL THEN 'none' ELSE type(r) END, {a: 1, b: [true, null, 1.5e3]}",
    "UNWIND $ids AS id MATCH (n {objectid: id}) RETURN n.name UNION ALL RETURN 'x' AS name",
]
TABLE_REFUSALS = [
    "MATCH (n) RETRN n",
    "MATCH (n) SET n.x = 1",
    "MATCH (n RETURN n",
    "CALL db.labels()",
]


def test_the_parser_is_loaded_from_tables_made_for_its_grammar(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Making lark's LALR tables was 0.15 s of each `graphsvc query`'s CPU; they are made
    ahead into grammar.tables, which must follow grammar.lark."""
    folder = resources.files(cypher_parse.__package__)
    grammar = folder.joinpath("grammar.lark").read_text("utf-8")
    kept = marshal.loads(folder.joinpath(cypher_parse.TABLES_FILE).read_bytes())  # noqa: S302
    digest, _, made_with = kept["key"].partition(" ")
    assert digest == hashlib.sha256(grammar.encode()).hexdigest(), (
        "grammar.tables was made from another grammar: python -m graphsvc.cypher.parse"
    )
    if kept["key"] != cypher_parse._tables_key(grammar):
        pytest.skip(f"grammar.tables made with {made_with}; installed: lark {lark.__version__}")

    def made_again(grammar: str) -> Lark:
        raise AssertionError("the parser was made from the grammar, not loaded")

    monkeypatch.setattr(cypher_parse, "_make_parser", made_again)
    cypher_parse._parser.cache_clear()
    try:
        loaded = cypher_parse._parser()
    finally:
        cypher_parse._parser.cache_clear()
    monkeypatch.undo()
    made = cypher_parse._make_parser(grammar)
    for query in TABLE_QUERIES:
        assert loaded.parse(query) == made.parse(query), query
    for query in TABLE_REFUSALS:
        with pytest.raises(UnexpectedInput) as from_tables:
            loaded.parse(query)
        with pytest.raises(UnexpectedInput) as from_grammar:
            made.parse(query)
        found, expected = from_tables.value, from_grammar.value  # the same, but for order
        assert type(found) is type(expected), query
        assert (found.line, found.column) == (expected.line, expected.column), query
        assert sorted(getattr(found, "expected", [])) == sorted(getattr(expected, "expected", []))


def test_tables_of_another_grammar_are_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A grammar changed without making the tables again still parses as it says."""
    monkeypatch.setattr(cypher_parse, "_tables_key", lambda grammar: "another grammar's")
    cypher_parse._parser.cache_clear()
    try:
        assert parse("MATCH (n) RETURN n") == cypher_parse._Builder("MATCH (n) RETURN n").transform(
            cypher_parse._make_parser(
                resources.files(cypher_parse.__package__).joinpath("grammar.lark").read_text()
            ).parse("MATCH (n) RETURN n")
        )
    finally:
        cypher_parse._parser.cache_clear()
