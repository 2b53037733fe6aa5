"""The errors of a query, each a 400 (or 413 for a cap) that names where in the query it
arose, as `line L:C what` (the reference's form, 1-based)."""

from __future__ import annotations

from graphsvc.cypher.syntax import At
from graphsvc.errors import ApiError


def query_error(at: At | None, message: str, code: str, status: int = 400) -> ApiError:
    where = f"line {at.line}:{at.column} " if at is not None else ""
    return ApiError(status, f"{where}{message}", "cypher", code=code)


def semantic_error(at: At | None, message: str) -> ApiError:
    """A query that parses but cannot run: an unknown variable, function or label use."""
    return query_error(at, message, "cypher_semantic")


def type_error(at: At | None, message: str) -> ApiError:
    """A value of the wrong type met while the query runs."""
    return query_error(at, message, "cypher_type")
