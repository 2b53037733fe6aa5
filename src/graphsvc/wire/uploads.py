"""File-upload jobs as the reference server shows them, with the files each job holds and the
ingest run it produced."""

from __future__ import annotations

from datetime import datetime

import msgspec

from graphsvc.wire.common import UUID, Count, Int64, NullTime, NullUUID, Paged


class UploadedFile(msgspec.Struct):
    name: str
    content_type: str
    size_bytes: Int64
    uploaded_at: datetime


class FileUploadJob(msgspec.Struct):
    """`status` is the reference's job state: 1 Running (taking files), 6 Ingesting (queued or
    being ingested), 2 Complete, 5 Failed, 4 Timed Out; `status_message` says why a job
    failed. `run_id` is the ingest run a completed job produced."""

    id: Int64
    created_at: datetime
    updated_at: datetime
    deleted_at: NullTime
    user_id: UUID
    user_email_address: str
    status: int
    status_message: str
    start_time: datetime
    end_time: datetime
    last_ingest: datetime
    total_files: Count
    total_bytes: Int64
    files: list[UploadedFile]
    run_id: NullUUID


class FileUploadJobResponse(msgspec.Struct):
    data: FileUploadJob


class PagedFileUploadJobs(Paged[FileUploadJob]):
    pass


class AcceptedTypes(msgspec.Struct):
    data: list[str]


class CompletedTask(msgspec.Struct):
    """One document of a job's ingest, the reference's completed task: a file of the job, or
    an entry of one of its zips (`parent_file_name`), with its errors and warnings."""

    id: Int64
    ingest_job_id: Int64
    file_name: str
    parent_file_name: str
    errors: list[str]
    warnings: list[str]
    created_at: datetime
    updated_at: datetime


class CompletedTaskList(msgspec.Struct):
    data: list[CompletedTask]
