"""What a client sends cannot reach a log line raw: no control character, C1 control or line
separator in either format, no forged line, and in text no forged key=value field."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from graphsvc.logs import JsonLines, Text, audit, log_request_line
from tests.conftest import Env
from tests.test_operator_logs import served_logging

# Each character a client could send, and how text shows it.
ESCAPED = {
    "\n": r"\n",
    "\r": r"\r",
    "\x1b": r"\x1b",
    "\x00": r"\x00",
    "\x7f": r"\x7f",
    "\x85": r"\u0085",
    "\x9b": r"\u009b",
    "\u2028": r"\u2028",
    "\u2029": r"\u2029",
    "\u202e": r"\u202e",  # right-to-left override
    "\u2066": r"\u2066",  # left-to-right isolate
}
RAW = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
FORGED_LINE = "\n12:00:00 INFO    user admin logged in  event=login user=admin"

# A text line, read as an operator's tools would: time, level, message (quoted or plain),
# then key=value fields after two spaces, each value quoted or plain.
QUOTED = r'"(?:[^"\\]|\\.)*"'
VALUE = rf'(?:{QUOTED}|[^ "=\\]+)'
TEXT_LINE = re.compile(
    rf'\d\d:\d\d:\d\d [A-Z]+ +(?P<message>{QUOTED}|[^"=\\]*?)'
    rf"(?:  (?P<fields>\w+={VALUE}(?: \w+={VALUE})*))?"
)
FIELD = re.compile(rf"(\w+)=({VALUE})")
ESCAPE = re.compile(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|.)")


def read_text_value(value: str) -> str:
    """A message or value as it was logged, its quotes and escapes undone."""
    if not value.startswith('"'):
        return value
    named = {"n": "\n", "r": "\r", "t": "\t"}

    def unescape(found: re.Match[str]) -> str:
        code = found[1]
        return chr(int(code[1:], 16)) if len(code) > 1 else named.get(code, code)

    return ESCAPE.sub(unescape, value[1:-1])


def read_text_line(line: str) -> tuple[str, dict[str, str]]:
    parsed = TEXT_LINE.fullmatch(line)
    assert parsed is not None, f"not a well-formed text line: {line!r}"
    fields = FIELD.findall(parsed["fields"] or "")
    assert len({key for key, _ in fields}) == len(fields), f"a field twice: {line!r}"
    return read_text_value(parsed["message"]), {k: read_text_value(v) for k, v in fields}


def single_lines(output: str, count: int) -> list[str]:
    """The lines written, checked to be `count` lines, each free of raw controls."""
    lines = output.split("\n")
    assert lines.pop() == "" and len(lines) == count
    assert output.splitlines() == lines  # nothing Python takes for a line break either
    for line in lines:
        assert not RAW.search(line), line
    return lines


def lines_of_a_client_value(
    monkeypatch: pytest.MonkeyPatch, log_format: str, value: str
) -> list[str]:
    """An audit event, a request line and a message, each holding `value`, as written."""
    stderr, _ = served_logging(monkeypatch, log_format)
    audit("login.failed", f"login as {value} refused", user=value)
    log_request_line(logging.INFO, {"request_id": "r", "path": f"/api/v2/{value}", "status": 404})
    logging.getLogger("graphsvc.test").warning("no such file: %s", value)
    return single_lines(stderr.getvalue(), 3)


@pytest.mark.parametrize("character", list(ESCAPED))
def test_control_characters_from_a_client_are_escaped_in_both_formats(
    monkeypatch: pytest.MonkeyPatch, character: str
) -> None:
    value = f"a{character}b"
    audited, requested, warned = lines_of_a_client_value(monkeypatch, "json", value)
    assert json.loads(audited)["user"] == value
    assert json.loads(audited)["message"] == f"login as {value} refused"
    assert json.loads(requested)["path"] == f"/api/v2/{value}"
    assert json.loads(warned)["message"] == f"no such file: {value}"

    audited, requested, warned = lines_of_a_client_value(monkeypatch, "text", value)
    escaped = f"a{ESCAPED[character]}b"
    assert f'user="{escaped}"' in audited and f'path="/api/v2/{escaped}"' in requested
    assert f'"no such file: {escaped}"' in warned
    assert read_text_line(audited) == (
        f"login as {value} refused",
        {"event": "login.failed", "user": value},
    )
    assert read_text_line(requested)[1]["path"] == f"/api/v2/{value}"
    assert read_text_line(warned)[0] == f"no such file: {value}"


@pytest.mark.parametrize(
    "name",
    [
        "admin  event=login user=admin",
        'admin" event=login user="admin',
        'admin\\" event=login x=\\',
        "admin" + FORGED_LINE,
        "",
    ],
)
def test_a_user_name_cannot_forge_a_field_or_a_line_in_text(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    stderr, _ = served_logging(monkeypatch, "text")
    audit("login.failed", f"login as {name} refused", user=name, code="login")
    (line,) = single_lines(stderr.getvalue(), 1)
    message, fields = read_text_line(line)
    assert message == f"login as {name} refused"
    assert fields == {"event": "login.failed", "user": name, "code": "login"}


def test_an_exception_message_cannot_start_a_line_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stderr, _ = served_logging(monkeypatch, "text")
    try:
        raise ValueError("no such user: admin\x9b" + FORGED_LINE)
    except ValueError:
        logging.getLogger("graphsvc.test").exception("unhandled error in request r")
    first, *traceback = stderr.getvalue().removesuffix("\n").split("\n")
    assert read_text_line(first) == ("unhandled error in request r", {})
    assert traceback[0] == "  | Traceback (most recent call last):"
    assert traceback[-2:] == [
        "  | ValueError: no such user: admin\\u009b",
        "  | 12:00:00 INFO    user admin logged in  event=login user=admin",
    ]
    assert all(line.startswith("  | ") for line in traceback)
    single_lines(stderr.getvalue(), 1 + len(traceback))  # and none holds a raw control


@pytest.fixture
def text_and_json() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """Every graphsvc log record of the test, in both formats."""
    buffers = (io.StringIO(), io.StringIO())
    handlers = [logging.StreamHandler(buffer) for buffer in buffers]
    handlers[0].setFormatter(Text())
    handlers[1].setFormatter(JsonLines())
    logger = logging.getLogger("graphsvc")
    previous = logger.level
    logger.setLevel(logging.INFO)
    for handler in handlers:
        logger.addHandler(handler)
    yield buffers
    for handler in handlers:
        logger.removeHandler(handler)
    logger.setLevel(previous)


def test_a_login_name_and_a_path_cannot_forge_log_lines(
    env: Env, text_and_json: tuple[io.StringIO, io.StringIO]
) -> None:
    text, json_lines = text_and_json
    name = "nobody\x1b[2J\x9b" + FORGED_LINE
    body = {"login_method": "secret", "username": name, "secret": "wrong-guess"}
    refused = env.request("POST", "/api/v2/login", content=json.dumps(body).encode())
    assert refused.status_code == 401
    path = "/api/v2/saml/providers/%0A12:00:00%20INFO%20%20%20%20forged%C2%9B"
    assert env.get(path).status_code in (400, 404)
    records = [json.loads(line) for line in single_lines(json_lines.getvalue(), 3)]
    read = [read_text_line(line) for line in single_lines(text.getvalue(), 3)]
    failed = [fields for _, fields in read if fields.get("event") == "login.failed"]
    assert [fields["user"] for fields in failed] == [name]
    assert [r["user"] for r in records if r.get("event") == "login.failed"] == [name]
    paths = [fields["path"] for _, fields in read if "path" in fields]
    assert paths == ["/api/v2/login", "/api/v2/saml/providers/\n12:00:00 INFO    forged\x9b"]
