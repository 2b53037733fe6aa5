"""File-upload jobs against served processes: two replicas sharing one job, a replica killed
mid-ingest, bodies streamed in pieces, and the `graphsvc upload` client."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import termios
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from bench.shapes import LargeDomain
from graphsvc.accounts import tokens, users
from graphsvc.crypto import KeyBox
from graphsvc.signatures import body_signer, encode_signature
from graphsvc.store.db import Connection, run_in_transaction
from graphsvc.uploads import jobs
from graphsvc.uploads.ingester import MAX_ATTEMPTS
from tests.conftest import (
    FIXTURES,
    TEST_FERNET_KEY,
    peak_memory_kib,
    served,
    server_environment,
    signed_headers,
    wait_until,
)

V6 = FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "ingest"
JOBS = "/api/v2/file-upload"
FAST_WORKER = {"ingest_poll_seconds": "0.1", "ingest_lease_seconds": "2"}


class Client:
    """Signed requests of one token to one or more served processes."""

    def __init__(self, token: tokens.CreatedToken) -> None:
        self.token = token

    def headers(self, method: str, uri: str, body: bytes = b"") -> dict[str, str]:
        return signed_headers(self.token, method, uri, body=body)

    def call(self, base: str, method: str, uri: str) -> Any:
        response = httpx.request(method, base + uri, headers=self.headers(method, uri), timeout=30)
        assert response.status_code < 300, response.text
        return response.json()["data"]

    def send(self, base: str, job_id: int, path: Path) -> httpx.Response:
        """The file in 64 KiB pieces, as a collector on a slow link would send it."""
        uri = f"{JOBS}/{job_id}"
        date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        signer = body_signer(self.token.key, "POST", uri, date)
        signer.update(path.read_bytes())
        headers = {
            "Authorization": f"svcsignature {self.token.id}",
            "RequestDate": date,
            "Signature": encode_signature(signer.digest()),
            "Content-Type": "application/json",
            "Content-Disposition": f'attachment; filename="{path.name}"',
        }
        return httpx.post(base + uri, content=pieces(path), headers=headers, timeout=60)

    def wait(self, base: str, job_id: int, until: tuple[int, ...] = (2, 4, 5)) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            job: dict[str, Any] = self.call(base, "GET", f"{JOBS}?id={job_id}")[0]
            return job if job["status"] in until else None

        return wait_until(reached, timeout=180, what=f"job {job_id} to reach a status of {until}")


def assert_graph_as_ingested(database_url: str, collection: Path, tmp_path: Path) -> None:
    """The store holds the graph `graphsvc ingest` makes of `collection` on a clean store."""
    clean = f"sqlite:///{tmp_path / 'clean.sqlite3'}"
    subprocess.run(
        [sys.executable, "-m", "graphsvc", "ingest", str(collection)],
        env={**os.environ, **server_environment(clean, tmp_path / "clean")},
        check=True,
        capture_output=True,
    )
    assert fingerprint(database_url) == fingerprint(clean)


def pieces(path: Path, size: int = 64 * 1024) -> Iterator[bytes]:
    with path.open("rb") as stream:
        while chunk := stream.read(size):
            yield chunk


def create_uploader(database_url: str) -> tokens.CreatedToken:
    keys = KeyBox(TEST_FERNET_KEY.encode())

    async def work(conn: Connection) -> tokens.CreatedToken:
        await users.create_user(conn, "collector", "Upload-Only", None, False)
        return await tokens.create_user_token(conn, keys, "collector")

    return asyncio.run(run_in_transaction(database_url, work))


def fetch(database_url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    async def work(conn: Connection) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in await conn.fetch(sql, *args)]

    return asyncio.run(run_in_transaction(database_url, work))


def fingerprint(database_url: str) -> dict[str, Any]:
    """What a clean run and a recovered one must agree on: the graph's size, its kinds and
    the run's statistics."""
    run_id = fetch(database_url, "SELECT id FROM ingest_runs")
    assert len(run_id) == 1, run_id
    return {
        "nodes": fetch(database_url, "SELECT count(*) FROM nodes"),
        "edges": fetch(database_url, "SELECT count(*) FROM edges"),
        "kinds": fetch(
            database_url,
            """SELECT k.name, count(*) FROM node_kinds nk JOIN kinds k ON k.id = nk.kind_id
            GROUP BY k.name ORDER BY k.name""",
        ),
        "statistics": fetch(
            database_url,
            """SELECT metric_type, metric_name, metric_value FROM data_quality_aggregations
            WHERE run_id = $1 ORDER BY metric_type, metric_name""",
            str(run_id[0][0]),
        ),
    }


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_two_replicas_share_one_job_and_ingest_it_once(database_url: str, tmp_path: Path) -> None:
    client = Client(create_uploader(database_url))
    files = sorted(V6.glob("*.json"))
    with contextlib.ExitStack() as stack:
        bases = [
            stack.enter_context(
                served(server_environment(database_url, tmp_path / f"r{i}", **FAST_WORKER))
            )[0]
            for i in range(2)
        ]
        job_id = client.call(bases[0], "POST", f"{JOBS}/start")["id"]
        for i, path in enumerate(files):  # every other file to the other replica
            sent = client.send(bases[i % 2], job_id, path)
            assert sent.status_code == 202, sent.text
        client.call(bases[1], "POST", f"{JOBS}/{job_id}/end")
        job = client.wait(bases[0], job_id)
        assert job["status"] == 2, job["status_message"]
        assert [f["name"] for f in job["files"]] == [p.name for p in files]
        # Not an event: the workers poll every 0.1 s, and none may take the job again; in
        # this time each polls a few times, and a job ingested twice would show.
        time.sleep(0.5)
    assert fetch(database_url, "SELECT attempts FROM file_upload_jobs") == [(1,)]
    assert len(fetch(database_url, "SELECT id FROM ingest_runs")) == 1


def ingest_writing(database_url: str) -> Callable[[], bool]:
    """Whether an ingest's transaction, not committed yet, is writing the store: on
    PostgreSQL the table of nodes has grown; on SQLite the write lock is held, and still
    0.1 s later (the other writes here hold it for a moment)."""
    if database_url.startswith("postgresql"):
        return lambda: fetch(database_url, "SELECT pg_relation_size('nodes')")[0][0] > 0
    path = database_url.removeprefix("sqlite:///")
    held_since: list[float] = []

    def write_lock_held() -> bool:
        with contextlib.closing(sqlite3.connect(path, timeout=0, isolation_level=None)) as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                assert "locked" in str(exc), exc
                return True
            conn.execute("ROLLBACK")
            return False

    def held() -> bool:
        if not write_lock_held():
            held_since.clear()
            return False
        held_since[:] = held_since or [time.monotonic()]
        return time.monotonic() - held_since[0] >= 0.1

    return held


@pytest.fixture
def large_collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated collection big enough that its ingest takes seconds (about 17 MB)."""
    folder = tmp_path_factory.mktemp("large")
    LargeDomain.of_size("KILL.LOCAL", "S-1-5-21-77-77-77", 6000).write(folder)
    return folder


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_a_job_whose_replica_is_killed_mid_ingest_is_ingested_again_all_or_nothing(
    database_url: str, tmp_path: Path, large_collection: Path
) -> None:
    client = Client(create_uploader(database_url))
    environment = server_environment(database_url, tmp_path, **FAST_WORKER)
    with served(environment) as (base, process):
        job_id = client.call(base, "POST", f"{JOBS}/start")["id"]
        for path in sorted(large_collection.glob("*.json")):
            assert client.send(base, job_id, path).status_code == 202
        client.call(base, "POST", f"{JOBS}/{job_id}/end")

        def taken() -> dict[str, Any] | None:
            job: dict[str, Any] = client.call(base, "GET", f"{JOBS}?id={job_id}")[0]
            return job if job["status_message"].startswith("ingesting on") else None

        job = wait_until(taken, timeout=30, what="the worker to take the job")
        assert f":{process.pid}:" in job["status_message"], job
        # Into the ingest (it takes seconds): its transaction writes the graph.
        wait_until(ingest_writing(database_url), timeout=60, what="the ingest's writes")
        assert client.call(base, "GET", f"{JOBS}?id={job_id}")[0]["status"] == 6
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
    assert fetch(database_url, "SELECT count(*) FROM nodes") == [(0,)], "nothing half-written"

    orphaned = list(Path(environment["TMPDIR"]).glob(f"graphsvc-job-{process.pid}-*"))
    assert orphaned, "the killed worker left the job's files in its folder"
    with served(environment) as (base, _):  # a replica that lives: it takes the job over
        job = client.wait(base, job_id)
    assert not any(folder.exists() for folder in orphaned), "removed at the next start"
    assert job["status"] == 2, job["status_message"]
    assert fetch(database_url, "SELECT attempts FROM file_upload_jobs") == [(2,)]

    assert_graph_as_ingested(database_url, large_collection, tmp_path)


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_a_large_body_streams_through_the_signature_check(
    database_url: str, tmp_path: Path
) -> None:
    """64 MB in pieces: the server's peak memory barely moves; a body whose signature fails
    at its very last byte is a 401 and leaves nothing."""
    client = Client(create_uploader(database_url))
    big = tmp_path / "big.json"
    with big.open("wb") as out:  # valid JSON, so the byte count is what matters
        out.write(b'{"meta": {"type": "users", "count": 0, "version": 6}, "data": [], "pad": "')
        out.write(b"x" * (64 * 1024 * 1024))
        out.write(b'"}')
    environment = server_environment(database_url, tmp_path, ingester="false")
    with served(environment) as (base, process):
        job_id = client.call(base, "POST", f"{JOBS}/start")["id"]
        before = peak_memory_kib(process.pid)
        sent = client.send(base, job_id, big)
        assert sent.status_code == 202, sent.text
        assert sent.json()["data"]["total_bytes"] == big.stat().st_size
        assert peak_memory_kib(process.pid) - before < 40 * 1024

        uri = f"{JOBS}/{job_id}"
        headers = {
            **client.headers("POST", uri, b"not the body"),
            "Content-Type": "application/json",
        }
        refused = httpx.post(base + uri, content=pieces(big), headers=headers, timeout=60)
        assert refused.status_code == 401
    assert fetch(database_url, "SELECT count(*) FROM file_upload_files") == [(1,)]
    assert fetch(database_url, "SELECT count(*) FROM file_upload_chunks") == [(64 + 1,)]


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_the_upload_command_sends_a_folder_and_follows_the_job(
    database_url: str, tmp_path: Path
) -> None:
    token = create_uploader(database_url)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "users.json").write_bytes((V6 / "users.json").read_bytes()[:3000])
    with served(server_environment(database_url, tmp_path, **FAST_WORKER)) as (base, _):
        command = [sys.executable, "-m", "graphsvc", "upload", "--url", base, "--wait"]
        environment = {**os.environ, "GRAPHSVC_TOKEN_ID": token.id}
        done = subprocess.run(
            [*command, "--token-key-stdin", str(V6)],
            env=environment,
            input=token.key + "\n",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["status"] == 2 and result["run_id"]
        assert "ingested 9 documents" in result["status_message"]
        assert "sent 9 files" in done.stderr

        failed = subprocess.run(
            [*command, str(broken)],
            env={**environment, "GRAPHSVC_TOKEN_KEY": token.key},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert failed.returncode == 1
        assert (
            failed.stderr.strip()
            .splitlines()[-1]
            .startswith("graphsvc: error: file-upload job 2 Failed: users.json: not valid JSON")
        ), failed.stderr

        wrong = subprocess.run(
            [*command, str(V6)],
            env={**environment, "GRAPHSVC_TOKEN_KEY": "not-the-key"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert wrong.returncode == 1
        assert "HTTP 401: invalid signature or unknown token id" in wrong.stderr


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_the_upload_command_refuses_a_file_over_the_servers_limit_before_hashing_it(
    database_url: str, tmp_path: Path
) -> None:
    """The job start's answer tells the limit: a larger file ends the command, naming the
    file and the limit, before any is hashed or sent, and the job it started is Canceled,
    not left Running."""
    token = create_uploader(database_url)
    settings = {**FAST_WORKER, "max_upload_bytes": "2000"}
    with served(server_environment(database_url, tmp_path, **settings)) as (base, _):
        refused = subprocess.run(
            [sys.executable, "-m", "graphsvc", "upload", "--url", base, str(V6)],
            env={**os.environ, "GRAPHSVC_TOKEN_ID": token.id, "GRAPHSVC_TOKEN_KEY": token.key},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert refused.returncode == 1
    assert "bytes is more than the server takes in one upload (2,000 bytes" in refused.stderr
    assert "GRAPHSVC_MAX_UPLOAD_BYTES" in refused.stderr and "uploading" not in refused.stderr
    assert "file-upload job 1 canceled" in refused.stderr
    assert fetch(database_url, "SELECT status, end_time IS NOT NULL FROM file_upload_jobs") == [
        (3, True)
    ]
    assert fetch(database_url, "SELECT count(*) FROM file_upload_chunks") == [(0,)]


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_the_upload_command_stopped_by_sigterm_cancels_its_job(
    database_url: str, tmp_path: Path
) -> None:
    token = create_uploader(database_url)
    big = tmp_path / "big.json"
    big.write_bytes(b"[" + b" " * (256 * 1024 * 1024))  # hashed, then sent, for a few seconds
    with served(server_environment(database_url, tmp_path, **FAST_WORKER)) as (base, _):
        process = subprocess.Popen(
            [sys.executable, "-m", "graphsvc", "upload", "--url", base, str(big)],
            env={**os.environ, "GRAPHSVC_TOKEN_ID": token.id, "GRAPHSVC_TOKEN_KEY": token.key},
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stderr is not None
        assert "started" in process.stderr.readline()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "file-upload job 1 canceled" in stderr and "graphsvc: error: interrupted" in stderr
    assert "Traceback" not in stderr
    assert fetch(database_url, "SELECT status FROM file_upload_jobs") == [(3,)]


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_the_upload_command_stopped_while_waiting_says_the_job_goes_on(
    database_url: str, tmp_path: Path
) -> None:
    """Once a job is sent whole it can no longer be canceled: a stop while `--wait` follows
    it ends the waiting, says so and how to follow the job, and leaves the job queued. (The
    server ingests nothing here, so the job is still queued when the signal comes.)"""
    token = create_uploader(database_url)
    with served(server_environment(database_url, tmp_path, ingester="false")) as (base, _):
        process = subprocess.Popen(
            [sys.executable, "-m", "graphsvc", "upload", "--wait", "--url", base, str(V6)],
            env={**os.environ, "GRAPHSVC_TOKEN_ID": token.id, "GRAPHSVC_TOKEN_KEY": token.key},
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stderr is not None
        while "is queued" not in (line := process.stderr.readline()):
            assert line, "the command ended before its job was queued"
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "stopped waiting; file-upload job 1 was sent whole and will still be ingested" in stderr
    assert "canceled" not in stderr and "Traceback" not in stderr
    assert fetch(database_url, "SELECT status FROM file_upload_jobs") == [(6,)]


def upload_to_a_listener(*paths: Path) -> tuple[subprocess.CompletedProcess[str], list[bytes]]:
    """`graphsvc upload PATHS` run against a socket that answers every request 401: the
    command's result and the request lines it received. (In a process of its own: a
    command run in this one leaves SIGTERM blocked, and the servers later tests start
    would inherit that.)"""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    received: list[bytes] = []
    done = threading.Event()

    def refuse() -> None:
        with listener:
            while not done.is_set():
                try:
                    client = listener.accept()[0]
                except TimeoutError:
                    continue
                with client:
                    received.append(client.recv(65536).split(b"\r\n", 1)[0])
                    body = b'{"errors": [{"context": "auth", "message": "refused here"}]}'
                    client.sendall(
                        b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
                    )

    refuser = threading.Thread(target=refuse)
    refuser.start()
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        result = subprocess.run(
            [sys.executable, "-m", "graphsvc", "upload", "--url", url, "--timeout", "5"]
            + [str(path) for path in paths],
            env={
                **os.environ,
                "GRAPHSVC_TOKEN_ID": str(uuid.uuid4()),
                "GRAPHSVC_TOKEN_KEY": "token-key",
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        done.set()
        refuser.join()
    return result, received


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("notes.txt", b"meeting notes\n"),
        ("users.json", b""),
        ("blank.json", b" \r\n\t" * 1000),
        ("computers.json", b'\xef\xbb\xbf  "a string"'),
        ("collection.zip", b"not a zip at all"),
    ],
)
def test_the_upload_command_refuses_a_file_not_collector_json_or_a_zip_before_any_job(
    tmp_path: Path, name: str, content: bytes
) -> None:
    """One error line names the file and what is taken, and no request is sent: no job is
    started that the server would fail."""
    path = tmp_path / name
    path.write_bytes(content)
    result, received = upload_to_a_listener(path)
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        f"graphsvc: error: {path}: not collector JSON or a zip "
        "file; upload takes JSON files (starting with { or [), zip files, and folders of .json "
        "and .zip files"
    ]
    assert received == []


def test_the_upload_command_takes_json_and_zips_by_their_content_and_folders_as_before(
    tmp_path: Path,
) -> None:
    """Whatever their names: JSON past a byte-order mark and blanks, and a zip. A folder
    still sends its .json and .zip files, unread, and leaves the rest."""
    (tmp_path / "export.txt").write_bytes(b'\xef\xbb\xbf \n [{"meta": {}}]')
    with zipfile.ZipFile(tmp_path / "collection.bin", "w") as archive:
        archive.writestr("users.json", "{}")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "users.json").write_bytes(b"")
    (folder / "notes.txt").write_bytes(b"not sent")
    result, received = upload_to_a_listener(
        tmp_path / "export.txt", tmp_path / "collection.bin", folder
    )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "graphsvc: error: POST /api/v2/file-upload/start: HTTP 401: refused here"
    ]
    assert received == [b"POST /api/v2/file-upload/start HTTP/1.1"]


def unread_bytes(s: socket.socket) -> int:
    """The bytes received on the socket that were not read yet."""
    found: int = struct.unpack("i", fcntl.ioctl(s, termios.FIONREAD, b"\0" * 4))[0]
    return found


def test_the_upload_client_reports_the_answer_of_a_server_that_stops_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server (or proxy) that answers 413 at once and closes: the client, still sending,
    reports that answer, not the connection reset."""
    from graphsvc.cli.upload import Server

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    failed: list[BaseException] = []

    def refuse_one() -> None:
        with listener, listener.accept()[0] as client:
            client.recv(65536)  # the headers, and perhaps a little of the body
            body = b'{"errors": [{"context": "body", "message": "request body is too large"}]}'
            client.sendall(
                b"HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
            )
            client.shutdown(socket.SHUT_WR)
            # The client goes on sending its body; closed with those bytes unread, the
            # connection is reset.
            try:
                wait_until(lambda: unread_bytes(client) >= 16 * 1024, what="more of the body")
            except AssertionError as exc:
                failed.append(exc)

    refuser = threading.Thread(target=refuse_one)
    refuser.start()
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (64 * 1024 * 1024))
    server = Server(f"http://127.0.0.1:{port}", "token-id", "token-key", 30)
    with pytest.raises(SystemExit):
        server.send_file("/api/v2/file-upload/1", big, lambda n: None)
    refuser.join()
    assert not failed, failed
    said = capsys.readouterr().err
    assert "HTTP 413: request body is too large" in said, said


def test_a_job_stays_alive_while_a_slow_file_arrives(database_url: str, tmp_path: Path) -> None:
    """The job timeout (3 s here) counts from the client's last sign of life, and a file
    still arriving is one: a file that takes twice the timeout to send is taken, and the
    job times out only once its client is silent."""
    client = Client(create_uploader(database_url))
    settings = {**FAST_WORKER, "upload_job_timeout_seconds": "3", "body_timeout_seconds": "5"}
    data = (V6 / "users.json").read_bytes()
    parts = [data[i : i + 4096] for i in range(0, len(data), 4096)]
    pause = 6.0 / len(parts)  # about 6 s in all

    def trickle() -> Iterator[bytes]:
        for part in parts:
            time.sleep(pause)  # not an event: a slow client, what is tested
            yield part

    with served(server_environment(database_url, tmp_path, **settings)) as (base, _):
        job_id = client.call(base, "POST", f"{JOBS}/start")["id"]
        uri = f"{JOBS}/{job_id}"
        headers = {**client.headers("POST", uri, data), "Content-Type": "application/json"}
        slow = httpx.post(base + uri, content=trickle(), headers=headers, timeout=60)
        assert slow.status_code == 202, slow.text
        assert client.call(base, "GET", f"{JOBS}?id={job_id}")[0]["status"] == 1
        job = client.wait(base, job_id, until=(2, 3, 4, 5))
    assert job["status"] == 4, job
    assert job["status_message"] == "its client was silent for too long; start a new job"


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_slow_body_is_taken_while_it_keeps_coming_and_cut_off_when_it_stalls(
    database_url: str, tmp_path: Path
) -> None:
    """The Prefer timeout (1 s here) starts once the body is in; a pause longer than the
    body timeout (1 s) ends the request."""
    client = Client(create_uploader(database_url))
    settings = {"body_timeout_seconds": "1", "default_wait_seconds": "1", "max_wait_seconds": "1"}
    data = (V6 / "users.json").read_bytes()
    parts = [data[i : i + 8192] for i in range(0, len(data), 8192)]

    def trickle(pause: float, stall_at: int | None = None) -> Iterator[bytes]:
        for i, part in enumerate(parts):
            time.sleep(2.0 if i == stall_at else pause)  # not an event: what is tested
            yield part

    with served(server_environment(database_url, tmp_path, **settings)) as (base, _):
        job_id = client.call(base, "POST", f"{JOBS}/start")["id"]
        uri = f"{JOBS}/{job_id}"
        headers = {**client.headers("POST", uri, data), "Content-Type": "application/json"}
        slow = httpx.post(base + uri, content=trickle(0.4), headers=headers, timeout=60)
        assert slow.status_code == 202, slow.text  # about 3 s in all, never 1 s without data
        stalled = httpx.post(
            base + uri, content=trickle(0.25, stall_at=3), headers=headers, timeout=60
        )
        assert stalled.status_code == 408
        assert stalled.json()["errors"][0]["message"] == "the request body stalled for 1 s"
    assert fetch(database_url, "SELECT count(*) FROM file_upload_files") == [(1,)]


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_a_job_cut_off_on_its_last_attempt_fails_and_drops_its_files(
    database_url: str, tmp_path: Path
) -> None:
    """A job whose ingest was cut off MAX_ATTEMPTS times (its replicas died, or found their
    disk full) is not tried again for ever: the next replica to take it fails it, saying
    why, drops its files' bytes and writes nothing to the graph."""
    client = Client(create_uploader(database_url))
    receiving = server_environment(database_url, tmp_path / "in", ingester="false")
    with served(receiving) as (base, _):
        job_id = client.call(base, "POST", f"{JOBS}/start")["id"]
        assert client.send(base, job_id, V6 / "domains.json").status_code == 202
        client.call(base, "POST", f"{JOBS}/{job_id}/end")
    fetch(database_url, "UPDATE file_upload_jobs SET attempts = $1", MAX_ATTEMPTS)
    with served(server_environment(database_url, tmp_path / "worker", **FAST_WORKER)) as (
        base,
        _,
    ):
        job = client.wait(base, job_id)
    assert job["status"] == 5, job
    assert job["status_message"].startswith(f"the ingest was cut off {MAX_ATTEMPTS} times")
    assert fetch(database_url, "SELECT attempts FROM file_upload_jobs") == [(MAX_ATTEMPTS + 1,)]
    assert fetch(database_url, "SELECT count(*) FROM file_upload_chunks") == [(0,)]
    assert fetch(database_url, "SELECT count(*) FROM nodes") == [(0,)]


def test_an_upload_still_arriving_when_the_grace_ends_gets_json_and_its_job_fails(
    database_url: str, tmp_path: Path
) -> None:
    """A file that keeps coming, slowly, past the shutdown grace (3 s here): its request is
    answered the JSON 503 before the server exits, and its job fails at once saying why (the
    grace's end cancelled it into a plain-text 500 and left the job running)."""
    client = Client(create_uploader(database_url))
    settings = {"shutdown_grace_seconds": "3", "body_timeout_seconds": "5"}
    data = (V6 / "users.json").read_bytes()
    parts = [data[i : i + 1024] for i in range(0, len(data), 1024)]
    started = threading.Event()

    def trickle() -> Iterator[bytes]:
        for part in parts:
            started.set()
            time.sleep(0.25)  # not an event: a slow client past the grace, what is tested
            yield part

    with served(server_environment(database_url, tmp_path, **settings)) as (base, process):
        job_id = client.call(base, "POST", f"{JOBS}/start")["id"]
        uri = f"{JOBS}/{job_id}"
        headers = {**client.headers("POST", uri, data), "Content-Type": "application/json"}
        answers: list[httpx.Response] = []
        sending = threading.Thread(
            target=lambda: answers.append(
                httpx.post(base + uri, content=trickle(), headers=headers, timeout=60)
            )
        )
        sending.start()
        assert started.wait(10)
        time.sleep(0.5)  # the body is arriving
        process.send_signal(signal.SIGTERM)
        sending.join(30)
        assert process.wait(30) == 0
    assert len(answers) == 1
    cut = answers[0]
    assert cut.status_code == 503, cut.text
    assert cut.json()["errors"][0]["context"] == "shutdown"
    status, message = fetch(
        database_url, "SELECT status, status_message FROM file_upload_jobs WHERE id = $1", job_id
    )[0]
    assert (status, message) == (5, jobs.STOPPED_MESSAGE)
