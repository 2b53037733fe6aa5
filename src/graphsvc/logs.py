"""Logging for an operator: JSON lines (one object a line) when the output is not a terminal,
readable text when it is, or as GRAPHSVC_LOG_FORMAT says.

Every record carries its time, level, logger and message; request lines and audit events
add their fields (`extra={"fields": {...}}`), which JSON keeps as keys and text appends as
key=value. Nothing here formats a secret: callers pass ids, names and reasons only.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import msgspec

from graphsvc.settings import Settings

encode = msgspec.json.Encoder().encode
AUDIT = logging.getLogger("graphsvc.audit")
REQUESTS = logging.getLogger("graphsvc.request")


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    fields: dict[str, Any] = getattr(record, "fields", {})
    return fields


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **fields_of(record),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return encode(line).decode()


class Text(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC).strftime("%H:%M:%S")
        extra = " ".join(f"{k}={v}" for k, v in fields_of(record).items() if v is not None)
        text = f"{stamp} {record.levelname:<7} {record.getMessage()}" + (
            f"  {extra}" if extra else ""
        )
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever sys.stderr is when a record comes (a test may swap it)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure_logging(settings: Settings) -> None:
    """Our one handler on stderr, for graphsvc and the server under it (handlers others
    added, such as a test harness's, stay)."""
    chosen = settings.log_format
    if chosen == "auto":
        chosen = "text" if sys.stderr.isatty() else "json"
    handler = StderrHandler()
    handler.setFormatter(JsonLines() if chosen == "json" else Text())
    root = logging.getLogger()
    root.handlers[:] = [h for h in root.handlers if not isinstance(h, StderrHandler)]
    root.addHandler(handler)
    root.setLevel(settings.log_level.upper())
    # Migrations run at every start; their steps are not news to an operator.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True


def audit(event: str, message: str, **fields: Any) -> None:
    """A security event: `event` names it (login.failed, auth.failed, token.revoked, ...)."""
    AUDIT.info(message, extra={"fields": {"event": event, **fields}})
