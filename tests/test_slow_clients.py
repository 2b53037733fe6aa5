"""What a slow or hostile client can hold: a body that trickles is cut off and takes no
database connection while it arrives; one address cannot hold every connection; a pool that
stays busy answers 503; an upload is refused from its headers before one byte of its body is
read; a client that writes its whole body before reading still sees an early answer; a full
disk while a file arrives is a 507."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import http.client
import json
import resource
import select
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from graphsvc.accounts import tokens
from graphsvc.api.app import create_app
from tests.conftest import (
    Env,
    check_against_openapi,
    has_read_all_sent,
    served,
    server_environment,
    signed_headers,
    wait_until,
)

AGG = "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"
JOBS = "/api/v2/file-upload"


def connect(base: str, source: str = "127.0.0.1") -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)), timeout=5, source_address=(source, 0))
    return s


def head_of(method: str, uri: str, headers: dict[str, str], length: int) -> bytes:
    lines = [f"{method} {uri} HTTP/1.1", "Host: graphsvc", f"Content-Length: {length}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_answer(s: socket.socket) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of the one answer on a socket."""
    received = b""
    while b"\r\n\r\n" not in received or not received.rstrip().endswith(b"}"):
        chunk = s.recv(65536)
        if not chunk:
            break
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def unknown_token_headers(uri: str) -> dict[str, str]:
    token = tokens.CreatedToken(str(uuid.uuid4()), "not-a-key", None)
    return signed_headers(token, "GET", uri)


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_body_slower_than_the_minimum_rate_is_cut_off(database_url: str, tmp_path: Path) -> None:
    """A byte every 0.3 s never pauses for the body timeout (1 s), and would hold the
    connection for hours; past the first second it is behind 100 bytes a second."""
    settings = {"body_timeout_seconds": "1", "body_min_bytes_per_second": "100"}
    environment = server_environment(database_url, tmp_path, **settings)
    with served(environment) as (base, _), connect(base) as s:
        s.sendall(head_of("POST", "/api/v2/login", {}, 10_000))
        s.settimeout(0.3)
        answer = b""
        for _ in range(30):  # 9 s at most
            try:
                s.sendall(b"{")
                answer = s.recv(65536)
                break
            except TimeoutError:
                continue
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"arrived slower than 100 bytes a second" in answer


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_a_body_on_its_way_holds_no_database_connection(
    make_env: Callable[..., Env], tmp_path: Path
) -> None:
    """Three requests whose bodies have barely begun, and a pool of one connection: a signed
    read still answers at once (it waited for a body to time out before, 20 s here)."""
    env = make_env()
    env.create_admin()
    settings = {
        "db_pool_size": "1",
        "body_timeout_seconds": "20",
        "body_min_bytes_per_second": "1",
    }
    with served(server_environment(env.url, tmp_path, **settings)) as (base, process):
        slow = [connect(base) for _ in range(3)]
        try:
            for s in slow:
                s.sendall(head_of("GET", AGG, unknown_token_headers(AGG), 100) + b"x")
            # The three are under way: their heads and first byte read by the server.
            wait_until(lambda: has_read_all_sent(process.pid, slow), what="the three heads read")
            read = httpx.get(base + AGG, headers=env.signed_headers("GET", AGG), timeout=3)
        finally:
            for s in slow:
                s.close()
    assert read.status_code == 200, read.text


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_a_pool_that_stays_busy_answers_503_with_retry_after(
    make_env: Callable[..., Env],
) -> None:
    env = make_env(db_pool_size=1, db_acquire_timeout_seconds=0.2)
    env.create_admin()

    async def read_with_the_pool_held() -> httpx.Response:
        app = create_app(env.settings)
        await app.db.open()
        try:
            async with app.db.reading() as conn:
                await app.auth.load(conn)
            async with app.db.reading():  # the pool's only connection, held
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                    return await client.get(AGG, headers=env.signed_headers("GET", AGG))
        finally:
            await app.db.close()

    response = asyncio.run(read_with_the_pool_held())
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert "every database connection stayed in use for 0.2 s" in response.text
    check_against_openapi("GET", AGG.split("?")[0], response)


@pytest.fixture
def more_open_files() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.usefixtures("more_open_files")
@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_thousand_slow_bodies_from_one_address_leave_room_for_others(
    make_env: Callable[..., Env], tmp_path: Path
) -> None:
    """1,000 connections from 127.0.0.1, each a request whose body has barely begun; a signed
    read from 127.0.0.2 answers as usual. Before the cap per address, the thousand filled
    every connection the server allows and the read was refused with a 503."""
    env = make_env()
    env.create_admin()
    with served(server_environment(env.url, tmp_path)) as (base, _):
        opened: list[socket.socket] = []
        refused = 0
        try:
            for _ in range(1000):
                s = connect(base)
                opened.append(s)
                try:
                    s.sendall(head_of("POST", "/api/v2/login", {}, 1000) + b"{")
                except OSError:
                    refused += 1  # closed already, refused
            other = httpx.Client(
                transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=5
            )
            with other:
                read = other.get(base + AGG, headers=env.signed_headers("GET", AGG))
            for s in opened:  # what the server said to each of the thousand, if anything
                s.settimeout(0.01)
                try:
                    refused += s.recv(64).startswith(b"HTTP/1.1 503")
                except TimeoutError:
                    pass
                except OSError:
                    refused += 1
        finally:
            for s in opened:
                s.close()
    assert read.status_code == 200, read.text
    assert refused >= 900  # all but the 100 an address may hold (the default)


def open_slow(base: str, sources: list[str], each: int, head: bytes) -> list[socket.socket]:
    """`each` connections from every source address, each sending `head` and no more; a
    connection the server refused or shed on the way is kept too."""
    opened: list[socket.socket] = []
    for source in sources:
        for _ in range(each):
            s = connect(base, source)
            opened.append(s)
            with contextlib.suppress(OSError):  # shed already
                s.sendall(head)
    return opened


def readable(s: socket.socket) -> bool:
    """Whether a read of the socket would not wait: an answer, the end, or an error."""
    return bool(select.select([s], [], [], 0)[0])


def answers_to(opened: list[socket.socket]) -> list[int]:
    """The status the server gave each connection, if any yet (0: none, -1: reset)."""
    statuses = []
    for s in opened:
        s.settimeout(0.01)
        try:
            received = s.recv(64)
            statuses.append(int(received.split()[1]) if received else -1)
        except TimeoutError:
            statuses.append(0)
        except OSError:
            statuses.append(-1)
    return statuses


@pytest.mark.usefixtures("more_open_files")
@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_thousand_slow_connections_from_ten_addresses_leave_room_for_a_client(
    make_env: Callable[..., Env], tmp_path: Path
) -> None:
    """1,000 connections from ten loopback addresses (the cap per address, 100, each), half
    trickling their headers and half their bodies: a client's reads, each on a connection of
    its own, are all answered. Before the slow ones were shed, the thousand filled every
    connection the server allows and 92% of the client's requests were refused with 503."""
    env = make_env()
    env.create_admin()
    sources = [f"127.0.0.{n}" for n in range(2, 12)]
    with served(server_environment(env.url, tmp_path)) as (base, _):
        opened = open_slow(base, sources[:5], 100, b"GET /api/v2/self HTTP/1.1\r\nHost: x\r\n")
        body = head_of("POST", "/api/v2/login", {}, 1000) + b"{"
        opened += open_slow(base, sources[5:], 100, body)
        try:
            no_keep_alive = httpx.Limits(max_keepalive_connections=0)
            with httpx.Client(limits=no_keep_alive, timeout=5) as client:
                statuses = [
                    client.get(base + AGG, headers=env.signed_headers("GET", AGG)).status_code
                    for _ in range(20)
                ]
            told = answers_to(opened)
        finally:
            for s in opened:
                s.close()
    assert statuses == [200] * 20
    # The default cap of 500 connections waiting on their clients shed the oldest 500 as the
    # thousand arrived, and each of the client's connections one more.
    assert told.count(408) >= 500, {status: told.count(status) for status in set(told)}


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_behind_a_proxy_slow_bodies_count_per_forwarded_address(
    make_env: Callable[..., Env], tmp_path: Path
) -> None:
    """Behind a trusted proxy every connection comes from it: one forwarded address's slow
    bodies past its cap shed its own silent longest, and another address's read is
    answered."""
    env = make_env()
    env.create_admin()
    environment = server_environment(
        env.url, tmp_path, trusted_proxies="1", max_connections_per_client="5"
    )
    with served(environment) as (base, _):
        forwarded = {"X-Forwarded-For": "203.0.113.7"}
        opened = open_slow(base, ["127.0.0.1"], 8, head_of("POST", "/api/v2/login", forwarded, 99))
        try:
            other = {"X-Forwarded-For": "203.0.113.9", **env.signed_headers("GET", AGG)}
            with httpx.Client(timeout=5) as client:
                read = client.get(base + AGG, headers=other)
            # The three shed ones' answers have arrived (the server wrote them as the sixth,
            # seventh and eighth connections came, before the read).
            wait_until(lambda: all(map(readable, opened[:3])), what="the shed ones' answers")
            told = answers_to(opened)
        finally:
            for s in opened:
                s.close()
    assert read.status_code == 200, read.text
    assert told == [408] * 3 + [0] * 5  # the first three shed: the address holds five


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_an_upload_sent_in_bursts_outlasts_trickling_connections(
    make_env: Callable[..., Env], tmp_path: Path
) -> None:
    """With the waiting connections at their cap and new trickling ones arriving, the one
    shed is the slowest, not the one silent longest: an upload that pauses half a second
    between bursts of 256 KiB (as a client reading its file does) is not shed. Before, it
    was, at its first pause, whatever it had sent."""
    env = make_env()
    env.create_admin()
    environment = server_environment(env.url, tmp_path, max_waiting_connections="10")
    with served(environment) as (base, _), httpx.Client(base_url=base, timeout=30) as client:
        start = f"{JOBS}/start"
        started = client.post(start, headers=signed_headers(env.token, "POST", start))
        uri = f"{JOBS}/{started.json()['data']['id']}"
        body = b'{"data": "' + b"x" * (1 << 20) + b'"}'
        headers = {
            **signed_headers(env.token, "POST", uri, body=body),
            "Content-Type": "application/json",
        }

        def bursts() -> Iterator[bytes]:
            for offset in range(0, len(body), 256 << 10):
                yield body[offset : offset + (256 << 10)]
                time.sleep(0.5)  # not an event: the client's pause, what is tested

        outcome: list[object] = []

        def upload() -> None:
            try:
                outcome.append(client.post(uri, content=bursts(), headers=headers).status_code)
            except httpx.HTTPError as exc:
                outcome.append(exc)

        sender = threading.Thread(target=upload)
        trickling: list[socket.socket] = []
        sender.start()
        try:
            started_at = time.monotonic()
            while sender.is_alive() and time.monotonic() - started_at < 20:
                trickling.append(connect(base, "127.0.0.2"))
                trickling[-1].sendall(b"GET /health HTTP/1.1\r\nX-Pad: ")
                for s in trickling:
                    with contextlib.suppress(OSError):  # shed
                        s.send(b"a")  # a header that never ends
                time.sleep(0.2)  # not an event: the trickling clients' pace
            sender.join(10)
            told = answers_to(trickling)
        finally:
            for s in trickling:
                s.close()
    assert outcome == [202]
    assert told.count(408) >= 1  # the trickling ones made room


# --- uploads: refused from their headers --------------------------------------------------


def refused_before_the_body(base: str, uri: str, headers: dict[str, str]) -> tuple[int, str]:
    """Send an upload's headers, announcing 50 MB, and no body: the answer must come anyway."""
    with connect(base) as s:
        s.sendall(head_of("POST", uri, {**headers, "Content-Type": "application/json"}, 50 << 20))
        status, body = read_answer(s)
    return status, body["errors"][0]["message"]


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_an_upload_is_refused_from_its_headers_before_its_body(
    make_env: Callable[..., Env], tmp_path: Path
) -> None:
    env = make_env()
    env.create_admin()
    reader = env.user_with_token("reader", "Read-Only")
    uploader = env.user_with_token("collector", "Upload-Only")
    with served(server_environment(env.url, tmp_path)) as (base, _):

        def start_job(token: tokens.CreatedToken) -> int:
            uri = f"{JOBS}/start"
            started = httpx.post(base + uri, headers=signed_headers(token, "POST", uri))
            assert started.status_code == 201, started.text
            job_id: int = started.json()["data"]["id"]
            return job_id

        admins_job, own_job = start_job(env.token), start_job(uploader)
        ended = start_job(env.token)

        def post(job_id: int, token: tokens.CreatedToken) -> tuple[int, str]:
            uri = f"{JOBS}/{job_id}"
            return refused_before_the_body(base, uri, signed_headers(token, "POST", uri))

        unknown = tokens.CreatedToken(str(uuid.uuid4()), "not-a-key", None)
        assert post(own_job, unknown) == (401, "unknown token id")
        status, message = post(own_job, reader)
        assert (status, message) == (403, "permission graphdb/Ingest is required")
        status, message = post(admins_job, uploader)  # another user's job
        assert (status, message) == (404, f"no file-upload job {admins_job}")
        with httpx.Client(base_url=base) as client:  # a job that has ended takes no file
            uri = f"{JOBS}/{ended}"
            sent = client.post(
                uri,
                content=b"{}",
                headers={
                    **signed_headers(env.token, "POST", uri, body=b"{}"),
                    "Content-Type": "application/json",
                },
            )
            assert sent.status_code == 202, sent.text
            end = f"{uri}/end"
            assert client.post(end, headers=signed_headers(env.token, "POST", end)).is_success
        status, message = post(ended, env.token)
        assert status == 400 and "not Running" in message


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_a_large_file_signed_for_a_job_its_token_did_not_start_is_refused_from_its_headers(
    make_env: Callable[..., Env], tmp_path: Path
) -> None:
    """A signature covers the body, so it is checked once the body is in: a client with a
    token's id and no key could have the server receive a whole file first. A file over
    64 KiB signed with a token is taken only for a job that token started."""
    env = make_env()
    env.create_admin()
    large = b'{"data": "' + b"x" * (100 << 10) + b'"}'
    with (
        served(server_environment(env.url, tmp_path)) as (base, _),
        httpx.Client(base_url=base) as client,
    ):
        jwt = client.post(
            "/api/v2/login",
            json={"login_method": "secret", "username": "admin", "secret": "admin-secret"},
        ).json()["data"]["session_token"]
        session = {"Authorization": f"Bearer {jwt}"}
        started = client.post(f"{JOBS}/start", headers=session)
        assert started.status_code == 201, started.text
        uri = f"{JOBS}/{started.json()['data']['id']}"
        forged = tokens.CreatedToken(env.token.id, "not-its-key", None)
        for token in (forged, env.token):  # refused before a byte of the 50 MB is sent
            status, message = refused_before_the_body(base, uri, signed_headers(token, "POST", uri))
            assert status == 401 and "only for a job started with that token" in message

        def send(uri: str, body: bytes) -> httpx.Response:
            headers = {
                **signed_headers(env.token, "POST", uri, body=body),
                "Content-Type": "application/json",
            }
            return client.post(uri, content=body, headers=headers)

        assert send(uri, b"{}").status_code == 202  # small: its signature checked at its end
        own = f"{JOBS}/start"
        started = client.post(own, headers=signed_headers(env.token, "POST", own))
        mine = f"{JOBS}/{started.json()['data']['id']}"
        sent = send(mine, large)  # a job the token started takes its large files
        assert sent.status_code == 202, sent.text
        check_against_openapi("POST", f"{JOBS}/{{file_upload_job_id}}", sent)


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_a_full_disk_while_a_file_arrives_is_507_and_keeps_nothing(
    monkeypatch: pytest.MonkeyPatch, env: Env
) -> None:
    spools: list[FullDisk] = []

    class FullDisk:
        """A spool file on a disk that is full."""

        def __init__(self, **_: Any) -> None:
            self.closed = False
            spools.append(self)

        def write(self, data: bytes) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        def __enter__(self) -> FullDisk:
            return self

        def __exit__(self, *_: object) -> None:
            self.closed = True

    job = env.request("POST", f"{JOBS}/start", env.signed_headers("POST", f"{JOBS}/start"))
    uri = f"{JOBS}/{job.json()['data']['id']}"
    monkeypatch.setattr(tempfile, "TemporaryFile", FullDisk)  # the spool of uploads
    body = b"[" + b"1," * 200_000 + b"1]"

    def pieces() -> Iterator[bytes]:
        for i in range(0, len(body), 65536):
            yield body[i : i + 65536]

    response = env.client.post(
        uri,
        content=pieces(),
        headers={
            **env.signed_headers("POST", uri, body=body),
            "Content-Type": "application/json",
        },
    )
    assert response.status_code == 507, response.text
    assert "disk is full" in response.json()["errors"][0]["message"]
    check_against_openapi("POST", f"{JOBS}/{{file_upload_job_id}}", response)
    assert spools and all(s.closed for s in spools)  # the partial file is dropped
    listed = env.get(f"{JOBS}?id={job.json()['data']['id']}").json()["data"][0]
    assert listed["total_files"] == 0


# --- the HTTP edge ------------------------------------------------------------------------


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_client_that_writes_its_whole_body_first_sees_the_413(
    database_url: str, tmp_path: Path
) -> None:
    """http.client sends all 10 MB before it reads; the server answers 413 at once and then
    reads and drops the rest, instead of resetting a connection the client still writes to."""
    with served(server_environment(database_url, tmp_path)) as (base, _):
        host, port = base.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request(
            "POST", "/api/v2/login", body=b"x" * (10 << 20), headers={"Content-Type": "json"}
        )
        response = connection.getresponse()
        body = json.loads(response.read())
        connection.close()
    assert response.status == 413
    assert body["errors"][0]["message"] == "request body is larger than 16384 bytes"


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_websocket_upgrade_is_refused_with_the_json_body(
    database_url: str, tmp_path: Path
) -> None:
    upgrade = {
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
    }
    with served(server_environment(database_url, tmp_path)) as (base, _):
        with connect(base) as s:
            lines = ["GET /api/v2/login HTTP/1.1", "Host: graphsvc"]
            lines += [f"{name}: {value}" for name, value in upgrade.items()]
            s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            status, body = read_answer(s)
        # Another upgrade (h2c, as curl --http2 offers it) is ignored: answered over HTTP/1.1.
        h2c = httpx.get(
            base + "/health",
            headers={"Upgrade": "h2c", "Connection": "Upgrade, HTTP2-Settings"},
        )
    assert status == 400
    assert body["errors"][0] == {
        "context": "Upgrade",
        "message": "WebSocket is not served: this API answers plain HTTP/1.1 requests",
    }
    assert body["http_status"] == 400 and body["request_id"]
    assert datetime.fromisoformat(body["timestamp"]) <= datetime.now(UTC)
    assert h2c.status_code == 200
