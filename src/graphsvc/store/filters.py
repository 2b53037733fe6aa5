"""The reference's list filters (`column=op:value`): the operators, each filterable column's
SQL, type and the operators it takes, and the conditions they become.

Several filters are ANDed (the same column twice too); `eq:null` and `neq:null` test for
NULL on a column that can hold one; `~eq:` is a case-insensitive substring match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from graphsvc.store.db import Dialect
from graphsvc.store.dialect import like_pattern

Operator = Literal["eq", "neq", "gt", "gte", "lt", "lte", "~eq"]
OPERATORS: tuple[Operator, ...] = ("eq", "neq", "gt", "gte", "lt", "lte", "~eq")
EQUALITY: tuple[Operator, ...] = ("eq", "neq")
RANGE: tuple[Operator, ...] = ("eq", "neq", "gt", "gte", "lt", "lte")
COMPARISONS = {"eq": "=", "neq": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}

ValueKind = Literal["text", "uuid", "int", "time"]


@dataclass(frozen=True)
class FilterColumn:
    sql: str  # the expression compared
    kind: ValueKind
    operators: tuple[Operator, ...]
    nullable: bool = False
    bits: int = 64  # of an integer column: larger values are refused, not sent to the store


@dataclass(frozen=True)
class Filter:
    column: str  # as the API names it
    operator: Operator
    value: Any  # of the column's kind; None for `null`


# What upper-cases text as Python does on each store: SQLite's own upper() changes ASCII
# letters only, so `~eq:ñ` found no "ñ" there (sqlite.py registers unicode_upper).
UNICODE_UPPER = {"sqlite": "unicode_upper", "postgresql": "upper"}


def filter_conditions(
    dialect: Dialect,
    filters: Sequence[Filter],
    columns: dict[str, FilterColumn],
    args: list[Any],
) -> list[str]:
    """One SQL condition a filter, its values appended to `args` (numbered after what is
    there already)."""
    conditions = []
    for f in filters:
        column = columns[f.column]
        if f.value is None:
            conditions.append(f"{column.sql} IS {'NOT ' if f.operator == 'neq' else ''}NULL")
            continue
        if f.operator == "~eq":
            # Upper-cased on both sides: the same case-insensitive match on both stores.
            args.append("%" + like_pattern(str(f.value).upper()) + "%")
            upper = UNICODE_UPPER[dialect]
            conditions.append(f"{upper}({column.sql}) LIKE ${len(args)} ESCAPE '\\'")
        else:
            args.append(f.value)
            conditions.append(f"{column.sql} {COMPARISONS[f.operator]} ${len(args)}")
    return conditions
