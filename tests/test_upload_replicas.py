"""File-upload jobs against served processes: two replicas sharing one job, a replica killed
mid-ingest, bodies streamed in pieces, and the `graphsvc upload` client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from bench.shapes import LargeDomain
from graphsvc.accounts import tokens, users
from graphsvc.crypto import KeyBox, body_signer, encode_signature
from graphsvc.store.db import Connection, run_in_transaction
from tests.conftest import (
    FIXTURES,
    TEST_FERNET_KEY,
    peak_memory_kib,
    served,
    server_environment,
    signed_headers,
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
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            job: dict[str, Any] = self.call(base, "GET", f"{JOBS}?id={job_id}")[0]
            if job["status"] in until:
                return job
            time.sleep(0.1)
        raise AssertionError(f"job {job_id} did not reach {until}")


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
        time.sleep(1)  # both workers poll again: a job ingested twice would show now
    assert fetch(database_url, "SELECT attempts FROM file_upload_jobs") == [(1,)]
    assert len(fetch(database_url, "SELECT id FROM ingest_runs")) == 1


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
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            job = client.call(base, "GET", f"{JOBS}?id={job_id}")[0]
            if job["status_message"].startswith("ingesting on"):
                break
            time.sleep(0.05)
        assert f":{process.pid}:" in job["status_message"], job
        time.sleep(0.5)  # well into the ingest (it takes seconds)
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

    clean = f"sqlite:///{tmp_path / 'clean.sqlite3'}"
    subprocess.run(
        [sys.executable, "-m", "graphsvc", "ingest", str(large_collection)],
        env={**os.environ, **server_environment(clean, tmp_path / "clean")},
        check=True,
        capture_output=True,
    )
    assert fingerprint(database_url) == fingerprint(clean)


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
def test_the_upload_command_cancels_the_job_it_cannot_finish(
    database_url: str, tmp_path: Path
) -> None:
    """A file the server refuses (larger than its cap here) ends the command with the
    server's error, and the job it started is Canceled, not left Running for an hour."""
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
    assert "HTTP 413" in refused.stderr, refused.stderr
    assert "file-upload job 1 canceled" in refused.stderr
    assert fetch(database_url, "SELECT status, end_time IS NOT NULL FROM file_upload_jobs") == [
        (3, True)
    ]
    assert fetch(database_url, "SELECT count(*) FROM file_upload_chunks") == [(0,)]


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
            time.sleep(2.0 if i == stall_at else pause)
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
