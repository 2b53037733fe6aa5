"""One log line per request, its metrics, and the audit event of a refused one."""

from __future__ import annotations

import logging
import time

from graphsvc.api.auth import TokenRefused
from graphsvc.api.metrics import Metrics
from graphsvc.api.ratelimit import client_address
from graphsvc.api.web import CALLER_KEY, OPERATION_KEY, Scope
from graphsvc.errors import ApiError
from graphsvc.logs import REQUESTS, audit, log_request_line, token_hash
from graphsvc.settings import Settings

LOGIN_PATH = "/api/v2/login"  # its failures are audited with the user name tried
AUDITED = {
    401: ("auth.failed", "authentication failed"),
    403: ("auth.forbidden", "permission refused"),
    429: ("rate_limited", "rate limit reached"),
}
TOKEN_PATH = "/api/v2/tokens/"  # noqa: S105 - a route, not a secret


class RequestLines:
    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self.trusted_proxies = settings.trusted_proxies
        self.metrics = metrics

    def log(
        self, scope: Scope, request_id: str, status: int, started: float, error: ApiError | None
    ) -> None:
        """One line per request; a refused one (401, 403, 429) is instead an audit event,
        with the same fields: a flood of refusals wrote two lines each."""
        operation = scope.get(OPERATION_KEY, "unknown")
        seconds = time.perf_counter() - started
        self.metrics.observe(operation, status, seconds, None if error is None else error.code)
        level = logging.WARNING if status >= 500 else logging.INFO
        # A refused login is audited by the login itself, with the user name tried.
        login = scope["path"] == LOGIN_PATH and status != 429
        audited = error is not None and status in AUDITED and not login
        if not audited and not REQUESTS.isEnabledFor(level):
            return
        caller = scope.get(CALLER_KEY, {})
        fields = {
            "request_id": request_id,
            "method": scope["method"],
            # never the query: it can carry what a client should not log
            "path": logged_path(scope["path"]),
            "status": status,
            "duration_ms": round(seconds * 1000, 2),
            "operation": operation,
            "client": client_address(scope, self.trusted_proxies),
            **caller,
        }
        if error is not None:
            fields["error_context"], fields["error"] = error.context, error.message
            fields["error_code"] = error.code
        if not audited:
            log_request_line(level, fields)
            return
        assert error is not None
        event, what = AUDITED[status]
        if isinstance(error, TokenRefused):  # why, which the caller is not told
            fields.update(error.audit_fields)
        audit(event, f"{what}: {error.message}", reason=error.message, **fields)


def logged_path(path: str) -> str:
    """A request's path as its log line shows it: a token's id in it (revoking one) as its
    token_hash, like every token id a line shows."""
    if path.startswith(TOKEN_PATH) and len(path) > len(TOKEN_PATH):
        return TOKEN_PATH + token_hash(path[len(TOKEN_PATH) :])
    return path
