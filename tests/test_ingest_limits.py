"""Collector files that would exhaust memory or the stack are refused while streaming, with
the file and element named and nothing written: deep nesting, huge values, huge records."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphsvc.ingest.records import IngestError
from graphsvc.ingest.survey import MAX_DEPTH, MAX_RECORD_BYTES, MAX_VALUE_BYTES
from graphsvc.store import graph
from tests.conftest import FIXTURES, Env, ingest, server_environment

META = '"meta": {"type": "users", "version": 6, "count": 1, "methods": 0}'


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def sharphound_file(folder: Path, name: str, record: str) -> Path:
    path = folder / name
    path.write_text('{"data": [' + record + "], " + META + "}")
    return path


def user(properties: str) -> str:
    return '{"ObjectIdentifier": "S-1-5-21-1-2-3-1001", "Properties": {' + properties + "}}"


def test_real_collector_files_are_within_every_limit(env: Env) -> None:
    result = ingest(env, FIXTURES / "bloodhound-docs" / "ad_sampledata.zip")
    assert result.nodes > 0


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000, 20_000])
def test_nesting_deeper_than_the_limit_is_refused_naming_the_element(
    env: Env, tmp_path: Path, depth: int
) -> None:
    path = sharphound_file(tmp_path, "users.json", user(f'"name": "A", "x": {nested(depth)}'))
    with pytest.raises(
        IngestError, match=rf"users\.json: data\[0\]: nested deeper than {MAX_DEPTH}"
    ):
        ingest(env, path)
    assert env.run_in_transaction(graph.count_graph) == (0, 0)


def test_opengraph_nesting_is_refused_too(env: Env, tmp_path: Path) -> None:
    path = tmp_path / "og.json"
    node = '{"id": "A", "kinds": ["K"], "properties": {"deep": ' + nested(10_000) + "}}"
    path.write_text('{"graph": {"nodes": [{"id": "B", "kinds": ["K"]}, ' + node + "]}}")
    with pytest.raises(IngestError, match=r"og\.json: graph\.nodes\[1\]: nested deeper"):
        ingest(env, path)


def test_a_value_over_the_limit_is_refused_naming_it(env: Env, tmp_path: Path) -> None:
    big = "x" * (MAX_VALUE_BYTES + 1)
    path = sharphound_file(tmp_path, "users.json", user(f'"name": "A", "description": "{big}"'))
    with pytest.raises(IngestError, match=r"data\[0\]\.description: a value of 1,048,577"):
        ingest(env, path)
    assert env.run_in_transaction(graph.count_graph) == (0, 0)


def test_a_record_over_the_limit_is_refused_naming_it(env: Env, tmp_path: Path) -> None:
    chunk = "y" * (MAX_VALUE_BYTES // 2)
    count = MAX_RECORD_BYTES // len(chunk) + 1
    fields = ", ".join(f'"p{i}": "{chunk}"' for i in range(count))
    small = user('"name": "SMALL"').replace("1001", "1002")
    path = sharphound_file(tmp_path, "users.json", small + ", " + user(fields))
    with pytest.raises(IngestError, match=r"data\[1\]: a record larger than"):
        ingest(env, path)


# Starts `graphsvc ingest` under an address-space cap from a small process of its own and
# prints its exit status and peak RSS: a child forked from the test's worker counts the
# worker's resident pages in its peak until it execs (331 MB once the suite had grown the
# worker, against 102 MB for the ingest itself).
LAUNCHER = """
import os, resource, sys
pid = os.fork()
if pid == 0:
    resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
    os.execv(sys.executable, [sys.executable, "-m", "graphsvc", "ingest", sys.argv[2]])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def test_a_hostile_file_is_refused_within_bounded_memory(database_url: str, tmp_path: Path) -> None:
    """200 KB nested 100,000 deep grew `graphsvc ingest` past 22 GB before the survey pass;
    now, under a 2 GB address-space cap, it exits 1 with one line and a small peak."""
    path = sharphound_file(tmp_path, "users.json", user('"x": ' + nested(100_000)))
    environment = {**os.environ, **server_environment(database_url, tmp_path)}
    cap = 2 << 30
    launched = subprocess.run(
        [sys.executable, "-c", LAUNCHER, str(cap), str(path)],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    stderr = launched.stderr
    status, peak = (int(word) for word in launched.stdout.split())
    assert status == 1, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("graphsvc: error:")]
    assert len(errors) == 1 and "nested deeper" in errors[0] and "Traceback" not in stderr
    assert peak < 300 * 1024, f"peak {peak} KiB"
