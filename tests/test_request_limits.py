"""Request bodies: a route takes at most its limit, answers 413 before reading more, and a
server flooded with large bodies keeps its memory."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import Env, peak_memory_kib, served, server_environment

AGG = "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"


def test_a_declared_length_over_the_limit_is_413_before_anything_is_read(env: Env) -> None:
    body = b"x" * (env.settings.max_body_bytes + 1)
    response = env.request("POST", "/api/v2/login", content=body)
    assert response.status_code == 413
    assert response.json()["errors"][0]["context"] == "body"
    signed = env.signed_headers("GET", AGG, body=body)
    assert env.request("GET", AGG, signed, content=body).status_code == 413


def test_a_streamed_body_is_cut_at_the_limit(make_env: Callable[..., Env]) -> None:
    env = make_env(max_body_bytes=100)
    read: list[int] = []

    def chunks() -> Iterator[bytes]:  # no Content-Length: sent chunked
        for _ in range(1000):
            read.append(1)
            yield b"y" * 50

    response = env.client.post("/api/v2/login", content=chunks())
    assert response.status_code == 413
    assert "larger than 100 bytes" in response.json()["errors"][0]["message"]
    within = env.request("POST", "/api/v2/login", content=b'{"login_method": "secret"}')
    assert within.status_code == 400  # read, and refused for what it says


def send_large_body(base: str, megabytes: int) -> bytes:
    """A POST declaring and sending `megabytes` of body, as fast as the server takes it."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        head = (
            f"POST /api/v2/login HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {megabytes << 20}\r\n\r\n"
        )
        s.sendall(head.encode())
        block = b"z" * (1 << 20)
        try:
            for _ in range(megabytes):
                s.sendall(block)
        except OSError:
            pass  # the server answered and closed: that is the point
        return s.recv(65536)


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_eight_large_bodies_at_once_leave_the_server_memory_flat(
    database_url: str, tmp_path: Path
) -> None:
    with served(server_environment(database_url, tmp_path)) as (base, process):
        before = peak_memory_kib(process.pid)
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: send_large_body(base, 50), range(8)))
        after = peak_memory_kib(process.pid)
    assert all(a.startswith(b"HTTP/1.1 413") for a in answers), answers
    # 400 MB were offered; before the limit, a 50 MB body alone added 200 MB.
    assert after - before < 20 * 1024, f"peak memory grew by {after - before} KiB"
