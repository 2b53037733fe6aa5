"""File-upload jobs over HTTP: start, send files, end, and the background ingest, on both
stores; what an Upload-Only token may do; bodies that are refused leave nothing behind."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from graphsvc.accounts import tokens
from graphsvc.accounts.permissions import INGEST
from graphsvc.api.routes import OPERATIONS
from graphsvc.store import sqlite
from graphsvc.store.db import Connection
from graphsvc.uploads.ingester import JobIngester, write_job_files
from tests.conftest import FIXTURES, Env, ingest, wait_until

CE = FIXTURES / "bloodhound-ce" / "fixtures"
V6 = CE / "v6" / "ingest"
SAMPLE_ZIP = FIXTURES / "bloodhound-docs" / "ad_sampledata.zip"
TESTLAB = "S-1-5-21-3130019616-2776909439-2417379446"
WIN10 = f"{TESTLAB}-1104"
START, JOBS = "/api/v2/file-upload/start", "/api/v2/file-upload"
AGG = (
    "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"
    "&schema_extension_id=1&limit=10000"
)


def post(
    env: Env,
    uri: str,
    token: tokens.CreatedToken,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    signed_body: bytes | None = None,
) -> httpx.Response:
    """A POST signed with `token` over `signed_body` (the body sent, unless given)."""
    signature = env.signed_headers(
        "POST", uri, token, body=body if signed_body is None else signed_body
    )
    return env.request("POST", uri, {**signature, **(headers or {})}, content=body)


def send_file(
    env: Env, token: tokens.CreatedToken, job_id: int, name: str, data: bytes, kind: str
) -> httpx.Response:
    return post(
        env,
        f"{JOBS}/{job_id}",
        token,
        data,
        {"Content-Type": kind, "Content-Disposition": f'attachment; filename="{name}"'},
    )


def upload(env: Env, token: tokens.CreatedToken, files: list[tuple[str, bytes, str]]) -> int:
    started = post(env, START, token)
    assert started.status_code == 201, started.text
    job_id: int = started.json()["data"]["id"]
    for name, data, kind in files:
        sent = send_file(env, token, job_id, name, data, kind)
        assert sent.status_code == 202, sent.text
    ended = post(env, f"{JOBS}/{job_id}/end", token)
    assert ended.status_code == 200, ended.text
    assert ended.json()["data"]["status"] == 6
    return job_id


def job_of(env: Env, token: tokens.CreatedToken, job_id: int) -> dict[str, Any]:
    response = env.get(f"{JOBS}?id={job_id}", token)
    assert response.status_code == 200, response.text
    jobs: list[dict[str, Any]] = response.json()["data"]
    assert len(jobs) == 1
    return jobs[0]


def wait_for_job(env: Env, token: tokens.CreatedToken, job_id: int) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        job = job_of(env, token, job_id)
        return job if job["status"] in (2, 4, 5) else None

    return wait_until(ended, timeout=120, what=f"job {job_id} to end")


def json_files(folder: Path) -> list[tuple[str, bytes, str]]:
    return [(p.name, p.read_bytes(), "application/json") for p in sorted(folder.glob("*.json"))]


def dcom_of(env: Env, computer: str) -> list[dict[str, Any]]:
    body = env.get(f"/api/v2/computers/{computer}/dcom-rights?limit=1000").json()
    return sorted(body["data"], key=lambda e: str(e["objectID"]))


def statistics_of(env: Env, run_id: str) -> dict[tuple[str, str], float]:
    rows = env.get(AGG).json()["data"]
    return {
        (r["metric_type"], r["metric_name"]): r["metric_value"]
        for r in rows
        if r["run_id"] == run_id
    }


def count_rows(env: Env, table: str) -> int:
    async def work(conn: Connection) -> int:
        return int(await conn.fetchval(f"SELECT count(*) FROM {table}"))

    return env.run_in_transaction(work)


def test_upload_only_token_uploads_json_files_and_the_graph_equals_the_cli_ingest(
    uploading: tuple[Env, tokens.CreatedToken],
) -> None:
    env, collector = uploading
    files = json_files(V6)
    job_id = upload(env, collector, files)
    job = wait_for_job(env, collector, job_id)
    assert job["status"] == 2, job["status_message"]
    assert job["run_id"]["valid"]
    assert [f["name"] for f in job["files"]] == [name for name, _, _ in files]
    assert [f["size_bytes"] for f in job["files"]] == [len(data) for _, data, _ in files]
    assert job["total_bytes"] == sum(len(d) for _, d, _ in files)
    assert job["end_time"] >= job["start_time"]
    uploaded_dcom = dcom_of(env, WIN10)
    uploaded_stats = statistics_of(env, job["run_id"]["uuid"])
    assert len(uploaded_dcom) > 10 and uploaded_stats

    cli_run = ingest(env, V6)  # the same files through `graphsvc ingest`'s path
    assert dcom_of(env, WIN10) == uploaded_dcom
    assert statistics_of(env, cli_run.run_id) == uploaded_stats
    assert count_rows(env, "file_upload_chunks") == 0, "a finished job's bytes are dropped"


def test_a_sharphound_zip_upload_equals_its_cli_ingest(
    uploading: tuple[Env, tokens.CreatedToken],
) -> None:
    env, collector = uploading
    job_id = upload(env, collector, [("sample.zip", SAMPLE_ZIP.read_bytes(), "application/zip")])
    job = wait_for_job(env, collector, job_id)
    assert job["status"] == 2, job["status_message"]
    uploaded = statistics_of(env, job["run_id"]["uuid"])
    assert uploaded[("node", "User")] > 0
    assert statistics_of(env, ingest(env, SAMPLE_ZIP).run_id) == uploaded


def test_a_broken_file_fails_the_job_naming_it_and_leaves_the_graph_as_it_was(
    uploading: tuple[Env, tokens.CreatedToken],
) -> None:
    env, collector = uploading
    ingest(env, V6 / "domains.json")
    nodes, runs = count_rows(env, "nodes"), count_rows(env, "ingest_runs")
    _, job = upload_with_a_broken_file(env, collector)
    assert job["status"] == 5
    assert job["status_message"].startswith("computers.json: not valid JSON"), job
    assert not job["run_id"]["valid"]
    assert (count_rows(env, "nodes"), count_rows(env, "ingest_runs")) == (nodes, runs)
    assert count_rows(env, "file_upload_chunks") == 0


def test_a_body_that_is_not_its_type_fails_the_job_naming_the_file(
    uploading: tuple[Env, tokens.CreatedToken],
) -> None:
    env, collector = uploading
    job_id = upload(env, collector, [("collection.zip", b"{}", "application/zip")])
    job = wait_for_job(env, collector, job_id)
    assert job["status"] == 5
    assert job["status_message"] == (
        "collection.zip: named .zip but not a zip file (no zip signature)"
    )


def opengraph_node(node_id: str) -> bytes:
    return json.dumps({"graph": {"nodes": [{"id": node_id, "kinds": ["Thing"]}]}}).encode()


def test_files_sent_under_one_name_are_all_kept_and_ingested(
    uploading: tuple[Env, tokens.CreatedToken],
) -> None:
    """The ingester numbered a repeated name `{n}-{name}`, which could be a file of the job
    already: a.json, 3-a.json, a.json lost the second file."""
    env, collector = uploading
    sent = [("a.json", "FIRST"), ("3-a.json", "SECOND"), ("a.json", "THIRD")]
    job_id = upload(
        env, collector, [(name, opengraph_node(node), "application/json") for name, node in sent]
    )
    job = wait_for_job(env, collector, job_id)
    assert job["status"] == 2, job["status_message"]
    assert [f["name"] for f in job["files"]] == ["a.json", "3-a.json", "a-2.json"]
    assert job["status_message"] == "ingested 3 documents: 3 nodes, 0 edges"
    stored = env.run_in_transaction(lambda conn: conn.fetch("SELECT object_id FROM nodes"))
    assert sorted(row[0] for row in stored) == ["FIRST", "SECOND", "THIRD"]


def test_a_job_stored_with_repeated_names_is_written_out_without_losing_a_file(
    uploading: tuple[Env, tokens.CreatedToken], tmp_path: Path
) -> None:
    """Jobs stored before names were made unique may repeat one."""
    env, collector = uploading
    job_id = post(env, START, collector).json()["data"]["id"]
    for name, node in [("a.json", "FIRST"), ("3-a.json", "SECOND"), ("b.json", "THIRD")]:
        sent = send_file(env, collector, job_id, name, opengraph_node(node), "application/json")
        assert sent.status_code == 202, sent.text

    async def write_out(conn: Connection) -> list[Path]:
        await conn.execute(
            "UPDATE file_upload_files SET name = 'a.json' WHERE job_id = $1 AND name = 'b.json'",
            job_id,
        )
        return await write_job_files(conn, job_id, tmp_path)

    paths = env.run_in_transaction(write_out)
    assert [p.name for p in paths] == ["a.json", "3-a.json", "a-2.json"]
    assert [json.loads(p.read_text())["graph"]["nodes"][0]["id"] for p in paths] == [
        "FIRST",
        "SECOND",
        "THIRD",
    ]


def test_a_wrong_body_signature_is_401_and_stores_nothing(
    uploading: tuple[Env, tokens.CreatedToken],
) -> None:
    env, collector = uploading
    job_id = post(env, START, collector).json()["data"]["id"]
    data = (V6 / "users.json").read_bytes()
    refused = post(
        env,
        f"{JOBS}/{job_id}",
        collector,
        data,
        {"Content-Type": "application/json"},
        signed_body=data[:-1] + b" ",
    )
    assert refused.status_code == 401
    assert refused.json()["errors"][0]["message"] == "invalid signature or unknown token id"
    assert job_of(env, collector, job_id)["total_files"] == 0
    assert count_rows(env, "file_upload_files") == count_rows(env, "file_upload_chunks") == 0


def test_content_types_and_the_size_cap(make_env: Callable[..., Env]) -> None:
    env = make_env(max_upload_bytes=1000)
    env.create_admin()
    job_id = post(env, START, env.token).json()["data"]["id"]
    uri = f"{JOBS}/{job_id}"
    wrong = post(env, uri, env.token, b"{}", {"Content-Type": "text/plain"})
    assert wrong.status_code == 415
    assert "application/json, application/zip" in wrong.json()["errors"][0]["message"]
    assert post(env, uri, env.token, b"{}").status_code == 415  # no type: which is it?
    # The content type is judged before the Prefer header, as each from the headers alone.
    both = post(env, uri, env.token, b"{}", {"Content-Type": "text/plain", "Prefer": "soon"})
    assert both.status_code == 415
    bad_wait = post(env, uri, env.token, b"{}", {"Content-Type": "application/json", "Prefer": "x"})
    assert bad_wait.status_code == 400
    big = post(env, uri, env.token, b"x" * 1001, {"Content-Type": "application/json"})
    assert big.status_code == 413
    # A body sent in pieces without a declared length is cut off at the cap too.
    pieces = (b"y" * 300 for _ in range(4))
    streamed = env.client.post(
        uri,
        content=pieces,
        headers={
            **env.signed_headers("POST", uri, body=b"y" * 1200),
            "Content-Type": "application/json",
        },
    )
    assert streamed.status_code == 413
    fits = post(
        env, uri, env.token, b"[]" * 500, {"Content-Type": "application/json; charset=utf-8"}
    )
    assert fits.status_code == 202, fits.text
    assert fits.json()["data"]["files"][0]["name"] == "file-1.json"
    assert count_rows(env, "file_upload_files") == 1


def test_upload_only_may_upload_and_see_its_jobs_but_read_nothing_else(
    uploading: tuple[Env, tokens.CreatedToken],
) -> None:
    env, collector = uploading
    refused = []
    for op in OPERATIONS:
        if op.authentication != "any" or op.permission in (None, INGEST):
            continue
        path = (
            op.path.replace("{tenant_id}", "00000000-0000-0000-0000-000000000001")
            .replace("{user_id}", "00000000-0000-0000-0000-000000000001")
            .replace("{token_id}", "00000000-0000-0000-0000-000000000001")
            .replace("{client_id}", "00000000-0000-0000-0000-000000000001")
            .replace("{saml_provider_id}", "1")
            .replace("{saved_query_id}", "1")
            .replace("{asset_group_tag_id}", "1")
            .replace("{asset_group_tag_selector_id}", "1")
            .replace("{asset_group_tag_member_id}", "1")
            .replace("{asset_group_id}", "1")
            .replace("{asset_group_selector_id}", "1")
            .replace("{domain_id}", "S-1-5-21-1-2-3")
            .replace("{entity_type}", "users")
            .replace("{object_id}", WIN10)
        )
        headers = env.signed_headers(op.method, path, collector)
        if op.upload:  # a file's content type is checked first (api/writes.receive_upload)
            headers["Content-Type"] = "application/json"
        response = env.request(op.method, path, headers)
        if response.status_code == 403:
            refused.append(op.operation_id)
        else:
            raise AssertionError(f"{op.method} {path}: {response.status_code}")
    assert {"ListDataQualityAggregations", "ListComputerDCOMRights", "Search"} <= set(refused)
    assert env.get("/api/v2/self", collector).status_code == 200
    assert env.get("/api/v2/file-upload/accepted-types", collector).json()["data"] == [
        "application/json",
        "application/zip",
        "application/x-zip-compressed",
        "application/zip-compressed",
    ]
    # Its jobs only; an Administrator (graphdb/Read) sees every job.
    admins = post(env, START, env.token).json()["data"]["id"]
    own = post(env, START, collector).json()["data"]["id"]
    assert [j["id"] for j in env.get(JOBS, collector).json()["data"]] == [own]
    assert env.get(f"{JOBS}?id={admins}", collector).json()["data"] == []
    assert [j["id"] for j in env.get(JOBS).json()["data"]] == [own, admins]
    # Another user's job is not its to fill or end.
    assert post(env, f"{JOBS}/{admins}/end", collector).status_code == 404
    other = send_file(env, collector, admins, "x.json", b"{}", "application/json")
    assert other.status_code == 404


@pytest.mark.parametrize(
    ("role", "status"), [("User", 403), ("Read-Only", 403), ("Power User", 201)]
)
def test_roles_as_in_the_reference(
    uploading: tuple[Env, tokens.CreatedToken], role: str, status: int
) -> None:
    env, _ = uploading
    token = env.user_with_token(role.lower().replace(" ", "-"), role)
    assert post(env, START, token).status_code == status


def test_job_rules_and_listing(uploading: tuple[Env, tokens.CreatedToken]) -> None:
    env, collector = uploading
    empty_id = post(env, START, collector).json()["data"]["id"]
    # As the reference: a job ended without files is Complete, nothing ingested.
    empty = post(env, f"{JOBS}/{empty_id}/end", collector)
    assert empty.status_code == 200, empty.text
    assert empty.json()["data"]["status"] == 2 and empty.json()["data"]["end_time"]
    assert empty.json()["data"]["status_message"] == "no files were sent: nothing to ingest"
    assert empty.json()["data"]["run_id"]["valid"] is False
    job_id = post(env, START, collector).json()["data"]["id"]
    assert post(env, f"{JOBS}/999999/end", collector).status_code == 404
    assert send_file(env, collector, 999999, "a.json", b"{}", "application/json").status_code == 404
    assert post(env, f"{JOBS}/start2/end", collector).status_code == 400
    done = upload(
        env, collector, [("domains.json", (V6 / "domains.json").read_bytes(), "application/json")]
    )
    wait_for_job(env, collector, done)
    late = send_file(env, collector, done, "b.json", b"{}", "application/json")
    assert late.status_code == 400 and "not Running" in late.json()["errors"][0]["message"]
    page = env.get(f"{JOBS}?limit=1", collector).json()
    assert page["count"] == 3 and [j["id"] for j in page["data"]] == [done]
    assert [j["id"] for j in env.get(f"{JOBS}?status=1", collector).json()["data"]] == [job_id]
    oldest = env.get(f"{JOBS}?sort_by=id", collector).json()["data"]
    assert [j["id"] for j in oldest] == [empty_id, job_id, done]


@pytest.mark.parametrize("value", ["eq:00000000-0000-4000-8000-000000000000", "no-such-run"])
def test_a_run_id_filter_on_the_job_list_is_a_400_naming_it(
    uploading: tuple[Env, tokens.CreatedToken], value: str
) -> None:
    """Jobs show their run_id but cannot be filtered by it: the parameter is refused, not
    ignored (which would list every job as if it matched)."""
    env, collector = uploading
    post(env, START, collector)
    refused = env.get(f"{JOBS}?run_id={value}", collector)
    assert refused.status_code == 400
    (error,) = refused.json()["errors"]
    assert error["context"] == "run_id"
    assert error["message"].startswith("the column 'run_id' cannot be filtered; filterable: ")


def test_a_job_that_takes_no_file_in_time_times_out(make_env: Callable[..., Env]) -> None:
    env = make_env(ingester=True, ingest_poll_seconds=0.05, upload_job_timeout_seconds=1)
    env.create_admin()
    job_id = post(env, START, env.token).json()["data"]["id"]
    send_file(env, env.token, job_id, "a.json", b"{}", "application/json")
    job = wait_for_job(env, env.token, job_id)
    assert job["status"] == 4 and job["status_message"].startswith("its client was silent")
    assert count_rows(env, "file_upload_chunks") == 0


def test_upload_responses_follow_the_reference_envelopes(
    uploading: tuple[Env, tokens.CreatedToken],
) -> None:
    env, collector = uploading
    started = post(env, START, collector).json()["data"]
    assert started["status"] == 1 and started["user_email_address"] == ""
    assert started["end_time"] == "0001-01-01T00:00:00Z"
    assert json.loads(json.dumps(started))["deleted_at"] == {
        "time": "0001-01-01T00:00:00Z",
        "valid": False,
    }


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_while_another_writer_holds_sqlite_writes_get_503_and_the_job_waits(
    make_env: Callable[..., Env], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite, "SQLITE_BUSY_TIMEOUT_MS", 300)  # the busy answer in 0.3 s, not 10
    env = make_env(ingest_poll_seconds=0.05)
    env.create_admin()
    job_id = upload(env, env.token, json_files(V6))
    writer = sqlite3.connect(env.url.removeprefix("sqlite:///"), isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # as a `graphsvc ingest` in another process holds it
    worker = JobIngester(dataclasses.replace(env.settings, ingester=True))
    worker.start()
    try:
        refused = post(env, "/api/v2/tokens", env.token, b'{"token_name": "during"}')
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "5"
        assert "busy with another write" in refused.json()["errors"][0]["message"]
        writer.execute("COMMIT")
        job = wait_for_job(env, env.token, job_id)
    finally:
        writer.close()
        worker.stop()
    assert job["status"] == 2, job["status_message"]
    attempts = env.run_in_transaction(
        lambda conn: conn.fetchval("SELECT attempts FROM file_upload_jobs WHERE id = $1", job_id)
    )
    assert attempts == 1, "waiting for the store is not a failed attempt"


def test_a_running_job_is_canceled_by_its_owner(
    uploading: tuple[Env, tokens.CreatedToken],
) -> None:
    env, collector = uploading
    job_id = post(env, START, collector).json()["data"]["id"]
    file = (V6 / "domains.json").read_bytes()
    assert send_file(env, collector, job_id, "d.json", file, "application/json").status_code == 202
    other = env.user_with_token("other-collector", "Upload-Only")
    assert post(env, f"{JOBS}/{job_id}/cancel", other).status_code == 404  # not its job
    reader = env.user_with_token("reader", "Read-Only")
    assert post(env, f"{JOBS}/{job_id}/cancel", reader).status_code == 403
    canceled = post(env, f"{JOBS}/{job_id}/cancel", collector)
    assert canceled.status_code == 200, canceled.text
    job = canceled.json()["data"]
    assert (job["status"], job["status_message"]) == (3, "canceled by its client")
    assert job["end_time"] and [f["name"] for f in job["files"]] == ["d.json"]
    assert count_rows(env, "file_upload_chunks") == 0
    again = post(env, f"{JOBS}/{job_id}/cancel", collector)
    assert again.status_code == 400
    assert "is Canceled, not Running" in again.json()["errors"][0]["message"]
    assert post(env, f"{JOBS}/{job_id}/end", collector).status_code == 400


def test_the_reference_web_clients_file_name_header(
    uploading: tuple[Env, tokens.CreatedToken],
) -> None:
    """X-File-Upload-Name names the file (before Content-Disposition, when both come)."""
    env, collector = uploading
    job_id = post(env, START, collector).json()["data"]["id"]
    body = (V6 / "domains.json").read_bytes()
    headers = {"Content-Type": "application/json", "X-File-Upload-Name": "collected/dom.json"}
    assert post(env, f"{JOBS}/{job_id}", collector, body, headers).status_code == 202
    both = {
        **headers,
        "X-File-Upload-Name": "second",
        "Content-Disposition": 'attachment; filename="x.json"',
    }
    answer = post(env, f"{JOBS}/{job_id}", collector, body, both)
    assert [f["name"] for f in answer.json()["data"]["files"]] == ["dom.json", "second.json"]
    # A name beyond Latin-1, as a browser can send it (the console does): RFC 5987's form,
    # which wins over a plain filename.
    extended = {
        "Content-Type": "application/json",
        "Content-Disposition": 'attachment; filename="plain.json"; '
        "filename*=UTF-8''%E6%97%A5%E6%9C%AC%E2%80%93rapport.json",
    }
    answer = post(env, f"{JOBS}/{job_id}", collector, body, extended)
    assert answer.json()["data"]["files"][-1]["name"] == "日本\u2013rapport.json"  # an en dash


def completed_tasks(env: Env, token: tokens.CreatedToken, job_id: int) -> list[dict[str, Any]]:
    response = env.get(f"{JOBS}/{job_id}/completed-tasks", token)
    assert response.status_code == 200, response.text
    tasks: list[dict[str, Any]] = response.json()["data"]
    assert all(t["ingest_job_id"] == job_id for t in tasks)
    return tasks


def test_each_file_of_a_completed_job_has_its_result(
    uploading: tuple[Env, tokens.CreatedToken],
) -> None:
    """JSON files and a zip's entries, each a task; a record of a kind not read is a
    warning of the document it was in."""
    env, collector = uploading
    azure = json.dumps(
        {
            "meta": {"type": "azure", "version": 5},
            "data": [{"kind": "AZSomethingNew", "data": {"id": "x"}}] * 2,
        }
    ).encode()
    files = [
        ("domains.json", (V6 / "domains.json").read_bytes(), "application/json"),
        ("azure.json", azure, "application/json"),
        ("sample.zip", SAMPLE_ZIP.read_bytes(), "application/zip"),
    ]
    job_id = upload(env, collector, files)
    assert wait_for_job(env, collector, job_id)["status"] == 2
    tasks = completed_tasks(env, collector, job_id)
    with zipfile.ZipFile(SAMPLE_ZIP) as archive:
        entries = sorted(n for n in archive.namelist() if n.endswith(".json"))
    assert sorted((t["parent_file_name"], t["file_name"]) for t in tasks) == sorted(
        [("", "domains.json"), ("", "azure.json"), *(("sample.zip", e) for e in entries)]
    )
    assert all(t["errors"] == [] for t in tasks)
    warned = {t["file_name"]: t["warnings"] for t in tasks if t["warnings"]}
    assert warned == {"azure.json": ["not read: 2 record(s) of AzureHound AZSomethingNew"]}


def upload_with_a_broken_file(
    env: Env, collector: tokens.CreatedToken
) -> tuple[int, dict[str, Any]]:
    """A job of a good users.json and a cut computers.json, ended and waited for."""
    good = (V6 / "users.json").read_bytes()
    broken = (V6 / "computers.json").read_bytes()[:5000]
    job_id = upload(
        env,
        collector,
        [("users.json", good, "application/json"), ("computers.json", broken, "application/json")],
    )
    return job_id, wait_for_job(env, collector, job_id)


def test_the_file_that_failed_a_job_has_the_error_and_the_others_say_why_they_were_not_read(
    uploading: tuple[Env, tokens.CreatedToken],
) -> None:
    env, collector = uploading
    job_id, job = upload_with_a_broken_file(env, collector)
    assert job["status"] == 5
    tasks = {t["file_name"]: t for t in completed_tasks(env, collector, job_id)}
    assert tasks["computers.json"]["errors"] == [job["status_message"]]
    assert tasks["users.json"]["errors"] == [
        "not ingested: the job is ingested whole or not at all, and computers.json failed"
    ]
    other = env.user_with_token("another-collector", "Upload-Only")
    assert env.get(f"{JOBS}/{job_id}/completed-tasks", other).status_code == 404
    assert env.get(f"{JOBS}/{job_id}/completed-tasks").status_code == 200  # an Administrator
    empty = post(env, START, collector).json()["data"]["id"]
    assert post(env, f"{JOBS}/{empty}/end", collector).status_code == 200
    assert completed_tasks(env, collector, empty) == []
