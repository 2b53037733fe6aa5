"""Logging for an operator: JSON lines (one object a line) when the output is not a terminal,
readable text when it is, or as GRAPHSVC_LOG_FORMAT says.

Every record carries its time, level, logger and message; request lines and audit events
add their fields (`extra={"fields": {...}}`), which JSON keeps as keys and text appends as
key=value. Nothing here formats a secret: callers pass ids, names and reasons only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
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


def json_line(created: float, level: int, logger: str, message: str, fields: dict[str, Any]) -> str:
    return encode(
        {
            "time": datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds"),
            "level": logging.getLevelName(level).lower(),
            "logger": logger,
            "message": message,
            **fields,
        }
    ).decode()


def text_line(created: float, level: int, message: str, fields: dict[str, Any]) -> str:
    stamp = datetime.fromtimestamp(created, UTC).strftime("%H:%M:%S")
    extra = " ".join(f"{k}={v}" for k, v in fields.items() if v is not None)
    return f"{stamp} {logging.getLevelName(level):<7} {message}" + (f"  {extra}" if extra else "")


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = fields_of(record)
        if record.exc_info:
            fields = {**fields, "exception": self.formatException(record.exc_info)}
        return json_line(record.created, record.levelno, record.name, record.getMessage(), fields)


class Text(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = text_line(record.created, record.levelno, record.getMessage(), fields_of(record))
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever sys.stderr is when a line is written (a test may swap it).

    Lines logged on a running event loop at INFO or below wait until the loop's current
    callbacks have run, and are written together: one write for the request lines of a
    burst. A warning or worse is written at once, after the lines waiting before it."""

    def __init__(self, json: bool) -> None:
        super().__init__()
        self.json = json
        self.setFormatter(JsonLines() if json else Text())
        self.pending: list[str] = []
        self.waiting_on: asyncio.AbstractEventLoop | None = None  # the loop that will write them

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self.add_line(line, record.levelno)

    def add_line(self, line: str, level: int) -> None:
        """Queue one line (the caller holds the lock, as Logger.handle does). Lines wait for
        one loop only: a line from another thread's loop (the ingest worker's, busy for a
        while between its awaits) writes those waiting at once, instead of joining them."""
        self.pending.append(line + "\n")
        loop = running_loop() if level <= logging.INFO else None
        if loop is None or self.waiting_on not in (None, loop):
            self.write_pending()
        elif self.waiting_on is None:
            self.waiting_on = loop
            loop.call_soon(self.flush)

    def flush(self) -> None:
        with self.lock or contextlib.nullcontext():
            self.write_pending()

    def write_pending(self) -> None:
        self.waiting_on = None
        if self.pending:
            text, self.pending[:] = "".join(self.pending), []
            self.stream.write(text)
            self.stream.flush()


def running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def log_request_line(level: int, fields: dict[str, Any]) -> None:
    """One request line on the `graphsvc.request` logger.

    When that logger reaches only our stderr handler, with no filters on the way (as
    `graphsvc serve` sets it up), the line is formatted and queued here directly: the
    logging call made a LogRecord, found its caller and took the handler's lock, 19 us of
    a request in a 32-connection load where this path takes 3 (a /health answer went from
    110 to 80 us). Any other set-up (an embedding app's handlers, a test's) gets the
    record through logging, as before."""
    if not REQUESTS.isEnabledFor(level):
        return
    handler = only_stderr_handler(REQUESTS)
    if handler is None or level < handler.level:
        REQUESTS.log(level, "request", extra={"fields": fields})
        return
    created = time.time()
    if handler.json:
        line = json_line(created, level, REQUESTS.name, "request", fields)
    else:
        line = text_line(created, level, "request", fields)
    with handler.lock or contextlib.nullcontext():
        handler.add_line(line, level)


def only_stderr_handler(logger: logging.Logger) -> StderrHandler | None:
    """Our stderr handler, when it is the only handler a record of `logger` reaches and no
    filter could drop or change that record."""
    found: StderrHandler | None = None
    current: logging.Logger | None = logger
    while current is not None:
        if current.filters:
            return None
        for handler in current.handlers:
            if found is not None or not isinstance(handler, StderrHandler) or handler.filters:
                return None
            found = handler
        current = current.parent if current.propagate else None
    return found


def configure_logging(settings: Settings) -> None:
    """Our one handler on stderr, for graphsvc and the server under it (handlers others
    added, such as a test harness's, stay)."""
    chosen = settings.log_format
    if chosen == "auto":
        chosen = "text" if sys.stderr.isatty() else "json"
    handler = StderrHandler(json=chosen == "json")
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
