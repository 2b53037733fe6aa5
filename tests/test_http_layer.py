"""The HTTP layer of a served process: protocol errors answered with the JSON error body,
headers that trickle in (slowloris) cut off, on a new connection and between the requests
of a kept-alive one, a cap on open connections, the open-file limit raised, and a request
body that stalls answered 408. One served process (SQLite) answers the module's tests."""

from __future__ import annotations

import json
import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphsvc.api.server import SHED_MESSAGE
from tests.conftest import (
    Templates,
    has_read_all_sent,
    served,
    server_environment,
    wait_until,
)

LIMITS = {"header_timeout_seconds": "1", "body_timeout_seconds": "1", "max_connections": "40"}


@pytest.fixture(scope="module")
def server(
    templates: Templates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, int, int]]:
    folder = tmp_path_factory.mktemp("http-layer")
    database_url = templates.sqlite_copy(folder / "graphsvc.sqlite3")
    with served(server_environment(database_url, folder, **LIMITS)) as (base, process):
        host, port = base.removeprefix("http://").split(":")
        yield host, int(port), process.pid


def exchange(server: tuple[str, int, int], raw: bytes, wait: float = 5) -> bytes:
    with socket.create_connection(server[:2], timeout=wait) as s:
        s.sendall(raw)
        received = b""
        while chunk := s.recv(65536):
            received += chunk
        return received


def json_error(answer: bytes, status: int) -> dict[str, object]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status), answer[:200]
    assert b"content-type: application/json" in head.lower() and b"requestid: " in head.lower()
    error: dict[str, object] = json.loads(body)
    assert error["http_status"] == status and error["errors"]
    return error


@pytest.mark.parametrize(
    "raw",
    [
        b"BREW /health HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /api/v2/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST /api/v2/login HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    ],
    ids=["unknown method", "100 KB target", "raw non-ascii", "length and chunked", "tls"],
)
def test_protocol_errors_answer_the_json_error_body(
    server: tuple[str, int, int], raw: bytes
) -> None:
    error = json_error(exchange(server, raw), 400)
    assert error["errors"] == [
        {
            "context": "http",
            "message": "not a valid HTTP/1.1 request (its request line, a header or its framing)",
        }
    ]


def test_headers_that_trickle_in_are_cut_off(server: tuple[str, int, int]) -> None:
    # Each read waits for the 408 that the header timeout (1 s) sends; a server that never
    # sends it fails the read (after 10 s).
    sockets = [socket.create_connection(server[:2], timeout=10) for _ in range(30)]
    try:
        for s in sockets:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        answers = [s.recv(65536) for s in sockets]
    finally:
        for s in sockets:
            s.close()
    for answer in answers:
        json_error(answer, 408)
    # The server still serves.
    assert exchange(server, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")[
        :12
    ] == (b"HTTP/1.1 200")


def test_headers_that_trickle_in_between_kept_alive_requests_are_cut_off(
    server: tuple[str, int, int],
) -> None:
    """The header timer starts again for each request of a kept-alive connection: the
    second request's headers, never finished, are a 408 after the 1 s timeout (well before
    uvicorn's 5 s keep-alive timeout would close the connection)."""
    with socket.create_connection(server[:2], timeout=3) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 200")
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        started = time.monotonic()
        answer = s.recv(65536)
        waited = time.monotonic() - started
    json_error(answer, 408)
    assert waited < 2.5, waited


def test_headers_begun_behind_a_whole_request_are_on_the_clock(
    server: tuple[str, int, int],
) -> None:
    """A request read whole arms no timer; one begun in the same read behind it (pipelined)
    does."""
    with socket.create_connection(server[:2], timeout=3) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        answers = b""
        while answers.count(b"HTTP/1.1 ") < 2 or not answers.endswith(b"}"):
            answers += s.recv(65536)
        waited = time.monotonic() - started
    first, second = answers.split(b"HTTP/1.1 ")[1:3]
    assert first.startswith(b"200"), answers
    json_error(b"HTTP/1.1 " + second, 408)
    assert 0.8 < waited < 2.5, waited


def test_bytes_between_requests_are_on_the_clock(server: tuple[str, int, int]) -> None:
    """Line breaks that begin no request (the parser skips them) cannot hold a kept-alive
    connection open: they are cut off as headers that never end."""
    with socket.create_connection(server[:2], timeout=3) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 200")
        s.sendall(b"\r\n")
        started = time.monotonic()
        answer = s.recv(65536)
        waited = time.monotonic() - started
    json_error(answer, 408)
    assert waited < 2.5, waited


def test_a_connection_past_the_cap_sheds_the_one_silent_longest(
    server: tuple[str, int, int],
) -> None:
    """With every connection open and none sending, a new one gets in: the one whose client
    has been silent longest is answered 408 and closed (before, the new one was refused)."""
    idle = [socket.create_connection(server[:2], timeout=5) for _ in range(40)]
    try:
        # Accepted by the server (in this order), within their 1 s header timeout.
        wait_until(lambda: has_read_all_sent(server[2], idle), what="40 connections accepted")
        with socket.create_connection(server[:2], timeout=5) as extra:
            extra.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := extra.recv(65536):
                answer += chunk
        shed = idle[0].recv(65536)
    finally:
        for s in idle:
            s.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    error = json_error(shed, 408)
    assert error["errors"] == [{"context": "connections", "message": SHED_MESSAGE}]


def lower_the_open_file_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (LOWERED_SOFT_LIMIT, hard))


LOWERED_SOFT_LIMIT = 256


def test_the_open_file_limit_is_raised_to_the_hard_limit(
    templates: Templates, tmp_path: Path
) -> None:
    """Started with a soft limit below the hard one, the server raises it to the hard one."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= LOWERED_SOFT_LIMIT:
        pytest.skip(f"the hard open-file limit ({hard}) leaves nothing to raise")
    database_url = templates.sqlite_copy(tmp_path / "graphsvc.sqlite3")
    environment = server_environment(database_url, tmp_path)
    with served(environment, preexec_fn=lower_the_open_file_limit) as (_, process):
        limits = Path(f"/proc/{process.pid}/limits").read_text()
    line = next(row for row in limits.splitlines() if row.startswith("Max open files"))
    soft, served_hard = line.split()[3:5]
    assert (int(soft), int(served_hard)) == (hard, hard)


def test_a_body_that_stalls_is_408(server: tuple[str, int, int]) -> None:
    # The server answers and closes the connection (else this read would time out).
    answer = exchange(
        server,
        b'POST /api/v2/login HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"login',
        wait=3,
    )
    error = json_error(answer, 408)
    assert "stalled" in json.dumps(error)
