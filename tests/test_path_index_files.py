"""The path index kept as files (graph/index_files.py): built once per graph version by one
process, read by every other (the workers of a server, `graphsvc path`, a restarted server)
into one sealed copy in memory that they share; written again when damaged or forged; a
folder that is not the service's alone, or cannot be used, leaves each process with its own
index in memory."""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import json
import logging
import mmap
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx2 as httpx
import numpy as np
import numpy.typing as npt
import pytest

from graphsvc.graph import index_files, path_index
from graphsvc.graph.index_files import ARRAY_NAMES, arrays_of
from graphsvc.graph.path_index import GraphIndex
from graphsvc.graph.paths import TRAVERSABLE_KINDS, PathIndex
from graphsvc.store.db import Connection
from graphsvc.store.paths import GraphVersion
from tests.conftest import Env, ingest, served, server_environment
from tests.test_sharphound import SAMPLES, TESTLAB

ADMINS = f"{TESTLAB}-512"
FOOTHOLD = f"{TESTLAB}-1105"  # DFM, three steps from Domain Admins
URI = "/api/v2/graphs/shortest-path?" + urlencode({"start_node": FOOTHOLD, "end_node": ADMINS})
NOBODY = 65534  # a uid of another local user (the tests run as root)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The versions the index was built from the store at, in this process (not the graphs
    of some relationship kinds an ingest builds to tag the graph: tags/tagging.py)."""
    seen: list[Any] = []
    build = path_index.build_index

    async def counted(conn: Connection, version: Any, edge_kinds: Any = None) -> GraphIndex:
        if edge_kinds is None:
            seen.append(version)
        return await build(conn, version, edge_kinds)

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


def copies_mapped(pid: int, version: str) -> set[int]:
    """The inodes of the sealed copies of `version` that process `pid` maps."""
    name = f"/memfd:graphsvc-path-index-{version} (deleted)"
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {int(line.split()[4]) for line in lines if line.endswith(name)}


def holders(place: Path) -> list[str]:
    return sorted(p.name for p in place.iterdir() if p.name.startswith("holder-"))


def searched(env: Env, folder: Path) -> list[tuple[int, int, int]]:
    """DFM's paths to Domain Admins on the index written to `folder`; no array of it is kept
    (so nothing of this process holds the index when the test then changes its files)."""
    return search(read_index(env, PathIndex(folder=folder)), *ends(env))


def ends(env: Env) -> tuple[int, int]:
    return node_id(env, FOOTHOLD), node_id(env, ADMINS)


def the_version_folder(folder: Path) -> Path:
    (version,) = versions_in(folder)
    return folder / version


def path_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "graphsvc.graph.paths"]


def test_a_second_process_uses_the_first_ones_copy(env: Env, builds: list[Any]) -> None:
    ingest(env, SAMPLES["v6 folder"])
    folder = env.settings.resolved_path_index_folder()
    first = read_index(env, PathIndex(folder=folder))
    assert len(builds) == 1
    version = builds[0]
    assert versions_in(folder) == [version.name]
    assert (folder.stat().st_mode & 0o777) == 0o700
    # Another process (or this one restarted): the copy the first registered, no build.
    descriptors = len(os.listdir("/proc/self/fd"))
    second = read_index(env, PathIndex(folder=folder))
    by_second = len(os.listdir("/proc/self/fd")) - descriptors
    assert len(builds) == 1
    assert second.version == first.version == version
    for name, array in arrays_of(second).items():
        assert np.array_equal(array, arrays_of(first)[name]), name
        assert not array.flags.writeable, name
    assert second.kind_ids == first.kind_ids and second.size == first.size
    # One copy mapped twice: its pages are paid once.
    assert len(copies_mapped(os.getpid(), version.name)) == 1
    assert len(holders(folder / version.name)) == 2
    # A third opens one of the two registered copies, and no other: as many descriptors as
    # the second, which had one to open.
    descriptors = len(os.listdir("/proc/self/fd"))
    third = read_index(env, PathIndex(folder=folder))
    assert len(os.listdir("/proc/self/fd")) - descriptors == by_second
    assert third.version == version and len(builds) == 1
    start, end = ends(env)
    assert search(second, start, end) == search(first, start, end) != []


def path_from(start: str) -> str:
    """The request of the shortest paths from `start` to Domain Admins."""
    return "/api/v2/graphs/shortest-path?" + urlencode({"start_node": start, "end_node": ADMINS})


def tree(folder: Path) -> dict[str, tuple[int, int, int, int]]:
    """The folder and every name under it, with its inode, size and times of change: a file
    written, replaced or removed changes one of them, or its folder's."""
    return {
        str(p.relative_to(folder)): (
            found.st_ino,
            found.st_size,
            found.st_mtime_ns,
            found.st_ctime_ns,
        )
        for p in (folder, *folder.rglob("*"))
        for found in (p.lstat(),)
    }


def test_a_warm_path_request_writes_and_removes_no_index_file(env: Env, builds: list[Any]) -> None:
    """The build writes the files, and removes the versions before it: a request on the index
    built for the store's data version, or after a write that moved that version but not
    the graph's, leaves the folder as it is."""
    ingest(env, SAMPLES["v6 folder"])
    folder = env.settings.resolved_path_index_folder()
    assert env.get(URI).status_code == 200
    (version,) = builds
    assert versions_in(folder) == [version.name]
    written = tree(folder)
    assert env.get(path_from(f"{TESTLAB}-500")).status_code == 200  # an answer not kept
    env.user_with_token("reader", "Read-Only")
    assert env.get(path_from(f"{TESTLAB}-1104")).status_code == 200
    assert tree(folder) == written
    assert len(builds) == 1


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


def test_a_file_cut_short_is_built_and_written_again(
    env: Env, builds: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    ingest(env, SAMPLES["v6 folder"])
    folder = env.settings.resolved_path_index_folder()
    expected = searched(env, folder)
    place = the_version_folder(folder)
    damaged = place / "forward_others.npy"
    size = damaged.stat().st_size
    damaged.write_bytes(damaged.read_bytes()[:40])  # cut inside the header
    with caplog.at_level(logging.WARNING, logger="graphsvc.graph.index_files"):
        assert searched(env, folder) == expected != []
    assert len(builds) == 2
    assert [r.getMessage() for r in caplog.records] == [
        f"path index files in {place} fail a check (forward_others.npy: 40 bytes, where "
        f"{size} were written): building them again"
    ]
    written = {p.name for p in place.iterdir()} - set(holders(place))
    assert written == {*(f"{name}.npy" for name in ARRAY_NAMES), "meta.json"}


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
    other = dataclasses.replace(
        env.settings, database_url=f"sqlite:///{tmp_path / 'other.sqlite3'}"
    )
    mine = env.settings.resolved_path_index_folder()
    assert other.resolved_path_index_folder() != mine
    assert other.resolved_path_index_folder().parent == mine.parent


def test_a_password_in_the_database_url_is_not_in_the_folder_name(env: Env) -> None:
    one = dataclasses.replace(env.settings, database_url="postgresql://u:secret1@h/db")
    two = dataclasses.replace(env.settings, database_url="postgresql://u:secret2@h/db")
    assert one.resolved_path_index_folder() == two.resolved_path_index_folder()


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_the_workers_of_a_server_map_one_index(env: Env, database_url: str, tmp_path: Path) -> None:
    """Two workers: one builds and writes the index, both answer from the same sealed copy
    of it (so the memory of the index is shared, not paid per worker)."""
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
        copies = [copies_mapped(worker, version) for worker in workers]
        assert len(copies[0]) == 1 and copies[1] == copies[0], copies
        for worker in workers:  # the copy, not the files it was made from
            assert str(folder) not in Path(f"/proc/{worker}/maps").read_text()


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


# --- a folder that is not the service's alone, and files that are not what was written ----


@pytest.mark.parametrize(
    ("owner", "mode", "reason"),
    [
        (NOBODY, 0o700, f"owned by uid {NOBODY}, not by this process's uid 0"),
        (0, 0o777, "open to other users (mode 777)"),
    ],
)
def test_a_folder_made_by_another_user_or_open_to_others_is_not_used(
    env: Env, caplog: pytest.LogCaptureFixture, owner: int, mode: int, reason: str
) -> None:
    """In a shared GRAPHSVC_PATH_INDEX_DIR another user can make the store's folder before
    the server does: the server answers from an index of its own memory, writes nothing
    there, and says which folder it refused and why."""
    ingest(env, SAMPLES["v6 folder"])
    folder = env.settings.resolved_path_index_folder()
    folder.mkdir(parents=True)
    os.chown(folder, owner, owner)
    folder.chmod(mode)
    with caplog.at_level(logging.WARNING, logger="graphsvc.graph.paths"):
        answer = env.get(URI)
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["data"]["edges"]) == 4
    assert list(folder.iterdir()) == []  # not even a lock file
    assert path_warnings(caplog) == [
        f"path index kept in this process's memory only: {folder}: {reason}; graphsvc keeps "
        "its index only in a folder that it alone can use: remove that folder"
    ]


def test_a_planted_link_as_the_lock_file_is_not_followed(
    env: Env, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A link named build.lock: opened with O_CREAT through the link, it made a file where it
    pointed, as the server's user (root). The folder is not used."""
    ingest(env, SAMPLES["v6 folder"])
    folder = env.settings.resolved_path_index_folder()
    folder.mkdir(parents=True, mode=0o700)
    target = tmp_path / "made-by-the-server"
    (folder / "build.lock").symlink_to(target)
    with caplog.at_level(logging.WARNING, logger="graphsvc.graph.paths"):
        answer = env.get(URI)
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["data"]["edges"]) == 4
    assert not target.exists() and not target.is_symlink()
    assert path_warnings(caplog) == [
        f"path index kept in this process's memory only: {folder / 'build.lock'}: is a "
        "symbolic link"
    ]


def test_a_linked_array_file_is_not_read(
    env: Env, tmp_path: Path, builds: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    """An array file replaced by a link to a forged one (every edge of a kind no search
    follows): the files of that version are built again, not read through the link."""
    ingest(env, SAMPLES["v6 folder"])
    folder = env.settings.resolved_path_index_folder()
    expected = searched(env, folder)
    linked = the_version_folder(folder) / "forward_kinds.npy"
    forged = tmp_path / "forged.npy"
    np.save(forged, np.zeros_like(np.load(linked)))
    linked.unlink()
    linked.symlink_to(forged)
    with caplog.at_level(logging.WARNING, logger="graphsvc.graph.index_files"):
        assert searched(env, folder) == expected != []
    assert len(builds) == 2
    assert not linked.is_symlink()
    assert [r.getMessage() for r in caplog.records] == [
        f"path index files in {linked.parent} fail a check (forward_kinds.npy: is a symbolic "
        "link): building them again"
    ]


def forge(place: Path, name: str, array: npt.NDArray[Any]) -> None:
    """Replace an array file with a well-formed one holding `array` (a new file, as an
    attacker's `mv` leaves it)."""
    forged = place / f"{name}.forged.npy"
    np.save(forged, array)
    forged.replace(place / f"{name}.npy")


def test_a_forged_index_is_not_served(env: Env, builds: list[Any]) -> None:
    """Both directions' kinds set to a kind no search follows, consistently: the forgery
    answered "no path" for a real path, in the server and in `graphsvc path`. Each checks
    the files against the checksums written at build time and builds them again."""
    ingest(env, SAMPLES["v6 folder"])
    folder = env.settings.resolved_path_index_folder()
    assert searched(env, folder) != []
    place = the_version_folder(folder)
    for name in ("forward_kinds", "backward_kinds"):
        forge(place, name, np.zeros_like(np.load(place / f"{name}.npy")))
    printed = env.cli("path", FOOTHOLD, ADMINS)
    assert printed.exit_code == 0, printed.output
    assert printed.stdout.startswith("2 shortest path(s) of 3 step(s) from DFM@TESTLAB.LOCAL")
    assert (
        f"path index files in {place} fail a check (forward_kinds.npy: not the bytes written "
        "(its SHA-256 differs)): building them again"
    ) in printed.stderr
    answer = env.get(URI)
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["data"]["edges"]) == 4
    assert len(builds) == 2  # the first, then the command's (the server read what it wrote)


def test_a_damaged_file_of_the_right_size_is_built_again(env: Env, builds: list[Any]) -> None:
    """Node ids damaged in place, the file's size unchanged: read as they were, every search
    failed (a 500; other damage made a request allocate 700 MB), restarts included, until
    the files were removed by hand."""
    ingest(env, SAMPLES["v6 folder"])
    folder = env.settings.resolved_path_index_folder()
    expected = searched(env, folder)
    damaged = the_version_folder(folder) / "forward_others.npy"
    others = np.load(damaged)
    with damaged.open("r+b") as file:
        file.seek(damaged.stat().st_size - others.nbytes)
        file.write(b"\x7f" * others.nbytes)  # ids far past the last node
    answer = env.get(URI)
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["data"]["edges"]) == 4
    assert len(builds) == 2
    # Written again, whole, for the next process (or a restart) to read.
    assert np.array_equal(np.load(damaged), others)
    assert searched(env, folder) == expected
    assert len(builds) == 2


# Another process: the index read, then its files changed where they are (every kind set to
# one no search follows), searched, then cut to nothing, searched again; prints both answers.
CHANGED_WHILE_IN_USE = """
import asyncio, json, os, sys
from pathlib import Path

import numpy as np

from graphsvc.graph.paths import TRAVERSABLE_KINDS, PathIndex
from graphsvc.store.db import run_in_transaction

url, folder, start, end = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


async def work(conn):
    graph = await PathIndex(folder=folder).read(conn)
    mask = graph.kind_mask(TRAVERSABLE_KINDS)
    answers = [sorted(graph.search(start, end, mask))]
    for name in ("forward_kinds", "backward_kinds"):
        path = next(folder.glob(f"*/{name}.npy"))
        kinds = np.load(path)
        with path.open("r+b") as file:
            file.seek(path.stat().st_size - kinds.nbytes)
            file.write(np.zeros_like(kinds).tobytes())
    answers.append(sorted(graph.search(start, end, mask)))
    for path in folder.glob("*/*.npy"):
        os.truncate(path, 0)
    answers.append(sorted(graph.search(start, end, mask)))
    return answers


print(json.dumps(asyncio.run(run_in_transaction(url, work))))
"""


def test_files_changed_while_in_use_change_no_answer(env: Env) -> None:
    """Mapped, the files were the index: changed in place, a search answered "no path";
    truncated, the next one was killed by SIGBUS. In another process, since it could die."""
    ingest(env, SAMPLES["v6 folder"])
    folder = env.settings.resolved_path_index_folder()
    expected = searched(env, folder)
    start, end = ends(env)
    done = subprocess.run(
        [sys.executable, "-c", CHANGED_WHILE_IN_USE, env.url, str(folder), str(start), str(end)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (done.returncode, done.stderr)
    answers = json.loads(done.stdout)
    assert [[tuple(edge) for edge in answer] for answer in answers] == [expected] * 3


def test_the_copy_in_use_cannot_be_changed(env: Env) -> None:
    """What the searches read is sealed against writing, shrinking and growing: no process
    of the machine can change it, this one (root) included, through any descriptor."""
    ingest(env, SAMPLES["v6 folder"])
    folder = env.settings.resolved_path_index_folder()
    graph = read_index(env, PathIndex(folder=folder))
    expected = search(graph, *ends(env))
    (entry,) = holders(the_version_folder(folder))
    pid, number = entry.split("-")[1:3]
    assert int(pid) == os.getpid()
    descriptor = os.open(f"/proc/self/fd/{number}", os.O_RDWR)
    try:
        with pytest.raises(PermissionError):
            os.ftruncate(descriptor, 0)
        with pytest.raises(PermissionError):
            os.pwrite(descriptor, bytes(4096), 0)
        with pytest.raises(PermissionError):
            mmap.mmap(descriptor, 0)  # shared and writable
    finally:
        os.close(descriptor)
    assert search(graph, *ends(env)) == expected != []


def memory_file(content: bytes, sealed: bool) -> int:
    copy = os.memfd_create("graphsvc-path-index-test", os.MFD_ALLOW_SEALING)
    os.write(copy, content)
    if sealed:
        fcntl.fcntl(copy, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK)
        fcntl.fcntl(copy, fcntl.F_ADD_SEALS, fcntl.F_SEAL_GROW)
    return copy


def test_a_registered_copy_is_used_only_sealed_and_as_written(env: Env, builds: list[Any]) -> None:
    """Registered copies of the right size, one with the bytes written but not sealed (they
    could change after the check), one sealed with one byte changed: neither is used; their
    entries go, and the index is copied from the files again."""
    ingest(env, SAMPLES["v6 folder"])
    folder = env.settings.resolved_path_index_folder()
    held = read_index(env, PathIndex(folder=folder))
    expected = search(held, *ends(env))
    place = the_version_folder(folder)
    (entry,) = holders(place)
    with Path(f"/proc/self/fd/{entry.split('-')[2]}").open("rb") as genuine:
        content = genuine.read()
    del held  # its copy is closed with it: its entry no longer names an open copy
    changed = bytearray(content)
    changed[-1] ^= 1
    fakes = [memory_file(content, sealed=False), memory_file(bytes(changed), sealed=True)]
    try:
        for fake in fakes:
            found = os.fstat(fake)
            (place / f"holder-{os.getpid()}-{fake}-{found.st_dev}-{found.st_ino}").touch()
        graph = read_index(env, PathIndex(folder=folder))
        assert search(graph, *ends(env)) == expected
        (used,) = copies_mapped(os.getpid(), place.name)
        assert used not in {os.fstat(fake).st_ino for fake in fakes}
        (registered,) = holders(place)
        assert registered.endswith(f"-{used}")
        assert len(builds) == 1
    finally:
        for fake in fakes:
            os.close(fake)


def test_without_sealed_memory_files_each_process_keeps_its_own(
    env: Env, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Where memfd is missing (outside Linux), no copy can be shared safely."""
    ingest(env, SAMPLES["v6 folder"])
    monkeypatch.delattr(os, "memfd_create")
    with caplog.at_level(logging.WARNING, logger="graphsvc.graph.paths"):
        answer = env.get(URI)
    assert answer.status_code == 200, answer.text
    assert path_warnings(caplog) == [
        "path index kept in this process's memory only: "
        f"{env.settings.resolved_path_index_folder()}: the index is shared through sealed "
        "memory files (memfd, Linux)"
    ]


def test_a_caller_cancelled_keeps_the_folder_until_its_thread_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server stopping cancels a build whose thread is reading the files: that thread
    goes on with the folder's descriptor, so it stays open, and the lock held, until the
    thread ends (closed under it, a descriptor's number could name another folder)."""
    folder = tmp_path / "index"
    version = GraphVersion(1, "run", 0)
    (folder / version.name).mkdir(parents=True, mode=0o700)
    folder.chmod(0o700)
    reading, release = threading.Event(), threading.Event()

    def held(place: int, wanted: GraphVersion) -> GraphIndex:
        reading.set()
        release.wait()
        raise index_files.Untrusted("let go")

    monkeypatch.setattr(index_files, "load_version", held)

    async def scenario() -> None:
        async def load() -> None:
            async with index_files.hold_lock(folder) as files:
                await files.load(version)

        task = asyncio.create_task(load())
        other = os.open(folder / "build.lock", os.O_RDWR | os.O_CREAT)
        try:
            assert await asyncio.to_thread(reading.wait, 60)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            release.set()
        try:
            await asyncio.to_thread(fcntl.flock, other, fcntl.LOCK_EX)  # released once it ends
        finally:
            os.close(other)

    asyncio.run(scenario())
