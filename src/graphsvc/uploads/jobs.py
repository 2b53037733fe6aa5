"""File-upload jobs, as the reference server runs them: start a job, send it files (one per
request), end it; the job is then queued, and a replica's ingester (`uploads.ingester`)
ingests it through the same path as `graphsvc ingest`.

A caller holding `graphdb/Read` sees every job; any other uploader (Upload-Only) sees its own.
A job takes files and is ended by the user who started it, or by one with `auth/ManageUsers`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO

from graphsvc import wire
from graphsvc.accounts.permissions import MANAGE_USERS, READ_GRAPH, Caller
from graphsvc.errors import ApiError, bad_request, not_found
from graphsvc.logs import audit
from graphsvc.store import accounts, uploads
from graphsvc.store.db import Connection
from graphsvc.store.filters import Filter
from graphsvc.store.paging import Page, SortKey

# Content types a file may be sent as (the reference's list), and the kind of file each is.
ACCEPTED_TYPES = {
    "application/json": ".json",
    "application/zip": ".zip",
    "application/x-zip-compressed": ".zip",
    "application/zip-compressed": ".zip",
}
CHUNK_BYTES = 1024 * 1024  # a row of uploaded bytes: 1 GiB is 1,024 rows
STATUS_NAMES = {
    uploads.RUNNING: "Running",
    uploads.COMPLETE: "Complete",
    uploads.CANCELED: "Canceled",
    uploads.TIMED_OUT: "Timed Out",
    uploads.FAILED: "Failed",
    uploads.INGESTING: "Ingesting",
}


@dataclass
class UploadedBody:
    """A file's bytes as received, spooled to an unnamed temporary file."""

    file: IO[bytes]
    size: int
    content_type: str  # one of ACCEPTED_TYPES
    name: str | None  # as the client named it (Content-Disposition), if it did


def build_job(job: uploads.JobRow, files: Sequence[uploads.FileRow]) -> wire.FileUploadJob:
    return wire.FileUploadJob(
        id=job.id,
        created_at=job.created_at,
        updated_at=job.updated_at,
        deleted_at=wire.null_time(None),
        user_id=job.user_id,
        user_email_address="",  # graphsvc keeps no e-mail addresses
        status=job.status,
        status_message=job.status_message,
        start_time=job.start_time,
        end_time=job.end_time or wire.ZERO_TIME,
        last_ingest=job.last_ingest or wire.ZERO_TIME,
        total_files=len(files),
        total_bytes=sum(f.size_bytes for f in files),
        files=[
            wire.UploadedFile(f.name, f.content_type, f.size_bytes, f.uploaded_at) for f in files
        ],
        run_id=wire.null_uuid(job.run_id),
    )


async def answer_job(
    conn: Connection, job_id: int, files: Sequence[uploads.FileRow]
) -> wire.FileUploadJobResponse:
    """The job as it stands now (its row changed under this transaction), with its files."""
    job = await uploads.find_job(conn, job_id)
    assert job is not None
    return wire.FileUploadJobResponse(build_job(job, files))


def sees_every_job(caller: Caller) -> bool:
    return READ_GRAPH in caller.permissions


async def get_own_job(
    conn: Connection, caller: Caller, job_id: int, lock: bool = True
) -> uploads.JobRow:
    """A job the caller may add files to or end (locked until the transaction ends, unless
    `lock` is False), or 404: another user's job is not shown to a caller who may not act
    on it."""
    job = await uploads.find_job(conn, job_id, lock=lock)
    if job is None or (
        job.user_id != caller.principal.user_id and MANAGE_USERS not in caller.permissions
    ):
        raise not_found(f"no file-upload job {job_id}", "file_upload_job_id")
    return job


def require_running(job: uploads.JobRow, action: str) -> None:
    if job.status != uploads.RUNNING:
        state = STATUS_NAMES.get(job.status, str(job.status))
        raise bad_request(
            f"file-upload job {job.id} is {state}, not Running: it cannot {action}; "
            "start a new job",
            "file_upload_job_id",
        )


# A signed file's signature covers its body, so it can only be checked once the body is in.
# A client that knows a token's id but not its key may make the server receive this much of
# a file for a job that token did not start; more is refused from the headers (before, it
# could have the server spool a whole 4 GiB body before the 401).
UNPROVEN_UPLOAD_BYTES = 64 * 1024


async def check_upload_target(
    conn: Connection, caller: Caller, job_id: int, declared_bytes: int | None
) -> None:
    """Refuse a file for a job the caller may not add to, before the file is received;
    `store_upload` checks again, under the job's lock, once it has been. A file signed with
    a token, of `declared_bytes` (None: not declared) over UNPROVEN_UPLOAD_BYTES, is taken
    only once the token's key has been proven since the job started: by the signed start of
    the job (which notes it), or any verified request of the token since."""
    job = await get_own_job(conn, caller, job_id, lock=False)
    require_running(job, "take more files")
    if caller.token_id is None or (
        declared_bytes is not None and declared_bytes <= UNPROVEN_UPLOAD_BYTES
    ):
        return
    token = await accounts.find_user_token(conn, caller.token_id)
    if token is None or token.last_access is None or token.last_access < job.start_time:
        raise ApiError(
            401,
            f"a file over {UNPROVEN_UPLOAD_BYTES // 1024} KiB is taken, when signed with a "
            f"token, only for a job started with that token: start a job with it "
            "(POST /api/v2/file-upload/start) and send the file to that job",
            "Authorization",
            {"Connection": "close"},  # the body is not read
            code="unproven_token",
        )


async def note_file_arriving(conn: Connection, caller: Caller, job_id: int) -> None:
    """A file for the job is still arriving: the job is not idle (its timeout counts from
    the last sign of its client)."""
    await uploads.touch_job(conn, job_id, datetime.now(UTC))


STOPPED_MESSAGE = (
    "a file was still arriving when the server stopped (its shutdown grace ended): upload "
    "the files again in a new job"
)


async def fail_on_stop(conn: Connection, caller: Caller, job_id: int) -> None:
    """A file for the job was cut off by the server's stop: the job fails at once, saying
    why, where it waited for its timeout before (ten minutes, by default)."""
    job = await uploads.find_job(conn, job_id)
    if job is not None and job.status == uploads.RUNNING:
        now = datetime.now(UTC)
        await uploads.set_job_status(conn, job_id, uploads.FAILED, STOPPED_MESSAGE, now, ended=True)


async def start_upload_job(conn: Connection, caller: Caller) -> wire.FileUploadJobResponse:
    now = datetime.now(UTC)
    job = await uploads.insert_job(conn, caller.principal.user_id, now)
    if caller.token_id is not None:  # its key is proven: its files are taken (see above)
        await accounts.touch_token(conn, caller.token_id, now)
    audit("upload.started", f"file-upload job {job.id} started", job_id=job.id, user_id=job.user_id)
    return wire.FileUploadJobResponse(build_job(job, []))


def free_name(name: str, is_taken: Callable[[str], bool]) -> str:
    """`name`, or the first of `name-2.ext`, `name-3.ext`... that is not taken."""
    if not is_taken(name):
        return name
    stem, dot, extension = name.rpartition(".")
    if not stem:
        stem, dot, extension = name, "", ""
    number = 2
    while is_taken(f"{stem}-{number}{dot}{extension}"):
        number += 1
    return f"{stem}-{number}{dot}{extension}"


async def store_upload(
    conn: Connection, caller: Caller, job_id: int, upload: UploadedBody
) -> wire.FileUploadJobResponse:
    """Keep one received file in the job, in chunks, in the caller's transaction."""
    job = await get_own_job(conn, caller, job_id)
    require_running(job, "take more files")
    now = datetime.now(UTC)
    files = (await uploads.list_job_files(conn, [job.id]))[job.id]
    # Unique within the job, so that the files listed are the files ingested. Two files sent
    # at once cannot take one name: the job's row is locked (SQLite: one writer at a time).
    taken = {f.name for f in files}
    name = free_name(
        upload.name or f"file-{len(files) + 1}{ACCEPTED_TYPES[upload.content_type]}",
        lambda candidate: candidate in taken,
    )
    file_id = await uploads.insert_file(conn, job.id, name, upload.content_type, upload.size, now)
    upload.file.seek(0)
    seq = 0
    while chunk := upload.file.read(CHUNK_BYTES):
        await uploads.insert_chunk(conn, file_id, seq, chunk)
        seq += 1
    audit(
        "upload.file",
        f"file-upload job {job.id} received {name} ({upload.size} bytes)",
        job_id=job.id,
        file=name,
        size_bytes=upload.size,
    )
    added = uploads.FileRow(file_id, job.id, name, upload.content_type, upload.size, now)
    return await answer_job(conn, job.id, [*files, added])


async def end_upload_job(
    conn: Connection, caller: Caller, job_id: int
) -> wire.FileUploadJobResponse:
    """Close a job and queue it for ingest; a job without files is Complete at once, with
    nothing ingested (the reference ends it so too, after its analysis)."""
    job = await get_own_job(conn, caller, job_id)
    require_running(job, "be ended again")
    files = (await uploads.list_job_files(conn, [job.id]))[job.id]
    now = datetime.now(UTC)
    if not files:
        message = "no files were sent: nothing to ingest"
        await uploads.set_job_status(conn, job.id, uploads.COMPLETE, message, now, ended=True)
        audit("upload.ended", f"file-upload job {job.id} ended without files", job_id=job.id)
        return await answer_job(conn, job.id, files)
    await uploads.set_job_status(conn, job.id, uploads.INGESTING, "queued for ingest", now)
    audit("upload.ended", f"file-upload job {job.id} ended and queued", job_id=job.id)
    return await answer_job(conn, job.id, files)


async def cancel_upload_job(
    conn: Connection, caller: Caller, job_id: int
) -> wire.FileUploadJobResponse:
    """Stop a Running job (graphsvc's own route; `graphsvc upload` calls it when it is
    interrupted): Canceled, its files' bytes dropped, nothing ingested."""
    job = await get_own_job(conn, caller, job_id)
    require_running(job, "be canceled")
    now = datetime.now(UTC)
    await uploads.delete_job_bytes(conn, job.id)
    await uploads.set_job_status(
        conn, job.id, uploads.CANCELED, "canceled by its client", now, ended=True
    )
    audit("upload.canceled", f"file-upload job {job.id} canceled", job_id=job.id)
    files = (await uploads.list_job_files(conn, [job.id]))[job.id]
    return await answer_job(conn, job.id, files)


async def list_upload_jobs(
    conn: Connection, caller: Caller, page: Page, sort: list[SortKey], filters: list[Filter]
) -> wire.PagedFileUploadJobs:
    """Newest first unless sorted otherwise; a caller that may not see every job sees its
    own (the filters narrow that further)."""
    if not sees_every_job(caller):
        filters = [*filters, Filter("user_id", "eq", caller.principal.user_id)]
    total, jobs = await uploads.list_jobs(conn, filters, sort, page.skip, page.limit)
    files = await uploads.list_job_files(conn, [j.id for j in jobs])
    return wire.PagedFileUploadJobs(
        total, page.skip, page.limit, [build_job(j, files[j.id]) for j in jobs]
    )


async def list_completed_tasks(
    conn: Connection, caller: Caller, job_id: int
) -> wire.CompletedTaskList:
    """Each document of a finished job with its result (none while the job runs or waits);
    a job of another user only to a caller who may see every job."""
    job = await uploads.find_job(conn, job_id)
    if job is None or (job.user_id != caller.principal.user_id and not sees_every_job(caller)):
        raise not_found(f"no file-upload job {job_id}", "file_upload_job_id")
    return wire.CompletedTaskList(
        [
            wire.CompletedTask(
                t.id,
                t.job_id,
                t.file_name,
                t.parent_file_name,
                t.errors,
                t.warnings,
                t.created_at,
                t.created_at,
            )
            for t in await uploads.list_tasks(conn, job_id)
        ]
    )


async def list_accepted_types(conn: Connection) -> wire.AcceptedTypes:
    return wire.AcceptedTypes(list(ACCEPTED_TYPES))
