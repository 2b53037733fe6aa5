"""Stopping cleanly: a served request under way when SIGTERM comes is answered before the
server exits 0; an ingest stopped by SIGTERM rolls back and says so."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.shapes import LargeDomain
from graphsvc.store import graph
from graphsvc.store.db import run_in_transaction
from tests.conftest import served, server_environment


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_sigterm_lets_a_request_under_way_finish(database_url: str, tmp_path: Path) -> None:
    with served(server_environment(database_url, tmp_path)) as (base, process):
        host, port = base.removeprefix("http://").split(":")
        body = b'{"login_method": "secret", "username": "nobody", "secret": "not-this-one"}'
        with socket.create_connection((host, int(port)), timeout=10) as s:
            head = f"POST /api/v2/login HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
            s.sendall(head.encode() + body[:10])  # the request is under way
            time.sleep(0.3)
            process.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            assert process.poll() is None, "the server waits for the request"
            s.sendall(body[10:])
            answer = s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 401"), answer[:100]
        assert process.wait(15) == 0


def test_an_ingest_stopped_by_sigterm_rolls_back(database_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "collection"
    LargeDomain.of_size("STOP.LOCAL", "S-1-5-21-5-5-5", 30_000).write(folder)
    environment = {**os.environ, **server_environment(database_url, tmp_path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "graphsvc", "ingest", str(folder)],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    read = [process.stderr.readline() for _ in range(2)]  # it has begun reading files
    assert any("reading" in line for line in read), read
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stderr
    assert "interrupted: the transaction was rolled back, nothing was written" in stderr
    assert "Traceback" not in stderr
    assert asyncio.run(run_in_transaction(database_url, graph.count_graph)) == (0, 0)
