"""The errors of a query, each a 400 (or 413 for a cap) that names where in the query it
arose, as `line L:C what` (the reference's form, 1-based)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

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


@contextlib.contextmanager
def evaluation_errors() -> Iterator[None]:
    """What Python raises for a value the query computed (a power too large for a float, a
    regular expression that does not compile, a list nested too deep to walk), as the 400
    it is: the query asked for it."""
    try:
        yield
    except (ArithmeticError, ValueError, TypeError, re.error, RecursionError) as exc:
        message = str(exc) or type(exc).__name__
        raise query_error(
            None, f"the query could not be evaluated: {message}", "cypher_value"
        ) from None
