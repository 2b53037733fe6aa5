"""A query run to its end on one graph: parsed text in, the columns and rows out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphsvc.cypher import syntax
from graphsvc.cypher.errors import evaluation_errors
from graphsvc.cypher.plan import plan_query
from graphsvc.cypher.runtime import Run


@dataclass
class Result:
    columns: list[str]
    rows: list[list[Any]]


def execute(query: syntax.Query, run: Run) -> Result:
    plan = plan_query(query, run)
    rows: list[list[Any]] = []
    with evaluation_errors():
        for values in plan.rows():
            rows.append(values)
            if len(rows) > run.caps.rows:
                raise run.too_many_rows()
    return Result(plan.columns, rows)


def explain(query: syntax.Query, run: Run) -> str:
    return plan_query(query, run).explain()
