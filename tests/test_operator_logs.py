"""What an operator reads: one line per request whose id matches the response's, the audit
events with their reasons, and never a secret in any line."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from graphsvc.accounts import tokens
from graphsvc.api.web import new_request_id
from graphsvc.demo.dataset import DemoResult
from graphsvc.logs import (
    JsonLines,
    SecondStamp,
    StderrHandler,
    audit,
    configure_logging,
    log_request_line,
    token_hash,
)
from graphsvc.settings import Settings
from tests.conftest import TEST_FERNET_KEY, Env

AGG = "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    """Every graphsvc log record of the test, as the JSON lines an operator would read."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JsonLines())
    logger = logging.getLogger("graphsvc")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.DEBUG)
    yield buffer
    logger.removeHandler(handler)
    logger.setLevel(previous)


def records(buffer: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def request_lines(buffer: io.StringIO) -> list[dict[str, object]]:
    return [r for r in records(buffer) if r["logger"] == "graphsvc.request"]


def events(buffer: io.StringIO) -> list[dict[str, object]]:
    return [r for r in records(buffer) if r["logger"] == "graphsvc.audit"]


def test_the_request_id_is_the_same_in_header_body_and_log(env: Env, lines: io.StringIO) -> None:
    response = env.get("/api/v2/saml/providers/999")
    assert response.status_code == 404
    request_id = response.headers["requestid"]
    assert response.json()["request_id"] == request_id
    line = request_lines(lines)[-1]
    assert line["request_id"] == request_id and line["status"] == 404
    assert line["path"] == "/api/v2/saml/providers/999" and line["method"] == "GET"
    assert line["token_hash"] == token_hash(env.token.id) and "token_id" not in line
    assert line["error_context"] == "saml_provider_id"
    assert line["error_code"] == "not_found"
    assert isinstance(line["duration_ms"], float) and line["client"]


def test_an_incoming_request_id_is_kept_when_it_is_a_uuid(env: Env, lines: io.StringIO) -> None:
    mine = str(uuid.uuid4())
    kept = env.get(AGG, headers={"X-Request-ID": mine.upper()})
    assert kept.headers["requestid"] == mine == request_lines(lines)[-1]["request_id"]
    replaced = env.get(AGG, headers={"X-Request-ID": "not-a-uuid; rm -rf /"})
    assert replaced.headers["requestid"] != "not-a-uuid; rm -rf /"
    uuid.UUID(replaced.headers["requestid"])


def test_audit_events_name_what_happened(env: Env, lines: io.StringIO) -> None:
    env.login()
    bad_login = env.request(
        "POST",
        "/api/v2/login",
        content=b'{"login_method": "secret", "username": "admin", "secret": "wrong-guess"}',
    )
    assert bad_login.status_code == 401
    jwt = env.login()
    env.request("POST", "/api/v2/logout", {"Authorization": f"Bearer {jwt}"})
    unknown = tokens.CreatedToken(str(uuid.uuid4()), "k" * 40, None)
    env.get(AGG, token=unknown)
    stale = env.signed_headers("GET", AGG, date=datetime.now(UTC) - timedelta(hours=5))
    env.request("GET", AGG, stale)
    reader = env.user_with_token("reader", "Read-Only")
    env.get("/api/v2/saml/providers/1", token=reader)
    seen = {(e["event"], e.get("reason")) for e in events(lines)}
    names = [e["event"] for e in events(lines)]
    assert names.count("login") == 2 and "logout" in names
    failed = next(e for e in events(lines) if e["event"] == "login.failed")
    assert failed["user"] == "admin" and failed["reason"] == "invalid username or secret"
    assert failed["code"] == "login"
    codes = {e.get("error_code") for e in events(lines) if str(e["event"]).startswith("auth.")}
    assert {"signature_or_unknown_token", "stale_date", "permission_missing"} <= codes
    assert ("auth.failed", "invalid signature or unknown token id") in seen
    assert any(e == "auth.failed" and "stale RequestDate" in str(r) for e, r in seen)
    assert ("auth.forbidden", "permission auth/ManageProviders is required") in seen


def test_a_rate_limited_client_is_an_audit_event(
    make_env: Callable[..., Env], lines: io.StringIO
) -> None:
    env = make_env(rate_limit_per_second=1, rate_limit_burst=0)
    env.create_admin()
    statuses = [env.get(AGG).status_code for _ in range(4)]
    assert 429 in statuses
    limited = [e for e in events(lines) if e["event"] == "rate_limited"]
    assert limited and limited[0]["status"] == 429 and limited[0]["error_code"] == "rate_limited"
    # One line a refusal: the audit event, with the request line's fields.
    request_id = limited[0]["request_id"]
    assert [r["logger"] for r in records(lines) if r.get("request_id") == request_id] == [
        "graphsvc.audit"
    ]
    assert {"method", "path", "duration_ms", "operation", "client"} <= limited[0].keys()


def test_account_changes_on_the_command_line_are_audited(env: Env, lines: io.StringIO) -> None:
    made = env.cli("token", "create", "--user", "admin", "--json")
    token_id = json.loads(made.stdout)["id"]
    env.cli("token", "revoke", token_id)
    env.cli("user", "create", "temp", "--role", "User")
    env.cli("user", "disable", "temp")
    names = [e["event"] for e in events(lines)]
    assert {"token.created", "token.revoked", "user.disabled"} <= set(names)
    revoked = next(e for e in events(lines) if e["event"] == "token.revoked")
    assert revoked["token_hash"] == token_hash(token_id) and "command line" in str(revoked["actor"])


def test_no_secret_reaches_any_log_line(
    demo_env: tuple[Env, DemoResult], lines: io.StringIO
) -> None:
    env, demo = demo_env
    jwt = env.login("admin", demo.admin_secret)
    env.request("GET", AGG, {"Authorization": f"Bearer {jwt}"})
    env.request("GET", AGG, {"Authorization": f"Bearer {jwt}x"})
    for uri in (AGG, f"/api/v2/computers/{demo.computer_object_ids[0]}/dcom-rights"):
        env.get(uri)
    env.request("GET", AGG, {**env.signed_headers("GET", AGG), "Signature": "AAAA"})
    env.request(
        "POST",
        "/api/v2/login",
        content=json.dumps(
            {"login_method": "secret", "username": "admin", "secret": demo.admin_secret + "x"}
        ).encode(),
    )
    made = env.get("/api/v2/self").json()["data"]["token"]["id"]
    # a revoke that fails (a bad signature) names the token in its path
    revoke = f"/api/v2/tokens/{made}"
    env.request("DELETE", revoke, {**env.signed_headers("DELETE", revoke), "Signature": "AAAA"})
    text = lines.getvalue()
    assert token_hash(made) in text  # the lines are there...
    signature = env.signed_headers("GET", AGG)["Signature"]
    # ...and no secret is in them, nor a token's id, which with a leaked key signs requests
    for secret in (demo.admin_secret, demo.token_key, jwt, signature, TEST_FERNET_KEY, made):
        assert secret not in text.lower() and secret not in text


def test_readiness_reports_the_database_and_redis(
    make_env: Callable[..., Env], monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphsvc.api import probes
    from tests.conftest import free_port

    env = make_env()
    ready = env.request("GET", "/ready").json()["data"]
    assert ready["status"] == "ready" and ready["redis"] == "none"
    silent = make_env(redis_url=f"redis://127.0.0.1:{free_port()}/0", rate_limit_per_second=5)
    assert silent.request("GET", "/ready").json()["data"]["redis"] == "unreachable"

    async def unreachable(conn: object) -> None:
        raise ConnectionRefusedError("connection refused")

    monkeypatch.setattr(probes, "ping", unreachable)
    assert env.request("GET", "/ready").status_code == 503


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_the_start_line_masks_the_password_and_weaker_settings_warn(
    database_url: str, tmp_path: Path
) -> None:
    from tests.conftest import served, server_environment

    with_password = database_url.replace("postgres@", "postgres:hunter2@", 1)
    environment = server_environment(
        with_password,
        tmp_path,
        sdk_compatibility="true",
        rate_limit_per_second="0",
        log_level="info",
    )
    with served(environment) as (_, process):
        pass
    assert process.stderr is not None
    logged = process.stderr.read().decode()
    assert "postgres:***@" in logged and "hunter2" not in logged
    assert "weaker setting: GRAPHSVC_SDK_COMPATIBILITY" in logged
    assert "weaker setting: GRAPHSVC_RATE_LIMIT_PER_SECOND is 0" in logged
    assert "serving on http://127.0.0.1:" in logged


class CountedWrites(io.StringIO):
    """stderr for a test: what was written, and in how many writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def served_logging(
    monkeypatch: pytest.MonkeyPatch, log_format: str = "json"
) -> tuple[CountedWrites, StderrHandler]:
    """Logging as `graphsvc serve` sets it up (our handler alone on the way of a request
    line), onto a stderr of the test's own (set in the test: pytest swaps it per phase). The
    handler hangs on the `graphsvc` logger, which stops there, so that the test harness's
    handlers on the root logger stay out of its way."""
    stderr = CountedWrites()
    monkeypatch.setattr(sys, "stderr", stderr)
    root, top = logging.getLogger(), logging.getLogger("graphsvc")
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    monkeypatch.setattr(top, "handlers", [])
    monkeypatch.setattr(top, "propagate", False)
    configure_logging(Settings.from_environment({}, log_format=log_format, log_level="info"))
    (handler,) = [h for h in root.handlers if isinstance(h, StderrHandler)]
    root.removeHandler(handler)
    top.addHandler(handler)
    return stderr, handler


def test_request_lines_of_a_burst_are_written_together_and_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stderr, _ = served_logging(monkeypatch)

    async def burst() -> int:
        for i in range(5):
            log_request_line(logging.INFO, {"request_id": str(i), "status": 200})
        written_during_the_burst = stderr.writes
        await asyncio.sleep(0)  # the loop runs the callbacks queued so far, the write too
        logging.getLogger("graphsvc.request").warning("after the burst")
        return written_during_the_burst

    assert asyncio.run(burst()) == 0
    lines = [json.loads(line) for line in stderr.getvalue().splitlines()]
    assert [line.get("request_id") for line in lines] == ["0", "1", "2", "3", "4", None]
    assert lines[-1]["message"] == "after the burst" and lines[-1]["level"] == "warning"
    assert stderr.writes == 2  # the burst in one write, the warning in another


def test_a_warning_is_written_at_once_after_the_lines_waiting_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stderr, _ = served_logging(monkeypatch)

    async def burst() -> str:
        log_request_line(logging.INFO, {"request_id": "first", "status": 200})
        log_request_line(logging.WARNING, {"request_id": "failed", "status": 500})
        return stderr.getvalue()

    written = [json.loads(line)["request_id"] for line in asyncio.run(burst()).splitlines()]
    assert written == ["first", "failed"]


def test_lines_still_waiting_when_the_loop_stops_are_written_at_shutdown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stderr, handler = served_logging(monkeypatch)
    loop = asyncio.new_event_loop()

    def last_request() -> None:
        log_request_line(logging.INFO, {"request_id": "last", "status": 200})
        loop.stop()  # the loop ends with this round: the write it queued never runs

    loop.call_soon(last_request)
    loop.run_forever()
    loop.close()
    assert stderr.getvalue() == ""
    handler.flush()  # what logging.shutdown does at exit
    assert json.loads(stderr.getvalue())["request_id"] == "last"


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_a_request_line_reads_the_same_written_directly_or_through_logging(
    monkeypatch: pytest.MonkeyPatch, log_format: str
) -> None:
    stderr, handler = served_logging(monkeypatch, log_format)
    fields = {"request_id": "r", "status": 404, "duration_ms": 1.5, "error": "no such thing"}
    log_request_line(logging.INFO, fields)  # directly: our handler is the only one
    collected = io.StringIO()
    extra = logging.StreamHandler(collected)
    extra.setFormatter(handler.formatter)
    logging.getLogger("graphsvc.request").addHandler(extra)
    try:
        log_request_line(logging.INFO, fields)  # through logging: another handler listens
    finally:
        logging.getLogger("graphsvc.request").removeHandler(extra)
    direct, through_logging, _ = stderr.getvalue().split("\n")
    assert collected.getvalue() == through_logging + "\n"
    if log_format == "json":
        assert {**json.loads(direct), "time": ""} == {**json.loads(through_logging), "time": ""}
        assert json.loads(direct)["logger"] == "graphsvc.request"
    else:
        assert direct.split(" ", 1)[1] == through_logging.split(" ", 1)[1]
        assert "status=404" in direct and 'error="no such thing"' in direct


def test_request_ids_are_distinct_version_4_uuids_in_every_forked_worker() -> None:
    ids = [new_request_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    for request_id in ids[:1000]:
        parsed = uuid.UUID(request_id)
        assert str(parsed) == request_id and parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # a worker forked by `serve --workers`: its ids must not repeat the parent's
        os.write(writer, new_request_id().encode())
        os._exit(0)
    os.waitpid(child, 0)
    from_child = os.read(reader, 64).decode()
    os.close(reader)
    os.close(writer)
    assert from_child != new_request_id() and uuid.UUID(from_child).version == 4


def test_a_line_from_another_threads_loop_does_not_wait_for_the_first_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stderr, _ = served_logging(monkeypatch)
    written: list[str] = []

    def other_thread() -> None:
        async def log_once() -> None:
            log_request_line(logging.INFO, {"request_id": "from the worker", "status": 200})
            written.append(stderr.getvalue())

        asyncio.run(log_once())

    async def busy_main_loop() -> None:
        log_request_line(logging.INFO, {"request_id": "from the main loop", "status": 200})
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()  # the main loop stays busy meanwhile: its pass never ends here

    asyncio.run(busy_main_loop())
    (seen_by_the_worker,) = written  # what stderr held right after the worker's line
    lines = [json.loads(line)["request_id"] for line in seen_by_the_worker.splitlines()]
    assert lines == ["from the main loop", "from the worker"]
    assert stderr.getvalue() == seen_by_the_worker  # nothing was left for the main loop


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_logging_onto_a_closed_stderr_raises_into_no_caller(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], log_format: str
) -> None:
    stderr, handler = served_logging(monkeypatch, log_format)
    stderr.close()

    async def on_the_loop() -> None:
        log_request_line(logging.INFO, {"request_id": "waits for the loop", "status": 200})
        await asyncio.sleep(0)  # the loop writes it, and fails

    asyncio.run(on_the_loop())
    log_request_line(logging.INFO, {"request_id": "written at once", "status": 200})
    log_request_line(logging.WARNING, {"request_id": "failed", "status": 500})
    audit("login.failed", "login as someone refused", user="someone")
    logging.getLogger("graphsvc.api").error("a server error")
    assert handler.dropped == 5
    # A handler of logging's own on the way: its report of the failure goes to the closed
    # stderr too, and fails.
    other = logging.StreamHandler(stderr)
    logging.getLogger("graphsvc").addHandler(other)
    try:
        log_request_line(logging.INFO, {"request_id": "through logging", "status": 200})
        audit("login.failed", "login as someone refused", user="someone")
    finally:
        logging.getLogger("graphsvc").removeHandler(other)
    assert handler.dropped == 7
    printed = capfd.readouterr().err
    assert "Traceback" not in printed and "Logging error" not in printed


def test_a_line_that_cannot_be_formatted_is_dropped_and_reported_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stderr, handler = served_logging(monkeypatch)
    logger = logging.getLogger("graphsvc.api")
    logger.error("%d jobs", "not a number")
    logger.error("%d jobs", "still not a number")
    logger.error("a line after them")
    report, after = [json.loads(line) for line in stderr.getvalue().splitlines()]
    assert report["message"] == "log lines dropped: they could not be formatted or written"
    assert report["error"].startswith("TypeError") and report["level"] == "error"
    assert after["message"] == "a line after them" and handler.dropped == 2


def test_a_lines_time_is_datetimes_to_the_millisecond() -> None:
    """The time a JSON line shows, formatted once a second (`SecondStamp`), is what
    datetime makes of it, at a millisecond's edges and across seconds, in any order."""
    stamp = SecondStamp()
    second = 1_795_797_890
    edges = [0.0, 0.0005, 0.0009995, 0.0079997, 0.4995, 0.9994999, 0.9999995, 0.9999996]
    times = [s + edge for s in (second, second + 1, 4_000_000_000, 1) for edge in edges]
    for created in [*times, *reversed(times)]:
        assert stamp.text(created) == datetime.fromtimestamp(created, UTC).isoformat(
            timespec="milliseconds"
        ), created
