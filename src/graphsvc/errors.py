"""The one error type: every expected failure carries its HTTP status, where it arose
(`context`) and a short machine code that metrics, the audit log and the request lines use."""

from __future__ import annotations

# The code of an error raised without one of its own: one per status.
STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    409: "conflict",
    413: "body_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
    500: "internal",
    503: "unavailable",
}


class ApiError(Exception):
    """Rendered by the app as the spec's error body (which has no place for the code); the CLI
    prints `context: message`."""

    def __init__(
        self,
        status: int,
        message: str,
        context: str,
        headers: dict[str, str] | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.context = context
        self.headers = headers or {}
        self.code = code or STATUS_CODES.get(status, "error")


def bad_request(message: str, context: str) -> ApiError:
    return ApiError(400, message, context)


def unauthorized(message: str, code: str) -> ApiError:
    """A refused credential; `code` says which check refused it (a metric's label)."""
    return ApiError(401, message, "auth", code=code)


def forbidden(message: str, code: str) -> ApiError:
    return ApiError(403, message, "auth", code=code)


def not_found(message: str, context: str) -> ApiError:
    return ApiError(404, message, context)


def conflict(message: str, context: str) -> ApiError:
    return ApiError(409, message, context)
