"""The ingester: the background ingest of ended file-upload jobs, run by every serving replica.

Jobs queue in the database (status Ingesting). A replica's ingester takes the store's one
ingest lease, takes the oldest queued job, writes its files from the database to a private
temporary folder, and ingests them with `ingest_files`, the path of `graphsvc ingest`, in one
transaction that also completes the job and gives the lease back: all or nothing.

The lease is what lets a job survive its replica: the holder renews it every third of
`ingest_lease_seconds` from a thread of its own (parsing holds the ingester's event loop for
seconds at a time), and a replica that dies stops renewing, so another takes the lease once it
expires and ingests the job again from its stored files. Completing is fenced: the
transaction gives the lease back only if this replica still holds it, and rolls back
otherwise. On SQLite the ingest transaction holds the store's write lock, so renewals wait (and
are skipped) while it runs, but no other replica can take the lease either until it ends.

The ingester runs in a thread with its own event loop and connections, so that this process
keeps answering requests while a job is parsed.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from graphsvc.ingest.records import IngestError
from graphsvc.ingest.run import ingest_files
from graphsvc.ingest.sources import IngestLimits
from graphsvc.logs import audit
from graphsvc.settings import Settings
from graphsvc.store import uploads
from graphsvc.store.db import (
    Connection,
    Database,
    create_database,
    database_errors,
    is_store_busy,
    is_store_full,
    run_in_transaction,
)
from graphsvc.uploads.jobs import free_name

log = logging.getLogger("graphsvc.ingester")
FOLDER_PREFIX = "graphsvc-job-"  # then the ingesting process's id
MAX_ATTEMPTS = 3  # a job whose ingest was cut off this often fails instead of being tried again
# A job's file is written under its name made safe and cut to this many bytes of UTF-8 (its
# name in the job stays its label): under the most a file name may have on the file systems
# a temporary folder lives on (255 bytes; eCryptfs, 143), with room for a repeated name's
# `-N`. Names stored before uploads bounded them had up to 800 bytes (200 characters).
MAX_DISK_NAME_BYTES = 128


class LeaseLost(Exception):
    """Another replica took the lease while this one was ingesting: its work must not count."""


def start_ingester(settings: Settings) -> JobIngester:
    """Start ingesting ended jobs in the background, until `stop()`."""
    ingester = JobIngester(settings)
    ingester.start()
    return ingester


class JobIngester:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.url = settings.resolved_database_url()
        # Who holds the lease, as the job's status message and the logs name it.
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.current: asyncio.Task[bool] | None = None
        # After an attempt stopped by a full disk, this replica takes no job until then
        # (time.monotonic()): another replica may have room.
        self.resting_until = 0.0

    def start(self) -> None:
        remove_orphaned_folders()
        self.thread = threading.Thread(target=self.run, name="ingester", daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop between jobs; a job being ingested is rolled back and stays queued."""
        self.stopping.set()
        if self.loop is not None and self.current is not None:
            self.loop.call_soon_threadsafe(self.current.cancel)
        if self.thread is not None:
            self.thread.join(timeout)

    def run(self) -> None:
        asyncio.run(self.serve())

    async def serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        db = create_database(self.url, pool_size=2)
        await db.open()
        try:
            while not self.stopping.is_set():
                self.current = asyncio.ensure_future(self.process_next_job(db))
                try:
                    worked = await self.current
                except asyncio.CancelledError:
                    return
                except Exception as exc:
                    if is_store_busy(exc):  # a `graphsvc ingest` holds SQLite's write lock
                        log.info("the store is busy with another write; the ingester waits")
                    else:
                        log.exception("the ingester failed; it tries again")
                    worked = False
                if not worked:
                    await asyncio.to_thread(self.stopping.wait, self.settings.ingest_poll_seconds)
        finally:
            await db.close()

    async def process_next_job(self, db: Database) -> bool:
        """Ingest the oldest queued job, if any and if this replica gets the lease; whether
        there was work."""
        now = datetime.now(UTC)
        async with db.reading() as conn:
            job_id = await uploads.next_queued_job(conn)
            idle_since = now - timedelta(seconds=self.settings.upload_job_timeout_seconds)
            stale = await uploads.list_stale_jobs(conn, idle_since)
        if stale:
            async with db.transaction(changes_answers=False) as conn:  # no kept answer shows a job
                await time_out_jobs(conn, stale, now)
        if job_id is None or time.monotonic() < self.resting_until:
            return bool(stale)
        async with db.transaction(changes_answers=False) as conn:  # no answer shows leases
            if not await uploads.take_lease(conn, self.holder, now, self.lease_until()):
                return False
            job_id = await uploads.next_queued_job(conn)  # again, under the lease
            if job_id is None:
                await uploads.release_lease(conn, self.holder)
                return False
            await uploads.renew_lease(conn, self.holder, self.lease_until(), job_id)
            attempt = await uploads.count_attempt(conn, job_id, f"ingesting on {self.holder}", now)
        if attempt > MAX_ATTEMPTS:
            await self.fail_job(
                db,
                job_id,
                f"the ingest was cut off {MAX_ATTEMPTS} times (a replica stopped, lost the "
                "database or found its disk full mid-ingest); see the server logs, then upload "
                "the files again",
            )
            return True
        keeper = LeaseKeeper(self.url, self.holder, job_id, self.settings.ingest_lease_seconds)
        keeper.start()
        try:
            await self.ingest_job(db, job_id, attempt)
        finally:
            keeper.stop()
        return True

    def lease_until(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self.settings.ingest_lease_seconds)

    async def ingest_job(self, db: Database, job_id: int, attempt: int) -> None:
        log.info("ingesting file-upload job %d (attempt %d)", job_id, attempt)
        try:
            with tempfile.TemporaryDirectory(prefix=f"{FOLDER_PREFIX}{os.getpid()}-") as folder:
                async with db.reading() as conn:
                    files = (await uploads.list_job_files(conn, [job_id]))[job_id]
                    paths = await write_job_files(conn, job_id, Path(folder))
                # Each file is named by its name in the job, whatever it was written under.
                names = {path: file.name for path, file in zip(paths, files, strict=True)}
                while True:
                    try:
                        message, run_id = await self.run_ingest(db, job_id, names)
                        break
                    except database_errors() as exc:
                        # Another writer (a `graphsvc ingest` on SQLite) holds the store: the
                        # job is not at fault, so it waits, under its lease.
                        if not is_store_busy(exc) or self.stopping.is_set():
                            raise
                        log.info("the store is busy with another write; the ingest waits")
                        await asyncio.sleep(self.settings.ingest_poll_seconds)
        except IngestError as exc:
            await self.fail_job(db, job_id, str(exc), failed=exc.source)
            return
        except LeaseLost:
            log.warning("file-upload job %d: lease lost mid-ingest; rolled back", job_id)
            return
        except asyncio.CancelledError:
            await asyncio.shield(self.give_back_lease(db))
            raise
        except Exception as exc:
            if is_disk_full(exc):
                # Not the files' fault either, and the disk may have room again later: the
                # job keeps its files and is tried again, after a rest, up to MAX_ATTEMPTS.
                log.warning("file-upload job %d: the disk is full (%s); tried again", job_id, exc)
                reason = (
                    f"the server's disk is full (attempt {attempt} of {MAX_ATTEMPTS}); queued to "
                    "be tried again"
                )
                await asyncio.shield(self.give_back_lease(db, job_id, reason))
                self.resting_until = time.monotonic() + self.settings.ingest_lease_seconds
            elif isinstance(exc, database_errors()):
                # Not the files' fault (the database went away, say): the job stays queued,
                # and this or another replica tries again, up to MAX_ATTEMPTS.
                log.exception("file-upload job %d: the ingest failed; it is tried again", job_id)
                await asyncio.shield(self.give_back_lease(db))
            else:
                log.exception("file-upload job %d: the ingest failed", job_id)
                await self.fail_job(
                    db, job_id, f"internal error ({type(exc).__name__}); see the server log"
                )
            return
        audit(
            "upload.ingested", f"file-upload job {job_id}: {message}", job_id=job_id, run_id=run_id
        )

    async def run_ingest(
        self, db: Database, job_id: int, names: dict[Path, str]
    ) -> tuple[str, str]:
        """One run of the job's files (written at the keys of `names`, named by its values),
        completing the job in the same transaction; the job's status message and the run's
        id."""
        limits = IngestLimits(self.settings.max_zip_entries, self.settings.max_ingest_documents)
        async with db.transaction() as conn:
            result = await ingest_files(
                conn,
                list(names),
                names=names,
                limits=limits,
                citrix_rdp_support=self.settings.citrix_rdp_support,
                cache_mb=self.settings.ingest_cache_mb,
            )
            skipped = sum(result.skipped.values())
            message = (
                f"ingested {len(result.files)} documents: {result.nodes} nodes, "
                f"{result.edges} edges"
                + (f"; {skipped} records of kinds not read" if skipped else "")
            )
            now = datetime.now(UTC)
            zips = await zip_names(conn, job_id)
            for label in result.files:
                warnings = [
                    f"not read: {count} record(s) of {kind}"
                    for kind, count in result.skipped_by_source.get(label, {}).items()
                ]
                await uploads.insert_task(
                    conn, job_id, *split_label(label, zips), [], warnings, now
                )
            await uploads.set_job_status(
                conn, job_id, uploads.COMPLETE, message, now, True, result.run_id
            )
            await uploads.delete_job_bytes(conn, job_id)
            if not await uploads.release_lease(conn, self.holder):
                raise LeaseLost
        return message, result.run_id

    async def fail_job(
        self, db: Database, job_id: int, message: str, failed: str | None = None
    ) -> None:
        """Fail a job, dropping its files, if this replica still holds the lease; `failed`
        names the document at fault, when one is. Each file gets its result: the error, or
        that nothing of it was ingested (a job is ingested whole or not at all)."""
        async with db.transaction() as conn:
            if not await uploads.release_lease(conn, self.holder):
                return
            now = datetime.now(UTC)
            zips = await zip_names(conn, job_id)
            if failed is not None:
                file_name, parent = split_label(failed, zips)
                await uploads.insert_task(conn, job_id, file_name, parent, [message], [], now)
            else:
                parent = ""
            others = [
                f.name
                for f in (await uploads.list_job_files(conn, [job_id]))[job_id]
                if f.name not in (failed, parent)
            ]
            cause = f"{failed} failed" if failed is not None else message
            for name in others:
                note = f"not ingested: the job is ingested whole or not at all, and {cause}"
                await uploads.insert_task(conn, job_id, name, "", [note], [], now)
            await uploads.set_job_status(conn, job_id, uploads.FAILED, message, now, ended=True)
            await uploads.delete_job_bytes(conn, job_id)
        audit(
            "upload.failed",
            f"file-upload job {job_id} failed: {message}",
            job_id=job_id,
            reason=message,
        )

    async def give_back_lease(
        self, db: Database, job_id: int | None = None, reason: str | None = None
    ) -> None:
        """Give the lease back, the job staying queued; with `reason`, the job's status
        message says why its attempt stopped (if this replica still held the lease)."""
        async with db.transaction(changes_answers=reason is not None) as conn:
            released = await uploads.release_lease(conn, self.holder)
            if released and job_id is not None and reason is not None:
                now = datetime.now(UTC)
                await uploads.set_job_status(conn, job_id, uploads.INGESTING, reason, now)


def is_disk_full(exc: BaseException) -> bool:
    """Whether a write found the disk full: the job's folder, or the store."""
    return is_store_full(exc) or (
        isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
    )


async def zip_names(conn: Connection, job_id: int) -> set[str]:
    files = (await uploads.list_job_files(conn, [job_id]))[job_id]
    return {f.name for f in files if f.content_type != "application/json"}


def split_label(label: str, zips: set[str]) -> tuple[str, str]:
    """A document's label as (file name, the zip it came from or "")."""
    parent, sep, entry = label.partition(": ")
    return (entry, parent) if sep and parent in zips else (label, "")


def remove_orphaned_folders() -> None:
    """Remove the job folders of processes that died mid-ingest (kill -9): each is the size
    of its job."""
    for folder in Path(tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}*"):
        pid = folder.name.removeprefix(FOLDER_PREFIX).partition("-")[0]
        if pid.isdigit() and not process_exists(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True


async def time_out_jobs(conn: Connection, job_ids: list[int], now: datetime) -> None:
    for job_id in job_ids:
        job = await uploads.find_job(conn, job_id, lock=True)
        if job is None or job.status != uploads.RUNNING:
            continue  # it took a file or was ended meanwhile
        await uploads.set_job_status(
            conn,
            job_id,
            uploads.TIMED_OUT,
            "its client was silent for too long; start a new job",
            now,
            True,
        )
        await uploads.delete_job_bytes(conn, job_id)
        audit("upload.timed_out", f"file-upload job {job_id} timed out", job_id=job_id)


async def write_job_files(conn: Connection, job_id: int, folder: Path) -> list[Path]:
    """The job's files, written from the database into `folder` in the order of
    `list_job_files`, each under its name made safe (disk_name). A job's names are unique
    since `store_upload` makes them so, but one stored before then may repeat one, a name
    cut may meet another, and a file system may fold case: a file never replaces another,
    it takes the next free name."""
    files = (await uploads.list_job_files(conn, [job_id]))[job_id]
    paths = []
    for file in files:
        taken = free_name(disk_name(file.name), lambda candidate: (folder / candidate).exists())
        path = folder / taken
        with path.open("xb") as out:
            seq = 0
            while (chunk := await uploads.fetch_chunk(conn, file.id, seq)) is not None:
                out.write(chunk)
                seq += 1
        paths.append(path)
    return paths


def disk_name(name: str) -> str:
    """A file name any file system takes for a stored name: no `/` or NUL, at most
    MAX_DISK_NAME_BYTES of UTF-8 without cutting a character, ending in .zip or .json as
    the name does (.json for any other: ingest tells zips by their bytes)."""
    extension = ".zip" if name.lower().endswith(".zip") else ".json"
    stem = name[: -len(extension)] if name.lower().endswith(extension) else name
    stem = stem.replace("/", "_").replace("\0", "_")
    room = MAX_DISK_NAME_BYTES - len(extension)
    return stem.encode(errors="replace")[:room].decode("utf-8", "ignore") + extension


class LeaseKeeper:
    """Renews the lease from a thread of its own while a job is ingested."""

    def __init__(self, url: str, holder: str, job_id: int, lease_seconds: float) -> None:
        self.url = url
        self.holder = holder
        self.job_id = job_id
        self.lease_seconds = lease_seconds
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, name="ingest-lease", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.done.set()
        self.thread.join()

    def run(self) -> None:
        while not self.done.wait(self.lease_seconds / 3):
            try:
                asyncio.run(run_in_transaction(self.url, self.renew, changes_answers=False))
            except database_errors() as exc:
                # On SQLite the ingest holds the write lock: nobody else can take the lease.
                log.debug("lease renewal skipped: %s", exc)

    async def renew(self, conn: Connection) -> None:
        until = datetime.now(UTC) + timedelta(seconds=self.lease_seconds)
        if not await uploads.renew_lease(conn, self.holder, until, self.job_id):
            log.warning("file-upload job %d: the lease was taken over", self.job_id)
