"""The path index kept as files (graph/index_files.py): built once per graph version by one
process, mapped read-only by every other (the workers of a server, `graphsvc path`, a
restarted server); written again when damaged; a folder that cannot be used leaves each
process with its own index in memory."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx2 as httpx
import numpy as np
import pytest

from graphsvc.graph import path_index
from graphsvc.graph.index_files import ARRAY_NAMES, arrays_of
from graphsvc.graph.path_index import GraphIndex
from graphsvc.graph.paths import TRAVERSABLE_KINDS, PathIndex
from graphsvc.store.db import Connection
from tests.conftest import Env, ingest, served, server_environment
from tests.test_sharphound import SAMPLES, TESTLAB

ADMINS = f"{TESTLAB}-512"
FOOTHOLD = f"{TESTLAB}-1105"  # DFM, three steps from Domain Admins


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The versions the index was built from the store at, in this process."""
    seen: list[Any] = []
    build = path_index.build_index

    async def counted(conn: Connection, version: Any) -> GraphIndex:
        seen.append(version)
        return await build(conn, version)

    monkeypatch.setattr(path_index, "build_index", counted)
    return seen


def read_index(env: Env, index: PathIndex) -> GraphIndex:
    async def work(conn: Connection) -> GraphIndex:
        return await index.read(conn)

    return env.run_in_transaction(work)


def search(graph: GraphIndex, start: int, end: int) -> list[tuple[int, int, int]]:
    return sorted(graph.search(start, end, graph.kind_mask(TRAVERSABLE_KINDS)))


def node_id(env: Env, object_id: str) -> int:
    async def work(conn: Connection) -> int:
        found = await conn.fetchval("SELECT id FROM nodes WHERE object_id = $1", object_id)
        return int(found)

    return env.run_in_transaction(work)


def versions_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_dir())


def test_a_second_process_maps_the_first_ones_index(env: Env, builds: list[Any]) -> None:
    ingest(env, SAMPLES["v6 folder"])
    folder = env.settings.resolved_path_index_folder()
    first = read_index(env, PathIndex(folder=folder))
    assert len(builds) == 1
    version = builds[0]
    assert versions_in(folder) == [version.name]
    # Another process (or this one restarted): the same files, mapped, no build.
    second = read_index(env, PathIndex(folder=folder))
    assert len(builds) == 1
    assert second.version == first.version == version
    for name, array in arrays_of(second).items():
        assert isinstance(array, np.memmap), name
        assert Path(array.filename).parent == folder / version.name  # type: ignore[arg-type]
        assert np.array_equal(array, arrays_of(first)[name]), name
    assert second.kind_ids == first.kind_ids and second.size == first.size
    start, end = node_id(env, FOOTHOLD), node_id(env, ADMINS)
    assert search(second, start, end) == search(first, start, end) != []
    assert (folder.stat().st_mode & 0o777) == 0o700


def test_a_new_ingest_replaces_the_files(env: Env, builds: list[Any]) -> None:
    ingest(env, SAMPLES["v6 folder"])
    folder = env.settings.resolved_path_index_folder()
    index = PathIndex(folder=folder)
    before = read_index(env, index)
    ingest(env, SAMPLES["sample zip (3 domains, 3 collections)"])
    after = read_index(env, index)
    assert after.version.runs == before.version.runs + 1
    assert len(builds) == 2
    assert versions_in(folder) == [after.version.name]  # the old version is gone
    assert after.size > before.size
    # A process still holding the old version's arrays goes on reading them.
    assert int(before.forward.offsets[-1]) == before.forward.others.size


def test_a_damaged_file_is_built_and_written_again(env: Env, builds: list[Any]) -> None:
    ingest(env, SAMPLES["v6 folder"])
    folder = env.settings.resolved_path_index_folder()
    first = read_index(env, PathIndex(folder=folder))
    start, end = node_id(env, FOOTHOLD), node_id(env, ADMINS)
    expected = search(first, start, end)
    # Cut inside the header (in place: `first`, which maps it, is not used after this).
    damaged = folder / first.version.name / "forward_others.npy"
    damaged.write_bytes(damaged.read_bytes()[:40])
    again = read_index(env, PathIndex(folder=folder))
    assert len(builds) == 2
    assert search(again, start, end) == expected != []
    assert sorted(p.name for p in (folder / first.version.name).iterdir()) == sorted(
        [*(f"{name}.npy" for name in ARRAY_NAMES), "meta.json"]
    )


def test_an_empty_graph_has_an_index_too(env: Env, builds: list[Any]) -> None:
    folder = env.settings.resolved_path_index_folder()
    empty = read_index(env, PathIndex(folder=folder))
    assert empty.version.runs == 0 and empty.forward.others.size == 0
    assert read_index(env, PathIndex(folder=folder)).version == empty.version
    assert len(builds) == 1


def test_an_unusable_folder_leaves_the_index_in_memory(
    make_env: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the index folder would go\n")
    env = make_env(path_index_dir=blocker)
    env.create_admin()
    ingest(env, SAMPLES["v6 folder"])
    uri = "/api/v2/graphs/shortest-path?" + urlencode({"start_node": FOOTHOLD, "end_node": ADMINS})
    with caplog.at_level(logging.WARNING, logger="graphsvc.graph.paths"):
        answer = env.get(uri)
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["data"]["edges"]) == 4
    warnings = [r.getMessage() for r in caplog.records if r.name == "graphsvc.graph.paths"]
    assert len(warnings) == 1
    assert warnings[0].startswith("path index kept in this process's memory only: ")
    assert str(blocker) in warnings[0]
    assert env.get(uri).status_code == 200  # the next request reuses the index


def test_different_stores_in_one_data_folder_keep_apart(env: Env, tmp_path: Path) -> None:
    other = env.settings.model_copy(
        update={"database_url": f"sqlite:///{tmp_path / 'other.sqlite3'}"}
    )
    mine = env.settings.resolved_path_index_folder()
    assert other.resolved_path_index_folder() != mine
    assert other.resolved_path_index_folder().parent == mine.parent


def test_a_password_in_the_database_url_is_not_in_the_folder_name(env: Env) -> None:
    one = env.settings.model_copy(update={"database_url": "postgresql://u:secret1@h/db"})
    two = env.settings.model_copy(update={"database_url": "postgresql://u:secret2@h/db"})
    assert one.resolved_path_index_folder() == two.resolved_path_index_folder()


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_the_workers_of_a_server_map_one_index(env: Env, database_url: str, tmp_path: Path) -> None:
    """Two workers: one builds and writes the index, both answer from the same mapped files
    (so the memory of the index is shared, not paid per worker)."""
    ingest(env, SAMPLES["v6 folder"])
    environment = server_environment(database_url, tmp_path, rate_limit_per_second="0")
    folder = env.settings.resolved_path_index_folder()
    uri = "/api/v2/graphs/shortest-path?" + urlencode({"start_node": FOOTHOLD, "end_node": ADMINS})
    with served(environment, "--workers", "2") as (base, process):
        workers = [int(p) for p in Path(f"/proc/{process.pid}/task/{process.pid}/children")
                   .read_text().split()]  # fmt: skip
        assert len(workers) == 2
        # Each request on a connection of its own: the kernel spreads them over both workers.
        for _ in range(30):
            answer = httpx.get(base + uri, headers=env.signed_headers("GET", uri), timeout=30)
            assert answer.status_code == 200, answer.text
            assert len(answer.json()["data"]["edges"]) == 4
        (version,) = versions_in(folder)
        mapped = str(folder / version / "forward_others.npy")
        for worker in workers:
            maps = Path(f"/proc/{worker}/maps").read_text()
            assert mapped in maps, f"worker {worker} does not map {mapped}"


def test_edge_columns_grow_past_the_count_read_first() -> None:
    """An ingest may add edges between the count and the last chunk (the build is then
    repeated, but this one must not fail or lose any)."""
    columns = path_index.EdgeColumns(2, np.int32, np.int16)
    columns.append([(1, 10, 20, 3), (2, 11, 21, 4)])
    columns.append([(3, 12, 22, 5), (4, 13, 23, 6), (5, 14, 24, 7)])
    starts, ends, kinds = columns.filled()
    assert starts.tolist() == [10, 11, 12, 13, 14] and starts.dtype == np.int32
    assert ends.tolist() == [20, 21, 22, 23, 24]
    assert kinds.tolist() == [3, 4, 5, 6, 7] and kinds.dtype == np.int16


def test_columns_widen_for_large_ids() -> None:
    assert path_index.node_dtype(2**31 - 1) is np.int32
    assert path_index.node_dtype(2**31) is np.int64
    assert path_index.kind_dtype(2**15 - 1) is np.int16
    assert path_index.kind_dtype(2**15) is np.int32
