"""An upload's file name is bounded in bytes whatever the client sent, and a job's files are
written for its ingest under names any file system takes, whatever names were stored; a
disk that fills during an ingest stops that attempt only: the job keeps its files, and is
ingested once there is room. Before, a name over 255 bytes of UTF-8 or a full disk failed
the job as an "internal error (OSError)" and dropped its files."""

from __future__ import annotations

import asyncio
import errno
import sqlite3
from typing import Any
from urllib.parse import quote

import pytest

from graphsvc.accounts import tokens
from graphsvc.api.upload_body import file_name
from graphsvc.store import graph
from graphsvc.store.db import Connection, create_database
from graphsvc.uploads import ingester
from graphsvc.uploads.ingester import JobIngester
from tests.conftest import Env
from tests.test_uploads import (
    JOBS,
    START,
    V6,
    completed_tasks,
    job_of,
    post,
    upload,
    wait_for_job,
)

DOMAINS = (V6 / "domains.json").read_bytes()


@pytest.mark.parametrize("character", ["a", "é", "日", "\U0001f600"])  # 1 to 4 bytes
@pytest.mark.parametrize(
    ("content_type", "extension"), [("application/json", ".json"), ("application/zip", ".zip")]
)
def test_a_name_is_cut_to_200_bytes_of_utf8_in_whole_characters_before_its_extension(
    character: str, content_type: str, extension: str
) -> None:
    sent = character * 300 + extension
    name = file_name(sent, None, content_type)
    assert name is not None and name.endswith(extension)
    stem = name.removesuffix(extension)
    assert sent.startswith(stem) and set(stem) == {character}
    # As much as fits: less than a character short of 200 bytes.
    assert 200 - len(character.encode()) < len(name.encode()) <= 200
    assert file_name("Short.JSON", None, "application/json") == "Short.JSON"
    assert file_name(character * 300, None, content_type) == name  # the extension added


def count(env: Env, sql: str, *args: Any) -> Any:
    async def work(conn: Connection) -> Any:
        return await conn.fetchval(sql, *args)

    return env.run_in_transaction(work)


def test_a_name_of_300_bytes_is_kept_within_200_and_its_file_ingested(
    uploading: tuple[Env, tokens.CreatedToken],
) -> None:
    env, collector = uploading
    sent = "日本語の収集" * 17 + ".json"  # 306 bytes of UTF-8, and the extension
    job_id = post(env, START, collector).json()["data"]["id"]
    headers = {
        "Content-Type": "application/json",
        "Content-Disposition": f"attachment; filename*=UTF-8''{quote(sent)}",
    }
    assert post(env, f"{JOBS}/{job_id}", collector, DOMAINS, headers).status_code == 202
    assert post(env, f"{JOBS}/{job_id}/end", collector).status_code == 200
    job = wait_for_job(env, collector, job_id)
    assert job["status"] == 2, job["status_message"]
    [stored] = [f["name"] for f in job["files"]]
    assert len(stored.encode()) <= 200 and sent.startswith(stored.removesuffix(".json"))
    assert [t["file_name"] for t in completed_tasks(env, collector, job_id)] == [stored]


@pytest.mark.parametrize("stored", ["\U0001f600" * 199 + ".json", "../a/b\\c.json"])
def test_a_job_is_ingested_whatever_names_it_was_stored_with(
    uploading: tuple[Env, tokens.CreatedToken], stored: str
) -> None:
    """800 bytes (200 characters, as names were cut before), or a path: both files of the
    job take it, as a job stored before names were made unique could. Each is named by it
    in the job's results, whatever name it was written under."""
    env, collector = uploading
    job_id = post(env, START, collector).json()["data"]["id"]
    for node in ("FIRST", "SECOND"):
        body = b'{"graph": {"nodes": [{"id": "%s", "kinds": ["Thing"]}]}}' % node.encode()
        headers = {"Content-Type": "application/json", "X-File-Upload-Name": f"{node}.json"}
        assert post(env, f"{JOBS}/{job_id}", collector, body, headers).status_code == 202

    async def rename(conn: Connection) -> None:
        await conn.execute(
            "UPDATE file_upload_files SET name = $2 WHERE job_id = $1", job_id, stored
        )

    env.run_in_transaction(rename)
    assert post(env, f"{JOBS}/{job_id}/end", collector).status_code == 200
    job = wait_for_job(env, collector, job_id)
    assert job["status"] == 2, job["status_message"]
    assert [t["file_name"] for t in completed_tasks(env, collector, job_id)] == [stored, stored]
    assert count(env, "SELECT count(*) FROM nodes") == 2


def run_ingester(env: Env, replica: JobIngester) -> bool:
    """One look for a queued job by `replica`, as its thread takes them; whether it worked."""

    async def once() -> bool:
        db = create_database(env.url, pool_size=2)
        await db.open()
        try:
            return await replica.process_next_job(db)
        finally:
            await db.close()

    worked = asyncio.run(once())
    env.wait_until_the_app_knows()
    return worked


def disk_full(code: int) -> OSError:
    return OSError(code, "No space left on device")


def store_full() -> sqlite3.OperationalError:
    """What SQLite raises when its file or a temporary one cannot grow."""
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL
    return full


@pytest.mark.parametrize(
    ("where", "full"),
    [
        ("write_job_files", disk_full(errno.ENOSPC)),
        ("ingest_files", disk_full(errno.EDQUOT)),
        ("ingest_files", store_full()),
    ],
)
def test_a_full_disk_stops_an_attempt_and_the_job_is_ingested_once_there_is_room(
    env: Env, monkeypatch: pytest.MonkeyPatch, where: str, full: Exception
) -> None:
    """The disk fills once the job's files are written, or once its run is stored in the
    transaction (which rolls back): the job stays queued with its files and the reason; the
    replica rests, and a replica with room ingests it."""
    job_id = upload(env, env.token, [("domains.json", DOMAINS, "application/json")])
    chunks = count(env, "SELECT count(*) FROM file_upload_chunks")
    real = getattr(ingester, where)

    async def then_full(*args: Any, **kwargs: Any) -> Any:
        await real(*args, **kwargs)
        raise full

    monkeypatch.setattr(ingester, where, then_full)
    replica = JobIngester(env.settings)
    assert run_ingester(env, replica)
    job = job_of(env, env.token, job_id)
    assert (job["status"], job["status_message"]) == (
        6,
        "the server's disk is full (attempt 1 of 3); queued to be tried again",
    )
    assert count(env, "SELECT count(*) FROM file_upload_chunks") == chunks > 0
    assert env.run_in_transaction(graph.count_graph) == (0, 0)
    assert count(env, "SELECT holder FROM ingest_lease") is None
    assert not run_ingester(env, replica), "the replica whose disk filled rests"

    monkeypatch.undo()  # room again, or another replica's disk
    assert run_ingester(env, JobIngester(env.settings))
    job = job_of(env, env.token, job_id)
    assert job["status"] == 2, job["status_message"]
    assert count(env, "SELECT attempts FROM file_upload_jobs WHERE id = $1", job_id) == 2
    assert env.run_in_transaction(graph.count_graph)[0] > 0
