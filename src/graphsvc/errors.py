"""The one error type: every expected failure carries its HTTP status and where it arose."""

from __future__ import annotations


class ApiError(Exception):
    """Rendered by the app as the spec's error body; the CLI prints `context: message`."""

    def __init__(
        self, status: int, message: str, context: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.context = context
        self.headers = headers or {}


def bad_request(message: str, context: str) -> ApiError:
    return ApiError(400, message, context)


def unauthorized(message: str) -> ApiError:
    return ApiError(401, message, "auth")


def forbidden(message: str) -> ApiError:
    return ApiError(403, message, "auth")


def not_found(message: str, context: str) -> ApiError:
    return ApiError(404, message, context)


def conflict(message: str, context: str) -> ApiError:
    return ApiError(409, message, context)
