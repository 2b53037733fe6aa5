"""Collector files built to stall an ingest: one token of 128 MiB (a string, a string of
escapes, a number, a key) in a zip of 586 KB. Each is refused naming the file and
the element, in flat memory and without the parser ever holding the token; and an ingest,
by `graphsvc ingest` or a server's ingester, stops within seconds of SIGTERM or SIGINT
wherever it is, nothing written.

Before the lexer, yajl lexed a token that spans its 64 KiB reads again from its start at
every read: the 128 MiB string took 36 s to refuse, its escapes 787 s, and the number was
not measured by the fast pass at all; and no pass over a document gave the event loop a
turn, so that a signal waited for its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest

from graphsvc.store import graph
from graphsvc.store.db import run_in_transaction
from tests.conftest import served, server_environment, signed_headers, wait_until
from tests.test_upload_replicas import FAST_WORKER, Client, create_uploader, fetch

MIB = 1 << 20
USER = b'{"ObjectIdentifier": "S-1-5-21-1-2-3-1000", "Properties": {'
META = b'"meta": {"type": "users", "version": 6, "count": 1}'
RECORD = b"{" + META + b', "data": [' + USER
VALUE_BOUND = "a value of more than 12,582,912 bytes of JSON text; at most 1,048,576 characters"
NUMBER_BOUND = "a number or literal of more than 1,024 bytes of JSON text"

# What comes before the long token, what it is made of, what closes the document, and the
# error naming its element.
HOSTILE = {
    "string": (RECORD + b'"description": "', b"x", b'"}}]}', f"data[0].description: {VALUE_BOUND}"),
    "escapes": (
        RECORD + b'"description": "',
        b"\\u0041",
        b'"}}]}',
        f"data[0].description: {VALUE_BOUND}",
    ),
    "number": (RECORD + b'"n": 1', b"1", b"}}]}", f"data[0].n: {NUMBER_BOUND}"),
    "key": (
        RECORD + b'"',
        b"k",
        b'": 1}}]}',
        "data[0]: a key of more than 1,024 bytes of JSON text",
    ),
    # Between records, where the fast pass measured nothing before the lexer: it vouched for
    # the document, and left the number to the records' pass.
    "number among records": (b"{" + META + b', "data": [1', b"1", b"]}", f"data: {NUMBER_BOUND}"),
}


def write_zip(path: Path, parts: Iterator[bytes]) -> Path:
    """A zip of one entry, users.json, written a part at a time: 128 MiB of one byte
    deflate (at level 1, the fastest) to 586 KB in 0.12 s."""
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive,
        archive.open("users.json", "w", force_zip64=True) as entry,
    ):
        for part in parts:
            entry.write(part)
    return path


def repeated(head: bytes, fill: bytes, tail: bytes, mebibytes: int) -> Iterator[bytes]:
    yield head
    block = fill * (MIB // len(fill))
    for _ in range(mebibytes):
        yield block
    yield tail


def ingest_process(database_url: str, path: Path, tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "graphsvc", "ingest", str(path)],
        env={**os.environ, **server_environment(database_url, tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# Runs the command in its arguments and prints its exit status and peak memory (KiB): from
# this small process, since Linux carries a process's memory high-water mark across fork
# and exec, and a child of the test's own process reported that process's peak (660 MB).
MEASURE = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
@pytest.mark.parametrize("kind", HOSTILE)
def test_a_token_past_its_bound_is_refused_at_once_in_flat_memory(
    database_url: str, tmp_path: Path, kind: str
) -> None:
    head, fill, tail, element = HOSTILE[kind]
    path = write_zip(tmp_path / "hostile.zip", repeated(head, fill, tail, 128))
    assert path.stat().st_size < MIB
    started = time.monotonic()
    measured = subprocess.Popen(
        [sys.executable, "-c", MEASURE, sys.executable, "-m", "graphsvc", "ingest", str(path)],
        env={**os.environ, **server_environment(database_url, tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, the ingest included
    )
    try:
        # It took from 36 s to much longer: a hang ends the test, not the suite.
        stdout, stderr = measured.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(measured.pid, signal.SIGKILL)
    elapsed = time.monotonic() - started
    status, peak = map(int, stdout.split())
    assert status == 1, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("graphsvc: error:")]
    assert errors == [f"graphsvc: error: {path}: users.json: {element} (nothing was written)"]
    assert "Traceback" not in stderr
    # A 128 MiB token held whole is 128 MiB of memory at least; the lexer holds a value's
    # bound, 12 MiB, at most. Starting takes seconds at most; 20 bounds a slow machine.
    assert peak < 200 * 1024, f"peak {peak} KiB"
    assert elapsed < 20, f"{elapsed:.1f} s"
    assert asyncio.run(run_in_transaction(database_url, graph.count_graph)) == (0, 0)


def slow_to_survey(path: Path) -> Path:
    """400 MiB of numbers: the fast pass leaves it to the exact survey at once (its `meta`
    key is written with an escape), which reads 200 million parser events (30 s)."""
    head = b'{"me\\u0074a": {"type": "users", "version": 6, "count": 1}, "data": ['
    return write_zip(path, repeated(head, b"1,", b"1]}", 400))


def slow_to_read(path: Path) -> Path:
    """A 400 MiB AzureHound document of records of a kind not read: the fast pass vouches
    for it, and its records' pass stores nothing, so never waits on the database."""
    head = b'{"meta": {"type": "azure", "version": 5}, "data": ['
    record = b'{"kind": "AZUnknown", "data": {}}, '
    return write_zip(path, repeated(head, record, record[:-2] + b"]}", 400))


STOP_WITHIN = 5.0  # seconds: a second is the aim; a loaded machine gets the rest
# Where the ingest is when it is stopped: the line it has written by then (the first is
# written as a document is begun; one on progress, after five seconds of the records' pass).
PASSES = {
    "the exact survey": (slow_to_survey, "reading "),
    "the records' pass": (slow_to_read, "% of the input read"),
}


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("inside", PASSES)
def test_the_ingest_command_stops_within_seconds_of_a_signal(
    database_url: str, tmp_path: Path, stop: signal.Signals, inside: str
) -> None:
    make, said = PASSES[inside]
    process = ingest_process(database_url, make(tmp_path / "slow.zip"), tmp_path)
    assert process.stderr is not None
    while said not in (line := process.stderr.readline()):
        assert line, f"it ended before {inside}"
    time.sleep(0.5)  # not an event: a point inside the pass, which lasts tens of seconds
    process.send_signal(stop)
    signalled = time.monotonic()
    try:
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    stopped = time.monotonic() - signalled
    assert process.returncode == 130, stderr
    assert "interrupted: the transaction was rolled back, nothing was written" in stderr
    assert "Traceback" not in stderr
    assert stopped < STOP_WITHIN, f"{stopped:.1f} s after {stop.name}"
    assert asyncio.run(run_in_transaction(database_url, graph.count_graph)) == (0, 0)


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_a_server_stops_within_seconds_while_its_ingester_parses_a_job(
    database_url: str, tmp_path: Path
) -> None:
    """The job stays queued with its files, the lease given back, for a replica to take."""
    path = slow_to_survey(tmp_path / "slow.zip")
    token = create_uploader(database_url)
    client = Client(token)
    with served(server_environment(database_url, tmp_path, **FAST_WORKER)) as (base, process):
        job_id = client.call(base, "POST", "/api/v2/file-upload/start")["id"]
        uri = f"/api/v2/file-upload/{job_id}"
        body = path.read_bytes()
        headers = {
            **signed_headers(token, "POST", uri, body=body),
            "Content-Type": "application/zip",
            "Content-Disposition": 'attachment; filename="slow.zip"',
        }
        sent = httpx.post(base + uri, content=body, headers=headers, timeout=60)
        assert sent.status_code == 202, sent.text
        client.call(base, "POST", f"{uri}/end")
        wait_until(
            lambda: client.call(base, "GET", f"/api/v2/file-upload?id={job_id}")[0][
                "status_message"
            ].startswith("ingesting on"),
            timeout=30,
            what="the ingester to take the job",
        )
        time.sleep(0.5)  # not an event: a point inside the survey, which lasts tens of seconds
        process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        process.wait(60)
        stopped = time.monotonic() - signalled
    assert process.returncode == 0
    assert stopped < STOP_WITHIN, f"{stopped:.1f} s after SIGTERM"
    assert fetch(database_url, "SELECT status, attempts FROM file_upload_jobs") == [(6, 1)]
    assert fetch(database_url, "SELECT count(*) FROM file_upload_chunks")[0][0] > 0
    assert fetch(database_url, "SELECT holder FROM ingest_lease") == [(None,)]
