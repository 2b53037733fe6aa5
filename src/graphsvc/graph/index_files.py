"""The path index kept as files, shared by the processes of one machine: the workers of a
server (and `graphsvc path`) map the same arrays read-only, so the memory of one index is
paid once, and a server restarted on an unchanged graph maps the index instead of building
it again.

The folder holds one subfolder per graph version (`GraphVersion.name`) with one `.npy` file
per array, and a lock file: the process that holds the lock builds a missing version while
the others wait for it, then map what it wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from graphsvc.graph.path_index import Adjacency, GraphIndex
from graphsvc.store.paths import GraphVersion

# How often a process waiting for another's build tries the lock again.
LOCK_POLL_SECONDS = 0.05


class IndexFolderUnavailable(Exception):
    """The folder cannot be created, locked or written (a read-only or full disk, a
    folder of another user): the process keeps its own index in memory instead."""


@contextlib.asynccontextmanager
async def hold_lock(folder: Path) -> AsyncIterator[None]:
    """The folder's lock, held by one process (and one task) at a time; waiting for it
    can be cancelled."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(folder / "build.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise IndexFolderUnavailable(f"{folder}: {exc.strerror or exc}") from exc
    try:
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await asyncio.sleep(LOCK_POLL_SECONDS)
        yield
    finally:
        os.close(descriptor)  # releases the lock


ARRAY_NAMES = (
    "forward_offsets",
    "forward_others",
    "forward_kinds",
    "backward_offsets",
    "backward_others",
    "backward_kinds",
    "principals",
)


def arrays_of(index: GraphIndex) -> dict[str, npt.NDArray[Any]]:
    forward, backward = index.forward, index.backward
    arrays: list[npt.NDArray[Any]] = [forward.offsets, forward.others, forward.kinds]
    arrays += [backward.offsets, backward.others, backward.kinds, index.principals]
    return dict(zip(ARRAY_NAMES, arrays, strict=True))


def load_index(folder: Path, version: GraphVersion) -> GraphIndex | None:
    """The index of `version` mapped read-only from its files; None when there is none (or
    what there is cannot be read, and will be written again)."""
    place = folder / version.name
    try:
        meta = json.loads((place / "meta.json").read_text())
        arrays = {name: np.load(place / f"{name}.npy", mmap_mode="r") for name in ARRAY_NAMES}
        return GraphIndex(
            version,
            int(meta["size"]),
            Adjacency(arrays["forward_offsets"], arrays["forward_others"], arrays["forward_kinds"]),
            Adjacency(
                arrays["backward_offsets"], arrays["backward_others"], arrays["backward_kinds"]
            ),
            {str(kind): int(kind_id) for kind, kind_id in meta["kind_ids"].items()},
            arrays["principals"],
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def save_index(folder: Path, index: GraphIndex) -> GraphIndex:
    """Write `index` under its version, remove every other version (and what an interrupted
    build left), and return the index mapped from the files written. The caller holds the
    lock."""
    try:
        temporary = Path(tempfile.mkdtemp(prefix=".building-", dir=folder))
    except OSError as exc:
        raise IndexFolderUnavailable(f"{folder}: {exc.strerror or exc}") from exc
    place = folder / index.version.name
    try:
        for name, array in arrays_of(index).items():
            np.save(temporary / f"{name}.npy", array)
        meta = {"size": index.size, "kind_ids": index.kind_ids}
        (temporary / "meta.json").write_text(json.dumps(meta))
        shutil.rmtree(place, ignore_errors=True)  # one that could not be read
        temporary.rename(place)
    except OSError as exc:
        shutil.rmtree(temporary, ignore_errors=True)
        raise IndexFolderUnavailable(f"{folder}: {exc.strerror or exc}") from exc
    # A process still searching an older version keeps its mapping: the files go when it
    # lets go of them.
    for other in folder.iterdir():
        if other.is_dir() and other != place:
            shutil.rmtree(other, ignore_errors=True)
    saved = load_index(folder, index.version)
    if saved is None:
        raise IndexFolderUnavailable(f"{place}: the index written there cannot be read back")
    return saved
