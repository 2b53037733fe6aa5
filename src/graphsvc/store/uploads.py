"""File-upload jobs, their files and the files' bytes (in chunks), and the ingest lease that
lets one replica at a time ingest a job."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graphsvc.store.db import Connection, Row
from graphsvc.store.dialect import in_list, list_param, row_lock
from graphsvc.store.filters import EQUALITY, RANGE, Filter, FilterColumn, filter_conditions
from graphsvc.store.paging import SortKey, fetch_page, order_clause

# The reference server's job states (its enum; graphsvc uses these five).
RUNNING, COMPLETE, CANCELED, TIMED_OUT, FAILED, INGESTING = 1, 2, 3, 4, 5, 6
LEASE = "ingest"  # the one lease row: one job at a time per store


@dataclass
class JobRow:
    id: int
    user_id: str
    status: int
    status_message: str
    start_time: datetime
    end_time: datetime | None
    last_ingest: datetime | None
    created_at: datetime
    updated_at: datetime
    run_id: str | None
    attempts: int


@dataclass
class FileRow:
    id: int
    job_id: int
    name: str
    content_type: str
    size_bytes: int
    uploaded_at: datetime


JOB_COLUMNS = """id, user_id, status, status_message, start_time, end_time, last_ingest,
    created_at, updated_at, run_id, attempts"""
TOTAL_FILES = "(SELECT count(*) FROM file_upload_files f WHERE f.job_id = file_upload_jobs.id)"
JOB_SORT_COLUMNS = {
    "id": "id",
    "status": "status",
    "status_message": "status_message",
    "total_files": TOTAL_FILES,
    "start_time": "start_time",
    "end_time": "end_time",
    "last_ingest": "last_ingest",
    "created_at": "created_at",
    "updated_at": "updated_at",
}


# The reference's job filters but user_email_address, deleted_at and failed_files (a job
# here is ingested whole or not at all; no file fails alone).
JOB_FILTERS = {
    "id": FilterColumn("id", "int", RANGE),
    "user_id": FilterColumn("user_id", "uuid", EQUALITY),
    "status": FilterColumn("status", "int", EQUALITY, bits=16),
    "status_message": FilterColumn("status_message", "text", EQUALITY),
    "start_time": FilterColumn("start_time", "time", RANGE),
    "end_time": FilterColumn("end_time", "time", RANGE, nullable=True),
    "last_ingest": FilterColumn("last_ingest", "time", RANGE, nullable=True),
    "created_at": FilterColumn("created_at", "time", RANGE),
    "updated_at": FilterColumn("updated_at", "time", RANGE),
    "total_files": FilterColumn(TOTAL_FILES, "int", RANGE),
}


def job_from_row(row: Row) -> JobRow:
    (
        job_id,
        user_id,
        status,
        status_message,
        start_time,
        end_time,
        last_ingest,
        created_at,
        updated_at,
        run_id,
        attempts,
    ) = row
    return JobRow(
        id=int(job_id),
        user_id=str(user_id),
        status=int(status),
        status_message=status_message,
        start_time=start_time,
        end_time=end_time,
        last_ingest=last_ingest,
        created_at=created_at,
        updated_at=updated_at,
        run_id=run_id,
        attempts=int(attempts),
    )


async def insert_job(conn: Connection, user_id: str, now: datetime) -> JobRow:
    r = await conn.fetchrow(
        f"""INSERT INTO file_upload_jobs (user_id, status, status_message, start_time,
            created_at, updated_at, attempts) VALUES ($1, $2, '', $3, $3, $3, 0)
        RETURNING {JOB_COLUMNS}""",
        user_id,
        RUNNING,
        now,
    )
    assert r is not None
    return job_from_row(r)


async def find_job(conn: Connection, job_id: int, lock: bool = False) -> JobRow | None:
    """A job; with `lock`, its row stays locked to this transaction on PostgreSQL (SQLite's
    write transaction already excludes every other writer)."""
    suffix = row_lock(conn.dialect, "FOR UPDATE") if lock else ""
    r = await conn.fetchrow(
        f"SELECT {JOB_COLUMNS} FROM file_upload_jobs WHERE id = $1{suffix}", job_id
    )
    return None if r is None else job_from_row(r)


async def list_jobs(
    conn: Connection, filters: Sequence[Filter], sort: Sequence[SortKey], skip: int, limit: int
) -> tuple[int, list[JobRow]]:
    """One page of the jobs the filters let through."""
    args: list[Any] = []
    conditions = ["TRUE", *filter_conditions(conn.dialect, filters, JOB_FILTERS, args)]
    total, rows = await fetch_page(
        conn,
        f"""SELECT {JOB_COLUMNS}, count(*) OVER () FROM file_upload_jobs
        WHERE {" AND ".join(conditions)}
        ORDER BY {order_clause(sort, JOB_SORT_COLUMNS, "id DESC")}""",
        args,
        skip,
        limit,
    )
    return total, [job_from_row(r[:-1]) for r in rows]  # without the total


async def list_job_files(conn: Connection, job_ids: Sequence[int]) -> dict[int, list[FileRow]]:
    """The files of each job, in the order they arrived; one statement for a page of jobs."""
    found: dict[int, list[FileRow]] = {job_id: [] for job_id in job_ids}
    if not job_ids:
        return found
    rows = await conn.fetch(
        f"""SELECT id, job_id, name, content_type, size_bytes, uploaded_at
        FROM file_upload_files WHERE {in_list(conn.dialect, "job_id", "$1", "bigint")}
        ORDER BY job_id, id""",
        list_param(conn.dialect, job_ids),
    )
    for file_id, job_id, name, content_type, size_bytes, uploaded_at in rows:
        found[int(job_id)].append(
            FileRow(int(file_id), int(job_id), name, content_type, int(size_bytes), uploaded_at)
        )
    return found


async def insert_file(
    conn: Connection, job_id: int, name: str, content_type: str, size: int, now: datetime
) -> int:
    file_id = await conn.fetchval(
        """INSERT INTO file_upload_files (job_id, name, content_type, size_bytes, uploaded_at)
        VALUES ($1, $2, $3, $4, $5) RETURNING id""",
        job_id,
        name,
        content_type,
        size,
        now,
    )
    await conn.execute(
        "UPDATE file_upload_jobs SET last_ingest = $2, updated_at = $2 WHERE id = $1", job_id, now
    )
    return int(file_id)


async def insert_chunk(conn: Connection, file_id: int, seq: int, data: bytes) -> None:
    await conn.execute(
        "INSERT INTO file_upload_chunks (file_id, seq, data) VALUES ($1, $2, $3)",
        file_id,
        seq,
        data,
    )


async def fetch_chunk(conn: Connection, file_id: int, seq: int) -> bytes | None:
    data = await conn.fetchval(
        "SELECT data FROM file_upload_chunks WHERE file_id = $1 AND seq = $2", file_id, seq
    )
    return None if data is None else bytes(data)


async def delete_job_bytes(conn: Connection, job_id: int) -> None:
    """Drop a finished job's uploaded bytes; its file list stays."""
    await conn.execute(
        """DELETE FROM file_upload_chunks WHERE file_id IN
        (SELECT id FROM file_upload_files WHERE job_id = $1)""",
        job_id,
    )


async def set_job_status(
    conn: Connection,
    job_id: int,
    status: int,
    message: str,
    now: datetime,
    ended: bool = False,
    run_id: str | None = None,
) -> None:
    await conn.execute(
        """UPDATE file_upload_jobs SET status = $2, status_message = $3, updated_at = $4,
            end_time = CASE WHEN $5 THEN $4 ELSE end_time END,
            run_id = coalesce($6, run_id)
        WHERE id = $1""",
        job_id,
        status,
        message,
        now,
        ended,
        run_id,
    )


async def count_attempt(conn: Connection, job_id: int, message: str, now: datetime) -> int:
    """Note that a replica has started ingesting the job; the attempts so far."""
    attempts = await conn.fetchval(
        """UPDATE file_upload_jobs SET attempts = attempts + 1, status_message = $2,
            updated_at = $3 WHERE id = $1 RETURNING attempts""",
        job_id,
        message,
        now,
    )
    return int(attempts)


async def next_queued_job(conn: Connection) -> int | None:
    found = await conn.fetchval(
        "SELECT id FROM file_upload_jobs WHERE status = $1 ORDER BY id LIMIT 1", INGESTING
    )
    return None if found is None else int(found)


async def touch_job(conn: Connection, job_id: int, now: datetime) -> None:
    await conn.execute(
        "UPDATE file_upload_jobs SET updated_at = $2 WHERE id = $1 AND status = $3",
        job_id,
        now,
        RUNNING,
    )


async def list_stale_jobs(conn: Connection, idle_since: datetime) -> list[int]:
    """Jobs still taking files that have heard nothing from their client since `idle_since`:
    no start, file, or part of a file arriving (each sets `updated_at`)."""
    rows = await conn.fetch(
        """SELECT id FROM file_upload_jobs WHERE status = $1
        AND updated_at < $2 ORDER BY id""",
        RUNNING,
        idle_since,
    )
    return [int(job_id) for (job_id,) in rows]


# --- the ingest lease -------------------------------------------------------------------------
# Taking, renewing and giving it back are single-row conditional updates: atomic on both
# stores (PostgreSQL rechecks the condition on the locked row; SQLite has one writer).


async def take_lease(conn: Connection, holder: str, now: datetime, until: datetime) -> bool:
    """The lease, if nobody holds it or its holder let it expire."""
    taken = await conn.fetchval(
        """UPDATE ingest_lease SET holder = $2, job_id = NULL, expires_at = $4
        WHERE name = $1 AND (holder IS NULL OR expires_at < $3) RETURNING name""",
        LEASE,
        holder,
        now,
        until,
    )
    return taken is not None


async def is_lease_held(conn: Connection, now: datetime) -> bool:
    """Whether an ingest holds the lease (and has not let it expire)."""
    held = await conn.fetchval(
        "SELECT 1 FROM ingest_lease WHERE name = $1 AND holder IS NOT NULL AND expires_at >= $2",
        LEASE,
        now,
    )
    return held is not None


async def renew_lease(conn: Connection, holder: str, until: datetime, job_id: int | None) -> bool:
    renewed = await conn.fetchval(
        """UPDATE ingest_lease SET expires_at = $3, job_id = coalesce($4, job_id)
        WHERE name = $1 AND holder = $2 RETURNING name""",
        LEASE,
        holder,
        until,
        job_id,
    )
    return renewed is not None


async def release_lease(conn: Connection, holder: str) -> bool:
    """Give the lease back; False if another replica took it meanwhile (this one's lease
    expired), and whatever this one did under it must not count."""
    released = await conn.fetchval(
        """UPDATE ingest_lease SET holder = NULL, job_id = NULL, expires_at = NULL
        WHERE name = $1 AND holder = $2 RETURNING name""",
        LEASE,
        holder,
    )
    return released is not None


@dataclass
class TaskRow:
    id: int
    job_id: int
    file_name: str
    parent_file_name: str
    errors: list[str]
    warnings: list[str]
    created_at: datetime


async def insert_task(
    conn: Connection,
    job_id: int,
    file_name: str,
    parent_file_name: str,
    errors: Sequence[str],
    warnings: Sequence[str],
    now: datetime,
) -> None:
    await conn.execute(
        """INSERT INTO file_upload_tasks (job_id, file_name, parent_file_name, errors,
            warnings, created_at) VALUES ($1, $2, $3, $4, $5, $6)""",
        job_id,
        file_name,
        parent_file_name,
        json.dumps(list(errors)),
        json.dumps(list(warnings)),
        now,
    )


async def list_tasks(conn: Connection, job_id: int) -> list[TaskRow]:
    rows = await conn.fetch(
        """SELECT id, job_id, file_name, parent_file_name, errors, warnings, created_at
        FROM file_upload_tasks WHERE job_id = $1 ORDER BY id""",
        job_id,
    )
    return [TaskRow(r[0], r[1], r[2], r[3], json.loads(r[4]), json.loads(r[5]), r[6]) for r in rows]
