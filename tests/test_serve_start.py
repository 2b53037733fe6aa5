"""What `graphsvc serve` refuses before its start line, in one line naming the variable, file
or option at fault: a port in use, a Redis that refuses graphsvc, a damaged key file; and a
Redis that does not answer, warned of once."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.conftest import free_port, served, server_environment


def serve(environment: dict[str, str], port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "graphsvc", "serve", "--port", str(port)],
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=60,
    )


def refused_in_one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stderr
    assert "serving on" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("graphsvc: error: "), line
    return line


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_port_in_use_is_refused_before_the_start_line(database_url: str, tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        line = refused_in_one_line(serve(server_environment(database_url, tmp_path), port))
    assert f"--host 127.0.0.1 --port {port}: cannot listen there: Address already in use" in line


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_redis_database_index_out_of_range_is_refused(
    database_url: str, redis_url: str, tmp_path: Path
) -> None:
    out_of_range = redis_url.rsplit("/", 1)[0] + "/4095"
    environment = server_environment(database_url, tmp_path, redis_url=out_of_range)
    line = refused_in_one_line(serve(environment, free_port()))
    assert f"GRAPHSVC_REDIS_URL={out_of_range}: Redis refuses graphsvc's requests:" in line
    assert "DB index is out of range" in line


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_damaged_key_file_is_named(database_url: str, tmp_path: Path) -> None:
    environment = server_environment(database_url, tmp_path)
    del environment["GRAPHSVC_TOKEN_ENCRYPTION_KEY"]  # the generated one, in the data folder
    key_file = tmp_path / "data" / "token-encryption.key"
    key_file.parent.mkdir(parents=True)
    key_file.write_text("not a key\n")
    line = refused_in_one_line(serve(environment, free_port()))
    assert f"{key_file} does not hold a Fernet key" in line


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_redis_that_does_not_answer_is_warned_of_once(database_url: str, tmp_path: Path) -> None:
    silent = f"redis://127.0.0.1:{free_port()}/0"
    environment = server_environment(database_url, tmp_path, redis_url=silent)
    with served(environment) as (base, process):
        # Requests that count against the rate limit and the login throttle: still once.
        body = b'{"login_method": "secret", "username": "nobody", "secret": "not-it"}'
        for _ in range(3):
            assert httpx.post(f"{base}/api/v2/login", content=body).status_code == 401
            assert httpx.get(f"{base}/api/v2/self").status_code == 401
    assert process.stderr is not None
    said = process.stderr.read().decode()
    warnings = [line for line in said.splitlines() if "Redis" in line]
    assert len(warnings) == 1 and "does not answer" in warnings[0], said
    assert "Connection refused" in warnings[0] and "coredis" not in said, said


def test_a_bad_key_stops_every_command_not_only_those_that_use_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "graphsvc", "user", "list"],
        env={
            **os.environ,
            "GRAPHSVC_DATA_DIR": str(tmp_path),
            "GRAPHSVC_TOKEN_ENCRYPTION_KEY": "short",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = refused_in_one_line(done)
    assert "GRAPHSVC_TOKEN_ENCRYPTION_KEY=(hidden): must be a Fernet key" in line


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_key_file_that_is_not_text_is_named(database_url: str, tmp_path: Path) -> None:
    environment = server_environment(database_url, tmp_path)
    del environment["GRAPHSVC_TOKEN_ENCRYPTION_KEY"]
    key_file = tmp_path / "data" / "token-encryption.key"
    key_file.parent.mkdir(parents=True)
    key_file.write_bytes(bytes(range(200, 244)))
    line = refused_in_one_line(serve(environment, free_port()))
    assert f"{key_file} does not hold a key graphsvc wrote" in line


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_data_dir_that_is_a_file_is_named(database_url: str, tmp_path: Path) -> None:
    environment = server_environment(database_url, tmp_path)
    del environment["GRAPHSVC_TOKEN_ENCRYPTION_KEY"], environment["GRAPHSVC_JWT_SECRET"]
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    environment["GRAPHSVC_DATA_DIR"] = str(not_a_folder)
    line = refused_in_one_line(serve(environment, free_port()))
    assert "GRAPHSVC_DATA_DIR must be a folder graphsvc may write" in line
