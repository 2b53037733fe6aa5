"""Logging for an operator: JSON lines (one object a line) when the output is not a terminal,
readable text when it is, or as GRAPHSVC_LOG_FORMAT says.

Every record carries its time, level, logger and message; request lines and audit events
add their fields (`extra={"fields": {...}}`), which JSON keeps as keys and text appends as
key=value. Nothing here formats a secret: callers pass ids, names and reasons only.

Messages and field values can hold what a client sent (a user name, a path, a file name), so
json_line and text_line, which every line goes through, escape them: no control character
(C0, DEL, C1), U+2028/U+2029 or bidirectional control reaches a line raw, and no value can
end its line or, in text, pass for another field. A line that cannot be formatted or
written is dropped, never raised into the code that logged it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import hashlib
import logging
import math
import os
import re
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

import msgspec

from graphsvc.settings import Settings

encode = msgspec.json.Encoder().encode
AUDIT = logging.getLogger("graphsvc.audit")
REQUESTS = logging.getLogger("graphsvc.request")


# A terminal acts on C0 and C1 controls (ESC and CSI start its commands), a log reader
# may end a line at any of them or at U+2028/U+2029, and the bidirectional overrides make a
# viewer show characters in another order than written.
BIDI = [0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
CONTROLS = "\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069"
ESCAPES = {
    **{chr(code): f"\\x{code:02x}" for code in [*range(0x20), 0x7F]},
    **{chr(code): f"\\u{code:04x}" for code in [*range(0x80, 0xA0), 0x2028, 0x2029, *BIDI]},
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    # Text puts values that need it in quotes, so a quote in them is escaped; a backslash
    # is too, so that an escape written here cannot pass for the same characters sent.
    '"': '\\"',
    "\\": "\\\\",
}
CONTROL = re.compile(f"[{CONTROLS}]")
TO_ESCAPE = re.compile(f'[{CONTROLS}"\\\\]')
MESSAGE_TO_QUOTE = re.compile(f'[{CONTROLS}"=\\\\]')
VALUE_TO_QUOTE = re.compile(f'[{CONTROLS} "=\\\\]')
# msgspec escapes C0 controls; DEL, C1, U+2028/U+2029 and the bidirectional controls it
# writes raw, as JSON allows.
JSON_RAW = re.compile("[\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Continuation lines of a traceback in text start with this, so that a line break in an
# exception's message cannot start what looks like a log line of its own.
TRACEBACK_MARGIN = "  | "


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    fields: dict[str, Any] = getattr(record, "fields", {})
    return fields


class SecondStamp:
    """A line's time in ISO 8601, UTC, to the millisecond, its date and second formatted once
    a second: datetime's formatting took 1.9 us of a request line's 4.7. The pair is
    replaced whole, so a thread that logs (the ingest worker's) reads a consistent one."""

    def __init__(self) -> None:
        self.current = (-1, "")  # a second since the epoch, and its text

    def text(self, created: float) -> str:
        # Rounded to the microsecond first, as datetime.fromtimestamp rounds, then cut.
        fraction, whole = math.modf(created)
        second, micros = int(whole), round(fraction * 1e6)
        if micros >= 1_000_000:
            second, micros = second + 1, micros - 1_000_000
        current = self.current
        if current[0] != second:
            text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
            current = self.current = (second, text)
        return f"{current[1]}.{micros // 1000:03d}+00:00"


LINE_TIME = SecondStamp()


# Which process writes a line: a JSON line names its `pid`, and under `serve --workers` every
# line (text too) the `worker` number its supervisor gave it, which a replacement worker
# takes over from the one it replaces (name_worker, after the fork).
WORKER: dict[str, int] = {}


def name_worker(number: int) -> None:
    """Mark this process's lines as worker `number`'s."""
    WORKER.clear()
    WORKER["worker"] = number


def json_line(created: float, level: int, logger: str, message: str, fields: dict[str, Any]) -> str:
    line = encode(
        {
            "time": LINE_TIME.text(created),
            "level": logging.getLevelName(level).lower(),
            "logger": logger,
            "message": message,
            "pid": os.getpid(),
            **WORKER,
            **fields,
        }
    ).decode()
    # Those characters occur only inside the line's strings, so the whole line is escaped
    # at once. An ASCII line without DEL, the usual case, is not searched: the check adds
    # 0.06 us to a request line's 2.7, where a search would add 0.9.
    if line.isascii() and "\x7f" not in line:
        return line
    return JSON_RAW.sub(escape_json, line)


def escape_json(found: re.Match[str]) -> str:
    return f"\\u{ord(found[0]):04x}"


def text_line(created: float, level: int, message: str, fields: dict[str, Any]) -> str:
    """A line as text. A message is quoted when it holds what could pass for a field (`=`)
    or needs escaping; a field's value when it holds a space too (spaces separate the
    fields), or is empty. Most values (ids, numbers, paths) are written as they are."""
    stamp = datetime.fromtimestamp(created, UTC).strftime("%H:%M:%S")
    if MESSAGE_TO_QUOTE.search(message):
        message = quote_text(message)
    # A request line took 4.0 us before values were checked, 5.1 now (6.1 with an error to
    # quote); a function called per value would cost 0.6 us more.
    extra = [f"worker={WORKER['worker']}"] if WORKER else []
    for key, value in fields.items():
        if value is not None:
            text = str(value)
            if not text or VALUE_TO_QUOTE.search(text):
                text = quote_text(text)
            extra.append(f"{key}={text}")
    line = f"{stamp} {logging.getLevelName(level):<7} {message}"
    return line + "  " + " ".join(extra) if extra else line


def quote_text(text: str) -> str:
    return '"' + TO_ESCAPE.sub(escape_text, text) + '"'


def escape_text(found: re.Match[str]) -> str:
    return ESCAPES[found[0]]


def text_traceback(formatted: str) -> str:
    return "".join(
        "\n" + TRACEBACK_MARGIN + CONTROL.sub(escape_text, line) for line in formatted.split("\n")
    )


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
            text += text_traceback(self.formatException(record.exc_info))
        return text


class StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever sys.stderr is when a line is written (a test may swap it).

    Lines logged on a running event loop at INFO or below wait until the loop's current
    callbacks have run, and are written together: one write for the request lines of a
    burst. A warning or worse is written at once, after the lines waiting before it.

    A line that cannot be formatted or written (stderr closed, a full disk, a message whose
    arguments do not fit it) is dropped and counted in `dropped`, and the first failure is
    reported by one line, if the stream still takes it: a request must not fail, nor a
    traceback be printed per line, for want of a log line."""

    def __init__(self, json: bool) -> None:
        super().__init__()
        self.json = json
        self.setFormatter(JsonLines() if json else Text())
        self.pending: list[str] = []
        self.waiting_on: asyncio.AbstractEventLoop | None = None  # the loop that will write them
        self.dropped = 0

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

    def handleError(self, record: logging.LogRecord) -> None:
        # logging's own handleError prints a traceback per failure to sys.stderr, which is
        # our stream and may be the closed one: a write there raises ValueError, not caught.
        self.drop_lines(1, sys.exception())

    def drop_lines(self, count: int, error: BaseException | None) -> None:
        """Count lines lost to `error` (the caller holds the lock); report the first loss."""
        self.dropped += count
        if self.dropped > count:
            return
        fields = {"error": f"{type(error).__name__}: {error}", "dropped": count}
        message = "log lines dropped: they could not be formatted or written"
        now = time.time()
        with contextlib.suppress(Exception):
            if self.json:
                line = json_line(now, logging.ERROR, __name__, message, fields)
            else:
                line = text_line(now, logging.ERROR, message, fields)
            self.stream.write(line + "\n")
            self.stream.flush()

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
            lines, self.pending[:] = self.pending[:], []
            try:
                self.stream.write("".join(lines))
                self.stream.flush()
            except Exception as exc:
                self.drop_lines(len(lines), exc)


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
        log_safely(REQUESTS, level, "request", {"fields": fields})
        return
    created = time.time()
    try:
        if handler.json:
            line = json_line(created, level, REQUESTS.name, "request", fields)
        else:
            line = text_line(created, level, "request", fields)
    except Exception as exc:
        with handler.lock or contextlib.nullcontext():
            handler.drop_lines(1, exc)
        return
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
    # The Redis client logs each retry of a connection; graphsvc says once what it means.
    logging.getLogger("coredis").setLevel(logging.WARNING)
    # ...and warns on stderr, outside the log, when a Redis refuses its first command.
    warnings.filterwarnings("ignore", "Unable to determine module support", UserWarning)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True


@dataclass(frozen=True)
class AuditEvent:
    event: str
    message: str
    fields: dict[str, Any]
    at: datetime


# The events of the change under way, where its edge (a write request, a CLI command) keeps
# them, to store them in the change's own transaction (store/audit.py).
RECORDED: contextvars.ContextVar[list[AuditEvent] | None] = contextvars.ContextVar(
    "graphsvc_audit_events", default=None
)


@functools.lru_cache(maxsize=4096)
def token_hash(token_id: str) -> str:
    """What a log line shows of an API token's id: the first 12 hex digits of its SHA-256
    (`printf %s ID | sha256sum`). An id is half of what signs a request, and log lines
    reach more readers than the store does; one who knew an id could make the server
    receive a whole upload body before its signature failed."""
    return hashlib.sha256(token_id.lower().encode()).hexdigest()[:12]


def audit(event: str, message: str, **fields: Any) -> None:
    """A security event: `event` names it (login.failed, auth.failed, token.revoked, ...).
    Logged, a token id as its `token_hash`; and kept for the store, id and all, when a
    change under way is recording its events."""
    logged = {"event": event, **fields}
    if logged.get("token_id"):
        logged["token_hash"] = token_hash(logged.pop("token_id"))
    log_safely(AUDIT, logging.INFO, message, {"fields": logged})
    recorded = RECORDED.get()
    if recorded is not None:
        recorded.append(AuditEvent(event, message, fields, datetime.now(UTC)))


@contextlib.contextmanager
def recording_audit() -> Iterator[list[AuditEvent]]:
    """The audit events raised within the block, in order."""
    events: list[AuditEvent] = []
    token = RECORDED.set(events)
    try:
        yield events
    finally:
        RECORDED.reset(token)


def log_safely(logger: logging.Logger, level: int, message: str, extra: dict[str, Any]) -> None:
    """Log through whatever handlers are set up, none of which may fail the caller: our
    handler drops what it cannot write, but logging's own handlers report a failed write on
    sys.stderr, which raises if it is the stream that failed (closed)."""
    with contextlib.suppress(Exception):
        logger.log(level, message, extra=extra)
