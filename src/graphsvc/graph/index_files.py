"""The path index kept as files, so that a process (a server restarted on an unchanged graph,
`graphsvc path`) reads it instead of building it again, and shared in memory by the
processes of one machine, so that the memory of one index is paid once.

The store's folder (`Settings.resolved_path_index_folder`) holds a lock file and one
subfolder per graph version (`GraphVersion.name`): one `.npy` file per array and a manifest,
`meta.json`, with each file's size and SHA-256. The process that holds the lock builds a
missing version while the others wait for it, then use what it wrote. The folder is opened
only to obtain the index of a graph version the process does not hold (graph/paths.py
`PathIndex.obtain`; in a server, by its builder task, never by a request's handler), to
read that version, or to write it and remove the versions before it: a request on an index
found current reads and writes nothing here. Nothing there is trusted for being there:

- The folder is used only if it is this process's user's and open to no one else (made
  0700 where missing). In a shared GRAPHSVC_PATH_INDEX_DIR, another local user could make
  it first and plant links and forged files in it. A folder refused, or a lock file that is
  a link or another user's, leaves the process with an index of its own, in memory
  (IndexFolderUnavailable), and a warning naming it: the answers are the same, at the cost
  of memory and a build per process, while refusing to start would let any user who can
  write that folder stop the service.
- Every name is opened relative to the folder's descriptor, never through a link
  (O_NOFOLLOW), and checked on the descriptor opened (fstat, not a second look at the path).
  A version is written into a new subfolder, then renamed into place.
- A version is used only if every file has the size and the SHA-256 of its manifest,
  checked on the very bytes the searches then read: a damaged or forged version is built
  again and replaced, not served.
- The searches read a copy of the files that cannot change: an anonymous memory file
  (memfd) sealed against writing, shrinking and growing, whose bytes and size no process can
  change, root included. Mapped as they were, the files were the index: a byte changed in
  one changed answers, and a truncation killed the process (SIGBUS). MAP_PRIVATE would not
  do: a private mapping still sees the file's pages it has not copied, and still faults
  past a truncation.
- The processes share that copy, not the files: each registers its copy in the version's
  folder (`holder-PID-FD-DEVICE-INODE`), and the next one opens it through /proc/PID/fd/FD,
  checks that it is sealed and that its bytes match the manifest, and maps the same pages.

What that costs, at 1,000,001 nodes and 9,247,983 relationships (ScaleGraph: seven files,
128 MB, measured before the object ids' hashes were added: two files, 12 MB more), on this
project's 2-core machine, medians of 5 runs with the files in the page cache:

- SHA-256 of the 128 MB: 66 ms (OpenSSL on the CPU's SHA instructions, 1.9 GB/s). CRC-32
  took 19 ms, but a file can be made to match a CRC; not a SHA-256.
- Writing a version: 0.22 s where np.save took 0.02 s (hashed as written, then copied and
  checked), after a build of 8 to 19 s.
- The first process to read a version: 199 ms to copy the files and check the copy, where
  mapping them took 3 ms (each page then read from the file at its first use: 75 ms to
  touch them all, 45 ms in the copy).
- Every other process: 100 ms to open that copy and check it, and no memory of its own for
  the index. `serve --workers 2` (bench/path_workers.py, one path asked of each worker):
  the workers' PSS summed to 340 MB, against 298 MB mapping the files and 443 MB with an
  index per worker. The 42 MB: the check reads all of the copy, so all of it is in memory,
  where a mapping held only the pages searches had touched (an exposure reads most). And
  it stays in memory: unlike a file's clean pages, the kernel cannot drop it under pressure
  (without swap), while the files' pages, read once, can be.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import functools
import hashlib
import io
import json
import logging
import mmap
import os
import secrets
import shutil
import stat
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from graphsvc.graph.path_index import Adjacency, GraphIndex, ObjectIds
from graphsvc.store.paths import GraphVersion

log = logging.getLogger(__name__)
T = TypeVar("T")

# How often a process waiting for another's build tries the lock again.
LOCK_POLL_SECONDS = 0.05

LOCK = "build.lock"
MANIFEST = "meta.json"
HOLDER = "holder-"

ARRAY_NAMES = (
    "forward_offsets",
    "forward_others",
    "forward_kinds",
    "backward_offsets",
    "backward_others",
    "backward_kinds",
    "principals",
    "object_id_hashes",
    "object_id_nodes",
)

# The types build_index gives the arrays (path_index.node_dtype and kind_dtype, the offsets,
# the principals, the object ids' hashes); a file of any other is not one it wrote.
DTYPES = frozenset(np.dtype(t) for t in (np.int64, np.int32, np.int16, np.bool_, np.uint64))

# The header of a version 1.0 .npy file: its length in 2 bytes, after 8 of magic.
NPY_HEADER_LIMIT = 10 + 2**16


class IndexFolderUnavailable(Exception):
    """The folder cannot be used: it cannot be created, locked or written (a read-only or
    full disk), or it is not this user's alone. The process keeps its own index in memory
    instead."""


class Untrusted(Exception):
    """A name in the folder that is not as this service made it: a link, another user's,
    open to others, or not the bytes written."""


@contextlib.asynccontextmanager
async def hold_lock(folder: Path) -> AsyncIterator[IndexFolder]:
    """The folder, checked, with its lock held by one process (and one task) at a time;
    waiting for it can be cancelled."""
    files = IndexFolder.open(folder)
    try:
        while True:
            try:
                fcntl.flock(files.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await asyncio.sleep(LOCK_POLL_SECONDS)
        yield files
    finally:
        files.close()  # releases the lock


class IndexFolder:
    """The store's folder open, and its lock file: every name in it is looked up from this
    descriptor, never through the folder's path again."""

    def __init__(self, path: Path, descriptor: int, lock: int) -> None:
        self.path = path
        self.descriptor = descriptor
        self.lock = lock
        self.running: asyncio.Future[Any] | None = None  # the thread reading or writing

    @classmethod
    def open(cls, path: Path) -> IndexFolder:
        if not hasattr(os, "memfd_create"):
            raise IndexFolderUnavailable(
                f"{path}: the index is shared through sealed memory files (memfd, Linux)"
            )
        try:
            descriptor = open_folder(path)
        except Untrusted as exc:
            raise IndexFolderUnavailable(
                f"{path}: {exc}; graphsvc keeps its index only in a folder that it alone can "
                "use: remove that folder"
            ) from exc
        except OSError as exc:
            raise IndexFolderUnavailable(f"{path}: {exc.strerror or exc}") from exc
        try:
            lock = open_checked(LOCK, os.O_RDWR | os.O_CREAT, descriptor)
        except Untrusted as exc:
            os.close(descriptor)
            raise IndexFolderUnavailable(f"{path / LOCK}: {exc}") from exc
        except OSError as exc:
            os.close(descriptor)
            raise IndexFolderUnavailable(f"{path / LOCK}: {exc.strerror or exc}") from exc
        return cls(path, descriptor, lock)

    def close(self) -> None:
        """Closed, and the lock released, once no thread uses them: a caller cancelled (the
        server stopping) leaves its thread running, which must not act on descriptors closed
        under it, maybe already reused for other files, nor write unlocked."""
        if self.running is not None and not self.running.done():
            self.running.add_done_callback(lambda _: self.close())
        else:
            os.close(self.lock)
            os.close(self.descriptor)

    async def load(self, version: GraphVersion) -> GraphIndex | None:
        """The index of `version`, from a copy another process made or from the files; None
        when there are none, or when they fail a check (a warning says which: they are built
        again). The caller holds the lock."""
        return await self.in_thread(functools.partial(load_index, self, version))

    async def save(self, index: GraphIndex) -> GraphIndex:
        """Write `index` under its version, remove every other version (and what an
        interrupted build left), and return the index read from what was written. The caller
        holds the lock."""
        return await self.in_thread(functools.partial(save_index, self, index))

    async def in_thread(self, work: Callable[[], T]) -> T:
        self.running = asyncio.get_running_loop().run_in_executor(None, work)
        return await asyncio.shield(self.running)


def load_index(files: IndexFolder, version: GraphVersion) -> GraphIndex | None:
    place = files.path / version.name
    try:
        try:
            folder = open_checked(version.name, os.O_RDONLY | os.O_DIRECTORY, files.descriptor)
        except FileNotFoundError:
            return None
        try:
            return load_version(folder, version)
        finally:
            os.close(folder)
    except Untrusted as exc:
        log.warning("path index files in %s fail a check (%s): building them again", place, exc)
        return None
    except OSError as exc:
        raise IndexFolderUnavailable(f"{place}: {exc.strerror or exc}") from exc


def save_index(files: IndexFolder, index: GraphIndex) -> GraphIndex:
    name, folder = index.version.name, files.descriptor
    building = f".building-{secrets.token_hex(8)}"
    try:
        os.mkdir(building, 0o700, dir_fd=folder)
        try:
            write_version(building, folder, index)
            remove(name, folder)  # files that failed their check
            os.rename(building, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            remove(building, folder)
            raise
    except OSError as exc:
        raise IndexFolderUnavailable(f"{files.path}: {exc.strerror or exc}") from exc
    # A process still searching an older version keeps its copy, which is not these files.
    # What cannot be removed now is at the next build.
    for other in os.listdir(folder):
        if other not in (name, LOCK):
            with contextlib.suppress(OSError):
                remove(other, folder)
    saved = load_index(files, index.version)
    if saved is None:
        raise IndexFolderUnavailable(
            f"{files.path / name}: the index written there cannot be read back"
        )
    return saved


def open_folder(path: Path) -> int:
    """The store's folder, made owner-only where missing; refused unless it is this user's
    and open to no one else."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path.name, 0o700, dir_fd=parent)
        descriptor = open_checked(path.name, os.O_RDONLY | os.O_DIRECTORY, parent)
    finally:
        os.close(parent)
    mode = stat.S_IMODE(os.fstat(descriptor).st_mode)
    if mode & 0o077:
        os.close(descriptor)
        raise Untrusted(f"open to other users (mode {mode:o})")
    return descriptor


def open_checked(name: str, flags: int, folder: int) -> int:
    """`name` in `folder`, opened without following a link and refused unless this user's,
    as the descriptor opened says (a second look at the path could see another file)."""
    try:
        descriptor = os.open(name, flags | os.O_NOFOLLOW, 0o600, dir_fd=folder)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Untrusted("is a symbolic link") from exc
        raise
    owner = os.fstat(descriptor).st_uid
    if owner != os.geteuid():
        os.close(descriptor)
        raise Untrusted(f"owned by uid {owner}, not by this process's uid {os.geteuid()}")
    return descriptor


def open_file(name: str, folder: int) -> int:
    """A file of a version's folder, to read; what is wrong with it is the version's."""
    try:
        return open_checked(name, os.O_RDONLY, folder)
    except Untrusted as exc:
        raise Untrusted(f"{name}: {exc}") from exc
    except OSError as exc:
        raise Untrusted(f"{name}: {exc.strerror or exc}") from exc


def remove(name: str, folder: int) -> None:
    """`name` in `folder`, with what it holds if it is a folder; never what a link names."""
    try:
        found = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(found.st_mode):
        shutil.rmtree(name, dir_fd=folder)
    else:
        os.unlink(name, dir_fd=folder)


@dataclass(frozen=True)
class Manifest:
    size: int
    kind_ids: dict[str, int]
    files: dict[str, tuple[int, str]]  # array name -> the file's bytes and SHA-256

    def places(self) -> Iterator[tuple[str, int, int, str]]:
        """Each array's name, the offset of its file in the copy (each on a page of its own:
        the arrays' data, 64 bytes into a file, stay aligned), its bytes and SHA-256."""
        start = 0
        for name in ARRAY_NAMES:
            size, digest = self.files[name]
            yield name, start, size, digest
            start += -(-size // mmap.PAGESIZE) * mmap.PAGESIZE

    def copy_size(self) -> int:
        *_, (_, start, size, _) = self.places()
        return start + size


def read_manifest(folder: int, version: GraphVersion) -> Manifest:
    with os.fdopen(open_file(MANIFEST, folder), "rb") as file:
        text = file.read()
    try:
        meta = json.loads(text)
        written_for = meta["version"]
        files = {
            name: (int(meta["files"][name]["bytes"]), str(meta["files"][name]["sha256"]))
            for name in ARRAY_NAMES
        }
        kind_ids = {str(kind): int(kind_id) for kind, kind_id in meta["kind_ids"].items()}
        manifest = Manifest(int(meta["size"]), kind_ids, files)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Untrusted(f"{MANIFEST}: cannot be read ({exc!r})") from exc
    if written_for != version.name:  # a version's files under another's name
        raise Untrusted(f"{MANIFEST}: written for version {written_for}")
    return manifest


def load_version(folder: int, version: GraphVersion) -> GraphIndex:
    """The index from a copy registered by another process, or else from a new copy of the
    files; registered for the next."""
    manifest = read_manifest(folder, version)
    for entry, held, known in registered_copies(folder):
        try:
            copy = os.open(held, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:  # closed since
            os.unlink(entry, dir_fd=folder)
            continue
        try:
            if identity(os.fstat(copy)) != known:
                raise Untrusted("another file under that number")
            index = mapped(copy, manifest, version)
        except (Untrusted, OSError):  # not sealed, not the bytes of this manifest
            os.close(copy)
            os.unlink(entry, dir_fd=folder)
            continue
        register(folder, copy)
        return index
    copy = copy_files(folder, manifest, version)
    try:
        index = mapped(copy, manifest, version)
    except BaseException:
        os.close(copy)
        raise
    register(folder, copy)
    return index


def registered_copies(folder: int) -> list[tuple[str, str, tuple[int, int]]]:
    """The copies registered in a version's folder that are still open in their process:
    each one's entry, its name in /proc and its identity; the others' entries are removed.
    Only looked at, not opened: a number its process has since given to another file could
    name a device, and opening some acts on them."""
    found = []
    for entry in os.listdir(folder):
        if not entry.startswith(HOLDER):
            continue
        try:
            pid, number, device, inode = (int(n) for n in entry.removeprefix(HOLDER).split("-"))
            held = f"/proc/{pid}/fd/{number}"
            if identity(os.stat(held)) == (device, inode):
                found.append((entry, held, (device, inode)))
                continue
        except (ValueError, OSError):  # its process has ended, or closed it
            pass
        os.unlink(entry, dir_fd=folder)
    return found


def identity(found: os.stat_result) -> tuple[int, int]:
    return found.st_dev, found.st_ino


def register(folder: int, copy: int) -> None:
    device, inode = identity(os.fstat(copy))
    entry = f"{HOLDER}{os.getpid()}-{copy}-{device}-{inode}"
    os.close(os.open(entry, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600, dir_fd=folder))


def copy_files(folder: int, manifest: Manifest, version: GraphVersion) -> int:
    """A sealed memory file holding the version's files, each at its place."""
    copy = os.memfd_create(
        f"graphsvc-path-index-{version.name}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING
    )
    try:
        for name, start, size, _ in manifest.places():
            os.lseek(copy, start, os.SEEK_SET)
            copy_file(f"{name}.npy", folder, copy, size)
        fcntl.fcntl(copy, fcntl.F_ADD_SEALS, seals() | fcntl.F_SEAL_SEAL)
    except BaseException:
        os.close(copy)
        raise
    return copy


def copy_file(name: str, folder: int, copy: int, size: int) -> None:
    source = open_file(name, folder)
    try:
        found = os.fstat(source).st_size
        if found != size:
            raise Untrusted(f"{name}: {found} bytes, where {size} were written")
        done = 0
        while done < size:
            sent = os.sendfile(copy, source, done, size - done)
            if sent == 0:
                raise Untrusted(f"{name}: cut short while it was read")
            done += sent
    finally:
        os.close(source)


def seals() -> int:
    """What makes a copy's bytes and size final."""
    return fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW


def mapped(copy: int, manifest: Manifest, version: GraphVersion) -> GraphIndex:
    """The index in a copy, mapped once its seals and every file's bytes are checked; the
    copy's descriptor is closed with the mapping (until then, other processes can open it)."""
    if fcntl.fcntl(copy, fcntl.F_GET_SEALS) & seals() != seals():
        raise Untrusted("a copy that can still change")
    size = manifest.copy_size()
    if os.fstat(copy).st_size != size:
        raise Untrusted("a copy of another size")
    memory = mmap.mmap(copy, size, prot=mmap.PROT_READ)
    try:
        headers = check_copy(memory, manifest)
    except Untrusted:
        memory.close()
        raise
    arrays = {
        name: np.frombuffer(memory, dtype, count, offset)
        for name, (dtype, count, offset) in headers.items()
    }
    weakref.finalize(memory, os.close, copy)
    return GraphIndex(
        version,
        manifest.size,
        Adjacency(arrays["forward_offsets"], arrays["forward_others"], arrays["forward_kinds"]),
        Adjacency(arrays["backward_offsets"], arrays["backward_others"], arrays["backward_kinds"]),
        manifest.kind_ids,
        arrays["principals"],
        ObjectIds(arrays["object_id_hashes"], arrays["object_id_nodes"]),
    )


def check_copy(memory: mmap.mmap, manifest: Manifest) -> dict[str, tuple[np.dtype[Any], int, int]]:
    """Each file's bytes in the copy checked against the manifest, and its array's type,
    length and offset in the copy, from its header."""
    headers = {}
    with memoryview(memory) as view:
        for name, start, size, digest in manifest.places():
            if hashlib.sha256(view[start : start + size]).hexdigest() != digest:
                raise Untrusted(f"{name}.npy: not the bytes written (its SHA-256 differs)")
            head = io.BytesIO(view[start : start + min(size, NPY_HEADER_LIMIT)])
            try:
                if np.lib.format.read_magic(head) != (1, 0):
                    raise ValueError("not a version 1.0 .npy file")
                shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(head)
            except ValueError as exc:
                raise Untrusted(f"{name}.npy: {exc}") from exc
            if dtype not in DTYPES or fortran_order or len(shape) != 1:
                raise Untrusted(f"{name}.npy: an array of {dtype} {shape}")
            if head.tell() + shape[0] * dtype.itemsize != size:
                raise Untrusted(f"{name}.npy: {size} bytes for {shape[0]} of {dtype}")
            headers[name] = (dtype, shape[0], start + head.tell())
    return headers


class Written:
    """A new file in a folder, written through `write` and hashed as it goes."""

    def __init__(self, name: str, folder: int) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        self.descriptor = os.open(name, flags, 0o600, dir_fd=folder)
        self.size = 0
        self.digest = hashlib.sha256()

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        self.digest.update(view)
        self.size += len(view)
        while view:
            view = view[os.write(self.descriptor, view) :]

    def close(self) -> None:
        os.close(self.descriptor)


def write_version(building: str, folder: int, index: GraphIndex) -> None:
    """The index's files and its manifest, in the new folder `building`. Not synced: a file
    a crash left short or torn fails its check, and the version is built again."""
    place = os.open(building, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
    try:
        files = {}
        for name, array in arrays_of(index).items():
            written = Written(f"{name}.npy", place)
            try:
                np.lib.format.write_array(written, array, version=(1, 0), allow_pickle=False)
            finally:
                written.close()
            files[name] = {"bytes": written.size, "sha256": written.digest.hexdigest()}
        meta = {
            "version": index.version.name,
            "size": index.size,
            "kind_ids": index.kind_ids,
            "files": files,
        }
        written = Written(MANIFEST, place)
        try:
            written.write(json.dumps(meta).encode())
        finally:
            written.close()
    finally:
        os.close(place)


def arrays_of(index: GraphIndex) -> dict[str, npt.NDArray[Any]]:
    forward, backward = index.forward, index.backward
    arrays: list[npt.NDArray[Any]] = [forward.offsets, forward.others, forward.kinds]
    arrays += [backward.offsets, backward.others, backward.kinds, index.principals]
    arrays += [index.object_ids.hashes, index.object_ids.nodes]
    return dict(zip(ARRAY_NAMES, arrays, strict=True))
