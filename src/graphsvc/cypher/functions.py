"""Cypher's scalar functions (the aggregating ones are the projection's: cypher/plan.py).

Each takes its arguments' compiled closures and gives the call's; a null argument gives
null, as Cypher's functions do, except where a function says otherwise (coalesce).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from graphsvc.cypher.errors import semantic_error, type_error
from graphsvc.cypher.syntax import At
from graphsvc.cypher.values import DateTime, Duration, Node, Path, Rel, is_number, type_name

if TYPE_CHECKING:
    from graphsvc.cypher.runtime import Run

Compiled = Callable[[dict[str, Any]], Any]


def call(name: str, args: list[Compiled], at: At, run: Run) -> Compiled:
    if name == "coalesce":
        if not args:
            raise semantic_error(at, "coalesce() needs at least one argument")

        def first_not_null(row: dict[str, Any]) -> Any:
            for arg in args:
                value = arg(row)
                if value is not None:
                    return value
            return None

        return first_not_null
    if name in NOW_FUNCTIONS:
        return NOW_FUNCTIONS[name](args, at, run)
    found = SCALARS.get(name)
    if found is None:
        raise semantic_error(at, f"unknown function {name}() (docs/cypher.md lists them)")
    function, arities = found
    if len(args) not in arities:
        expected = " or ".join(str(n) for n in sorted(arities))
        raise semantic_error(at, f"{name}() takes {expected} argument(s), got {len(args)}")

    def apply(row: dict[str, Any]) -> Any:
        values = [arg(row) for arg in args]
        if None in values and name not in NULL_TAKING:  # a null argument: a null answer
            return None
        return function(run, at, *values)

    return apply


def expect(value: Any, kind: type | tuple[type, ...], name: str, at: At) -> None:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float)):
        raise type_error(at, f"{name}() got a {type_name(value)}")


def size(run: Run, at: At, value: Any) -> int:
    if isinstance(value, str | list | dict):
        return len(value)
    if isinstance(value, Path):
        return len(value.rels)
    raise type_error(at, f"size() needs a list or a string, got {type_name(value)}")


def length(run: Run, at: At, value: Any) -> int:
    if isinstance(value, Path):
        return len(value.rels)
    return size(run, at, value)


def to_string(run: Run, at: At, value: Any) -> str:
    from graphsvc.cypher.expressions import stringify

    if isinstance(value, str | int | float | bool):
        return stringify(value)
    if isinstance(value, DateTime):
        return format_datetime(value)
    if isinstance(value, Duration):
        return f"PT{value.seconds:g}S"
    raise type_error(at, f"toString() cannot convert a {type_name(value)}")


def to_integer(run: Run, at: At, value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else int(value)
    if isinstance(value, str):
        try:
            return int(float(value)) if re.search(r"[.eE]", value) else int(value.strip())
        except ValueError:
            return None
    raise type_error(at, f"toInteger() cannot convert a {type_name(value)}")


def to_float(run: Run, at: At, value: Any) -> float | None:
    if is_number(value):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    raise type_error(at, f"toFloat() cannot convert a {type_name(value)}")


def to_boolean(run: Run, at: At, value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return {"true": True, "false": False}.get(value.strip().lower())
    if isinstance(value, int):
        return value != 0
    raise type_error(at, f"toBoolean() cannot convert a {type_name(value)}")


def labels(run: Run, at: At, value: Any) -> list[str]:
    expect(value, Node, "labels", at)
    return list(run.graph.nodes.labels(value.id))


def rel_type(run: Run, at: At, value: Any) -> str:
    expect(value, Rel, "type", at)
    return str(run.graph.kind_names[value.kind])


def identity(run: Run, at: At, value: Any) -> int:
    """A node's id is the store's; a relationship has none of its own in the store's index,
    so its id is made from its ends and kind (stable while the graph is unchanged)."""
    if isinstance(value, Node):
        return value.id
    if isinstance(value, Rel):
        return hash((value.start, value.kind, value.end)) & ((1 << 62) - 1)
    raise type_error(at, f"id() needs a node or a relationship, got {type_name(value)}")


def nodes_of(run: Run, at: At, value: Any) -> list[Node]:
    expect(value, Path, "nodes", at)
    return [Node(n) for n in value.nodes]


def relationships_of(run: Run, at: At, value: Any) -> list[Rel]:
    expect(value, Path, "relationships", at)
    return list(value.rels)


def start_node(run: Run, at: At, value: Any) -> Node:
    expect(value, Rel, "startNode", at)
    return Node(value.start)


def end_node(run: Run, at: At, value: Any) -> Node:
    expect(value, Rel, "endNode", at)
    return Node(value.end)


def keys(run: Run, at: At, value: Any) -> list[str]:
    return sorted(properties(run, at, value))


def properties(run: Run, at: At, value: Any) -> dict[str, Any]:
    if isinstance(value, Node):
        return dict(run.graph.nodes.properties(value.id))
    if isinstance(value, Rel):
        return dict(run.graph.rel_properties(value.start, value.kind, value.end))
    if isinstance(value, dict):
        return value
    raise type_error(
        at, f"properties() needs a node, a relationship or a map, got {type_name(value)}"
    )


def split(run: Run, at: At, value: Any, separator: Any) -> list[str] | None:
    if separator is None:
        return None
    expect(value, str, "split", at)
    expect(separator, str, "split", at)
    return run.built(value.split(separator) if separator else list(value))


def substring(run: Run, at: At, value: Any, start: Any, count: Any = None) -> str:
    expect(value, str, "substring", at)
    expect(start, int, "substring", at)
    return str(value[start:] if count is None else value[start : start + count])


def replace_text(run: Run, at: At, value: Any, old: Any, new: Any) -> str | None:
    if old is None or new is None:
        return None
    expect(value, str, "replace", at)
    return run.built(str(value).replace(old, new))


def head(run: Run, at: At, value: Any) -> Any:
    expect(value, list, "head", at)
    return value[0] if value else None


def last(run: Run, at: At, value: Any) -> Any:
    expect(value, list, "last", at)
    return value[-1] if value else None


def tail(run: Run, at: At, value: Any) -> list[Any]:
    expect(value, list, "tail", at)
    return run.built(list(value[1:]))


def reverse(run: Run, at: At, value: Any) -> Any:
    if isinstance(value, str | list):
        return run.built(value[::-1])
    raise type_error(at, f"reverse() needs a list or a string, got {type_name(value)}")


def number_range(run: Run, at: At, start: Any, end: Any, step: Any = 1) -> list[int]:
    for value in (start, end, step):
        expect(value, int, "range", at)
    if step == 0:
        raise type_error(at, "range() needs a step other than 0")
    if abs((end - start) // step) > run.caps.rows:
        raise run.too_many_rows()
    run.heavy(abs((end - start) // step))
    return run.built(list(range(start, end + (1 if step > 0 else -1), step)))


def numeric(name: str, function: Callable[[float], Any]) -> Callable[..., Any]:
    def apply(run: Run, at: At, value: Any) -> Any:
        if not is_number(value):
            raise type_error(at, f"{name}() needs a number, got {type_name(value)}")
        return function(value)

    return apply


def rounded(run: Run, at: At, value: Any, precision: Any = 0) -> float:
    if not is_number(value):
        raise type_error(at, f"round() needs a number, got {type_name(value)}")
    # Cypher rounds half away from zero; Python's round() rounds half to even.
    scale = 10 ** int(precision or 0)
    return float(math.copysign(math.floor(abs(value) * scale + 0.5), value) / scale)


def text_function(name: str, function: Callable[[str], Any]) -> Callable[..., Any]:
    def apply(run: Run, at: At, value: Any) -> Any:
        expect(value, str, name, at)
        return function(value)

    return apply


def exists(run: Run, at: At, value: Any) -> bool:
    return value is not None


SCALARS: dict[str, tuple[Callable[..., Any], frozenset[int]]] = {
    "size": (size, frozenset({1})),
    "length": (length, frozenset({1})),
    "tostring": (to_string, frozenset({1})),
    "tointeger": (to_integer, frozenset({1})),
    "tofloat": (to_float, frozenset({1})),
    "toboolean": (to_boolean, frozenset({1})),
    "tolower": (text_function("toLower", str.lower), frozenset({1})),
    "toupper": (text_function("toUpper", str.upper), frozenset({1})),
    "trim": (text_function("trim", str.strip), frozenset({1})),
    "ltrim": (text_function("lTrim", str.lstrip), frozenset({1})),
    "rtrim": (text_function("rTrim", str.rstrip), frozenset({1})),
    "split": (split, frozenset({2})),
    "substring": (substring, frozenset({2, 3})),
    "replace": (replace_text, frozenset({3})),
    "left": (lambda run, at, v, n: substring(run, at, v, 0, n), frozenset({2})),
    "right": (lambda run, at, v, n: v[len(v) - n :] if n else "", frozenset({2})),
    "head": (head, frozenset({1})),
    "last": (last, frozenset({1})),
    "tail": (tail, frozenset({1})),
    "reverse": (reverse, frozenset({1})),
    "range": (number_range, frozenset({2, 3})),
    "labels": (labels, frozenset({1})),
    "type": (rel_type, frozenset({1})),
    "id": (identity, frozenset({1})),
    "nodes": (nodes_of, frozenset({1})),
    "relationships": (relationships_of, frozenset({1})),
    "startnode": (start_node, frozenset({1})),
    "endnode": (end_node, frozenset({1})),
    "keys": (keys, frozenset({1})),
    "properties": (properties, frozenset({1})),
    "exists": (exists, frozenset({1})),
    "abs": (numeric("abs", abs), frozenset({1})),
    "ceil": (numeric("ceil", lambda v: float(math.ceil(v))), frozenset({1})),
    "floor": (numeric("floor", lambda v: float(math.floor(v))), frozenset({1})),
    "sqrt": (numeric("sqrt", lambda v: math.sqrt(v) if v >= 0 else math.nan), frozenset({1})),
    "sign": (numeric("sign", lambda v: (v > 0) - (v < 0)), frozenset({1})),
    "round": (rounded, frozenset({1, 2})),
    "tofloatornull": (
        lambda run, at, v: to_float(run, at, v) if is_number(v) or isinstance(v, str) else None,
        frozenset({1}),
    ),
}
NULL_TAKING = frozenset({"exists"})


# --- time -----------------------------------------------------------------------------------

DURATION = re.compile(
    r"P(?:(?P<years>[\d.]+)Y)?(?:(?P<months>[\d.]+)M)?(?:(?P<weeks>[\d.]+)W)?(?:(?P<days>[\d.]+)D)?"
    r"(?:T(?:(?P<hours>[\d.]+)H)?(?:(?P<minutes>[\d.]+)M)?(?:(?P<seconds>[\d.]+)S)?)?",
    re.IGNORECASE,
)
# A month and a year as the reference's engines average them when adding to an instant.
UNIT_SECONDS = {
    "years": 365.2425 * 86400, "months": 30.436875 * 86400, "weeks": 7 * 86400,
    "days": 86400, "hours": 3600, "minutes": 60, "seconds": 1,
    "milliseconds": 0.001, "microseconds": 1e-6, "nanoseconds": 1e-9,
}  # fmt: skip


def parse_datetime(text: str, at: At) -> DateTime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise type_error(
            at, f"datetime() cannot read {text!r}: write it as 2024-01-31T12:00:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return DateTime(moment.timestamp())


def format_datetime(value: DateTime) -> str:
    moment = datetime.fromtimestamp(value.epoch, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def datetime_function(args: list[Compiled], at: At, run: Run) -> Compiled:
    if len(args) > 1:
        raise semantic_error(at, "datetime() takes 0 or 1 argument")
    now = DateTime(run.started)

    def make(row: dict[str, Any]) -> Any:
        if not args:
            return now
        value = args[0](row)
        if value is None:
            return None
        if isinstance(value, str):
            return parse_datetime(value, at)
        if isinstance(value, dict):
            lowered = {k.lower(): v for k, v in value.items()}
            if "epochseconds" in lowered:
                return DateTime(float(lowered["epochseconds"]))
            if "epochmillis" in lowered:
                return DateTime(float(lowered["epochmillis"]) / 1000)
        raise type_error(at, f"datetime() cannot make an instant of a {type_name(value)}")

    return make


def duration_function(args: list[Compiled], at: At, run: Run) -> Compiled:
    if len(args) != 1:
        raise semantic_error(at, "duration() takes 1 argument")

    def make(row: dict[str, Any]) -> Any:
        value = args[0](row)
        if value is None:
            return None
        if isinstance(value, str):
            found = DURATION.fullmatch(value.strip())
            if found is None or not any(found.groupdict().values()):
                raise type_error(at, f"duration() cannot read {value!r}: write it as P90D or PT12H")
            parts = {k: float(v) for k, v in found.groupdict().items() if v}
            return Duration(sum(UNIT_SECONDS[k] * v for k, v in parts.items()))
        if isinstance(value, dict):
            total = 0.0
            for key, amount in value.items():
                unit = key.lower()
                if unit not in UNIT_SECONDS or not is_number(amount):
                    raise type_error(at, f"duration() does not know the unit {key!r}")
                total += UNIT_SECONDS[unit] * amount
            return Duration(total)
        raise type_error(at, f"duration() cannot make a duration of a {type_name(value)}")

    return make


def timestamp_function(args: list[Compiled], at: At, run: Run) -> Compiled:
    if args:
        raise semantic_error(at, "timestamp() takes no argument")
    millis = int(run.started * 1000)
    return lambda row: millis


NOW_FUNCTIONS: dict[str, Callable[[list[Compiled], At, Run], Compiled]] = {
    "datetime": datetime_function,
    "duration": duration_function,
    "timestamp": timestamp_function,
}


def datetime_field(value: DateTime, key: str, at: At) -> Any:
    moment = datetime.fromtimestamp(value.epoch, UTC)
    lowered = key.lower()
    if lowered == "epochseconds":
        return math.floor(value.epoch)
    if lowered == "epochmillis":
        return math.floor(value.epoch * 1000)
    if lowered in ("year", "month", "day", "hour", "minute", "second"):
        return getattr(moment, lowered)
    raise type_error(at, f"a DATETIME has no field `{key}`")


def duration_field(value: Duration, key: str, at: At) -> Any:
    lowered = key.lower()
    if lowered in ("seconds", "days", "hours", "minutes", "milliseconds"):
        return int(value.seconds // UNIT_SECONDS[lowered])
    raise type_error(at, f"a DURATION has no field `{key}`")
