"""Answers from memory: every read's ETag and `Cache-Control`, 304 for a current
`If-None-Match` (never past authentication, permission or the rate limit), the bounded
cache of answers, and no answer outliving a change of the data, whoever made it: this
process, another process on the same store, an upload job, or a change seen by two
replicas."""

from __future__ import annotations

import asyncio
import contextlib
import mmap
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx2 as httpx
import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from graphsvc.accounts import saml, tokens, users
from graphsvc.api.admission import Admission
from graphsvc.api.answers import (
    ENTRY_OVERHEAD_BYTES,
    Answer,
    AnswerCache,
    content_etag,
    make_key,
    matches_none,
)
from graphsvc.api.routes import OPERATIONS, Operation
from graphsvc.api.web import Request
from graphsvc.crypto import KeyBox
from graphsvc.demo.dataset import DemoResult
from graphsvc.store import data_quality, postgres, sqlite
from graphsvc.store import uploads as store_uploads
from graphsvc.store.data_version import READ_DATA_VERSION
from graphsvc.store.db import Connection, asyncpg_dsn, create_database, run_in_transaction
from tests.conftest import (
    FIXTURES,
    POSTGRES_URL,
    TEST_FERNET_KEY,
    Env,
    served,
    server_environment,
    signed_headers,
    wait_until,
)

V6 = FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "ingest"
SAML = "/api/v2/saml"
# A window given in full: an answer without `end` shows the time it was made, and is not
# kept (see test_an_answer_that_shows_the_time_is_never_kept).
WINDOW = "start=2000-01-01T00:00:00Z&end=2100-01-01T00:00:00Z"
AGG = f"/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8&{WINDOW}"
NO_ANSWER = b""
READ_ONLY = 1  # the migration's role id


def graphsvc(env: Env, *arguments: str) -> subprocess.CompletedProcess[str]:
    """A `graphsvc` command in a process of its own, on the env's store."""
    environment = {
        **os.environ,
        "GRAPHSVC_DATABASE_URL": env.url,
        "GRAPHSVC_DATA_DIR": str(env.settings.data_dir),
        "GRAPHSVC_TOKEN_ENCRYPTION_KEY": TEST_FERNET_KEY,
    }
    done = subprocess.run(
        [sys.executable, "-m", "graphsvc", *arguments],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


def create_provider(env: Env, name: str) -> None:
    graphsvc(
        env,
        "saml",
        "create",
        "--name",
        name,
        "--display-name",
        name.title(),
        "--idp-issuer-uri",
        f"http://idp.example/{name}",
        "--idp-sso-uri",
        f"https://idp.example/{name}/sso",
    )


def names_of(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return sorted(p["name"] for p in response.json()["data"]["saml_providers"])


def lookups(env: Env) -> dict[str, float]:
    response = env.request("GET", "/metrics")
    assert response.status_code == 200, response.text
    found = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == "graphsvc_answer_cache_lookups_total":
                found[sample.labels["result"]] = sample.value
            if sample.name == "graphsvc_answer_cache_bytes":
                found["bytes"] = sample.value
    return found


def test_a_read_answers_with_its_tag_and_304_while_the_tag_is_current(
    demo_env: tuple[Env, DemoResult],
) -> None:
    env, demo = demo_env
    reads = [
        AGG,
        f"/api/v2/azure-tenants/{demo.tenant_ids[0]}/data-quality-stats?{WINDOW}",
        f"/api/v2/saml/providers/{demo.saml_provider_ids[0]}",
        f"/api/v2/computers/{demo.computer_object_ids[0]}/dcom-rights",
        SAML,
    ]
    for uri in reads:
        first = env.get(uri)
        assert first.status_code == 200, first.text
        etag = first.headers["etag"]
        assert etag.startswith('"') and etag.endswith('"') and len(etag) > 2, etag
        assert first.headers["cache-control"] == "private, no-cache"
        again = env.get(uri)
        assert again.headers["etag"] == etag and again.content == first.content
        for sent in (etag, f"W/{etag}", f'"other", {etag}', "*"):
            unchanged = env.get(uri, headers={"If-None-Match": sent})
            assert unchanged.status_code == 304, (uri, sent)
            assert unchanged.content == NO_ANSWER
            assert unchanged.headers["etag"] == etag
            assert unchanged.headers["cache-control"] == "private, no-cache"
            assert "content-type" not in unchanged.headers
        other = env.get(uri, headers={"If-None-Match": '"not-this-one"'})
        assert other.status_code == 200 and other.content == first.content


def test_each_request_has_its_own_tag(demo_env: tuple[Env, DemoResult]) -> None:
    env, demo = demo_env
    computer = demo.computer_object_ids[0]
    uris = [
        f"/api/v2/computers/{computer}/dcom-rights",
        f"/api/v2/computers/{computer}/dcom-rights?limit=1",
        f"/api/v2/computers/{computer}/dcom-rights?skip=1",
        f"/api/v2/computers/{demo.computer_object_ids[1]}/dcom-rights",
        "/api/v2/self",
    ]
    tags = [env.get(uri).headers["etag"] for uri in uris]
    assert len(set(tags)) == len(uris)
    # An answer that is the caller's own is kept for that caller alone.
    reader = env.user_with_token("reader", "Read-Only")
    mine, theirs = env.get("/api/v2/self"), env.get("/api/v2/self", token=reader)
    assert mine.json()["data"]["principal_name"] == "admin"
    assert theirs.json()["data"]["principal_name"] == "reader"
    assert mine.headers["etag"] != theirs.headers["etag"]


def test_a_304_needs_valid_credentials_and_the_permission(
    demo_env: tuple[Env, DemoResult],
) -> None:
    env, _ = demo_env
    etag = env.get(SAML).headers["etag"]
    current = {"If-None-Match": etag}
    assert env.get(SAML, headers=current).status_code == 304

    unsigned = env.request("GET", SAML, current)
    assert unsigned.status_code == 401 and unsigned.json()["errors"][0]["context"] == "auth"
    assert "etag" not in unsigned.headers
    unknown = tokens.CreatedToken("7b3c5ac9-05b4-43cb-8f23-1d9a1d1bb2a4", "k" * 40, None)
    assert env.get(SAML, token=unknown, headers=current).status_code == 401
    forged = {**env.signed_headers("GET", SAML), **current, "Signature": "AAAA"}
    assert env.request("GET", SAML, forged).status_code == 401

    collector = env.user_with_token("collector", "Upload-Only")
    refused = env.get(SAML, token=collector, headers=current)
    assert refused.status_code == 403 and "etag" not in refused.headers

    disabled = env.user_with_token("gone", "Administrator", disabled=True)
    assert env.get(SAML, token=disabled, headers=current).status_code == 403


def test_a_wildcard_304_only_for_what_exists(demo_env: tuple[Env, DemoResult]) -> None:
    """`If-None-Match: *` names any current answer: an unknown provider is still a 404."""
    env, demo = demo_env
    anything = {"If-None-Match": "*"}
    assert env.get("/api/v2/saml/providers/999999", headers=anything).status_code == 404
    known = f"/api/v2/saml/providers/{demo.saml_provider_ids[0]}"
    assert env.get(known, headers=anything).status_code == 304  # not yet kept: it ran
    assert env.get(known, headers=anything).status_code == 304  # kept


def test_an_answer_that_shows_the_url_it_was_asked_at_is_kept_per_url(env: Env) -> None:
    """Without GRAPHSVC_PUBLIC_URL the SAML URIs are made from the request's Host: one
    client's Host must never reach another's answer."""
    create_provider_directly(env.url, "okta")
    forged = env.get(SAML, headers={"Host": "evil.example"})
    uris = forged.json()["data"]["saml_providers"][0]["sp_acs_uri"]
    assert uris.startswith("http://evil.example/")
    honest = env.get(SAML)
    assert honest.json()["data"]["saml_providers"][0]["sp_acs_uri"].startswith("http://testserver/")
    assert honest.headers["etag"] != forged.headers["etag"]


def test_self_shows_the_calling_token(env: Env) -> None:
    first = env.token

    async def another_token_of_admin(conn: Connection) -> tokens.CreatedToken:
        return await tokens.create_user_token(conn, env.keys, "admin")

    second = env.run_in_transaction(another_token_of_admin)
    shown = [env.get("/api/v2/self", token=t).json()["data"] for t in (first, second)]
    assert [s["principal_name"] for s in shown] == ["admin", "admin"]
    assert [s["token"]["id"] for s in shown] == [first.id, second.id]


def test_a_304_counts_against_the_rate_limit(make_env: Callable[..., Env]) -> None:
    env = make_env(rate_limit_per_second=1, rate_limit_burst=3)
    env.create_admin()
    etag = env.get(SAML).headers["etag"]
    statuses = [env.get(SAML, headers={"If-None-Match": etag}).status_code for _ in range(6)]
    assert statuses[0] == 304 and 429 in statuses, statuses
    assert set(statuses) == {304, 429}
    assert statuses.count(304) <= 3 + 1  # the burst, and what refills while the test runs


def test_no_answer_outlives_an_ingest_by_another_process(env: Env) -> None:
    computer = "S-1-5-21-3130019616-2776909439-2417379446-1104"  # WIN10 in the v6 fixtures
    dcom = f"/api/v2/computers/{computer}/dcom-rights"
    empty = env.get(AGG)
    assert empty.json()["data"] == [] and env.get(dcom).status_code == 404
    assert env.get(AGG).headers["etag"] == empty.headers["etag"]  # from memory

    graphsvc(env, "ingest", str(V6))

    def fresh() -> bool:
        stats, rights = env.get(AGG), env.get(dcom)
        if stats.status_code == 200 and stats.json()["data"] and rights.status_code == 200:
            stale = env.get(AGG, headers={"If-None-Match": empty.headers["etag"]})
            assert stale.status_code == 200 and stale.json()["data"]
            return True
        return False

    assert_fresh_soon(env, fresh)


def assert_fresh_soon(env: Env, fresh: Callable[[], bool]) -> None:
    """On SQLite each request reads the version itself: the first is fresh. PostgreSQL tells
    the other processes by NOTIFY, which arrives a moment after the commit (within a second:
    bench/README has the figure); a test waits up to ten."""
    if env.url.startswith("sqlite"):
        assert fresh()
        return
    wait_until(fresh, timeout=10, what="the change to be seen")


def test_no_answer_outlives_a_saml_write_by_another_process(env: Env) -> None:
    assert names_of(env.get(SAML)) == []
    create_provider(env, "okta")
    assert_fresh_soon(env, lambda: names_of(env.get(SAML)) == ["okta"])
    create_provider(env, "entra")
    assert_fresh_soon(env, lambda: names_of(env.get(SAML)) == ["entra", "okta"])


def test_no_answer_outlives_a_write_through_the_api(env: Env) -> None:
    uri = "/api/v2/bloodhound-users"
    before = env.get(uri)
    assert before.status_code == 200, before.text
    body = b'{"principal": "newcomer", "roles": [%d]}' % READ_ONLY
    created = env.request("POST", uri, {**env.signed_headers("POST", uri, body=body)}, content=body)
    assert created.status_code in (200, 201), created.text
    after = env.get(uri)  # at once: this process moved the version as it committed
    assert after.headers["etag"] != before.headers["etag"]
    assert "newcomer" in [u["principal_name"] for u in after.json()["data"]["users"]]


def test_no_answer_outlives_an_upload_job(make_env: Callable[..., Env]) -> None:
    from tests.test_uploads import json_files, upload, wait_for_job

    env = make_env(ingester=True, ingest_poll_seconds=0.05)
    env.create_admin()
    assert env.get(AGG).json()["data"] == []
    job_id = upload(env, env.token, json_files(V6))
    assert wait_for_job(env, env.token, job_id)["status"] == 2
    # The ingester commits on a connection of its own: on PostgreSQL the app hears of it by
    # NOTIFY a moment later (the job's start and end no longer move the version meanwhile).
    env.wait_until_the_app_knows()
    rows = env.get(AGG).json()["data"]
    assert {r["metric_type"] for r in rows} == {"node", "relationship"}


TENANT = "6F1C2A3B-9D4E-4F5A-8B6C-7D8E9FA0B1C2"
DOMAIN = "S-1-5-21-1111111111-2222222222-3333333333"
MOVING_WINDOWS = (  # each read's window ends now: no `end`, and no `start` but the last
    "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8",
    f"/api/v2/azure-tenants/{TENANT}/data-quality-stats",
    f"/api/v2/ad-domains/{DOMAIN}/data-quality-stats",
    f"/api/v2/azure-tenants/{TENANT}/data-quality-stats?start=2000-01-01T00:00:00Z",
)


def seed_records(env: Env, *created: datetime) -> None:
    """An aggregation, a tenant record and a domain record created at each time."""

    async def work(conn: Connection) -> None:
        for when in created:
            run = str(uuid.uuid4())
            row = data_quality.AggregationRow(run, 1, 8, "node", "User", 1.0, 2)
            await data_quality.insert_aggregations(conn, [row], when)
            for stats, environment in (
                (data_quality.TENANT_STATS, TENANT),
                (data_quality.DOMAIN_STATS, DOMAIN),
            ):
                counts = dict.fromkeys(stats.values, 1)
                await data_quality.insert_stats_record(conn, stats, environment, counts, run, when)

    env.run_in_transaction(work)


def test_a_window_that_ends_now_is_kept_its_bounds_filled_per_answer(
    make_env: Callable[..., Env],
) -> None:
    """Without `end`, a statistics answer's window ends at the time it is sent; its records
    are kept, and its tag, weak, names them: 304 while they are unchanged."""
    env = make_env(metrics="open")
    env.create_admin()
    seed_records(env, datetime.now(UTC) - timedelta(days=1))
    for uri in MOVING_WINDOWS:
        first = env.get(uri)
        assert first.status_code == 200, first.text
        before = lookups(env)
        again = env.get(uri)
        assert lookups(env)["hit"] - before.get("hit", 0) == 1, uri  # from memory
        made, kept = first.json(), again.json()
        assert kept["data"] == made["data"] and len(kept["data"]) == 1, uri
        assert datetime.fromisoformat(kept["end"]) > datetime.fromisoformat(made["end"]), uri
        assert abs(datetime.fromisoformat(kept["end"]) - datetime.now(UTC)) < timedelta(seconds=30)
        if "start=" in uri:
            assert kept["start"] == made["start"] == "2000-01-01T00:00:00Z"
        else:
            start, end = (datetime.fromisoformat(kept[k]) for k in ("start", "end"))
            assert end - start == timedelta(days=30)
        etag = first.headers["etag"]
        assert etag.startswith('W/"') and again.headers["etag"] == etag, uri
        assert etag != content_etag(first.content)
        current = env.get(uri, headers={"If-None-Match": etag})
        assert current.status_code == 304 and current.headers["etag"] == etag, uri
    tags = {uri: env.get(uri).headers["etag"] for uri in MOVING_WINDOWS}
    seed_records(env, datetime.now(UTC) - timedelta(days=2))  # a record more in each window
    for uri, etag in tags.items():
        moved = env.get(uri, headers={"If-None-Match": etag})
        assert moved.status_code == 200 and len(moved.json()["data"]) == 2, uri
        assert moved.headers["etag"] != etag
    # The audit log's window ends now too, but the log grows without moving the data
    # version: never kept, its tag is its bytes' digest.
    audit = env.get("/api/v2/audit")
    assert audit.headers["etag"] == content_etag(audit.content)


def test_a_kept_window_fills_its_bounds_whatever_start_was_asked(env: Env) -> None:
    """The bounds of a kept window are found by their names: a start asked for that is the
    time the kept bytes mark the end with changes neither bound."""
    marked_end = "0001-01-01T00:00:00.000002Z"
    uri = f"{MOVING_WINDOWS[0]}&start={marked_end}"
    for _ in range(2):  # made, then kept
        body = env.get(uri).json()
        assert body["start"] == marked_end, body
        end = datetime.fromisoformat(body["end"])
        assert abs(end - datetime.now(UTC)) < timedelta(seconds=30), body


def test_a_kept_window_is_made_again_when_a_record_enters_or_leaves_it(env: Env) -> None:
    """A kept window's records are read again when, as the window moves, the end reaches a
    record (one created ahead of the clock) or the start passes one; not before."""
    now = datetime.now(UTC)
    seed_records(env, now + timedelta(seconds=6), now - timedelta(days=30) + timedelta(seconds=12))
    uri = MOVING_WINDOWS[1]

    def created() -> list[str]:
        return [row["created_at"] for row in env.get(uri).json()["data"]]

    first = created()
    assert len(first) == 1 and datetime.fromisoformat(first[0]) < now  # the one to leave
    wait_until(lambda: len(created()) == 2, what="the record created ahead to enter")
    wait_until(
        lambda: datetime.fromisoformat(created()[-1]) > now,  # newest first
        what="the oldest record to leave the window",
    )
    assert len(created()) == 1


def test_a_kept_answer_reads_no_parameters_on_the_whole_path(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its parameters were read without fault when it was made, from the same path and
    query; a 304 for a tag this process does not keep reads them (the tag may be made up)."""
    read: list[str] = []
    parameters = Admission.parameters

    def counted(self: Admission, op: Operation, request: Request) -> dict[str, Any]:
        read.append(op.operation_id)
        return parameters(self, op, request)

    monkeypatch.setattr(Admission, "parameters", counted)
    made = env.get(AGG)
    assert made.status_code == 200 and read == ["ListDataQualityAggregations"]
    for headers in ({}, {"If-None-Match": made.headers["etag"]}):
        assert env.get(AGG, headers=headers).status_code in (200, 304)
    assert len(read) == 1
    env.client.app.answers.clear(None)  # type: ignore[attr-defined]
    assert env.get(AGG, headers={"If-None-Match": made.headers["etag"]}).status_code == 304
    assert len(read) == 2


def test_the_operations_not_kept_show_what_moves_at_once(env: Env) -> None:
    names = {op.operation_id for op in OPERATIONS if not op.cached}
    assert names == {
        "ListAuthTokens",
        "ListFileUploadJobs",
        "ListAuditLogs",
        "GetSelf",
        "GetDatapipeStatus",
        # An export is audit-logged each time it is made.
        "ExportSavedQueries",
        "ExportSavedQuery",
    }
    # The pipeline's status follows the ingest lease, which moves no data version.
    status = "/api/v2/datapipe/status"
    assert env.get(status).json()["data"]["status"] == "idle"

    async def hold_the_lease(conn: Connection) -> None:
        now = datetime.now(UTC)
        assert await store_uploads.take_lease(conn, "an ingester", now, now + timedelta(minutes=5))

    asyncio.run(run_in_transaction(env.url, hold_the_lease))
    assert env.get(status).json()["data"]["status"] == "ingesting"
    # A token's last access moves without moving the data version, and shows at once.
    other = env.user_with_token("other", "Read-Only")
    uri = f"/api/v2/tokens?id={other.id}"
    before = env.get(uri)
    assert before.headers["etag"] == content_etag(before.content)
    assert env.get("/api/v2/self", token=other).status_code == 200
    wait_until(
        lambda: env.get(uri).content != before.content,
        timeout=10,
        what="the token's last access to be shown",
    )
    moved = env.get(uri, headers={"If-None-Match": before.headers["etag"]})
    assert moved.status_code == 200 and moved.headers["etag"] != before.headers["etag"]


def test_the_cache_counts_hits_and_misses(make_env: Callable[..., Env]) -> None:
    env = make_env(metrics="open")
    env.create_admin()
    start = lookups(env)
    env.get(SAML)
    env.get(SAML)
    env.get(SAML, headers={"If-None-Match": env.get(SAML).headers["etag"]})
    counted = lookups(env)
    assert counted["miss"] - start.get("miss", 0) == 1
    assert counted["hit"] - start.get("hit", 0) == 2  # the 304 answers before the lookup counts
    assert counted["bytes"] > 0


def test_the_memory_cap_holds_served(
    demo_env: tuple[Env, DemoResult], make_env: Callable[..., Env]
) -> None:
    """The cap as the app keeps it, over more targets than fit: the unit test below holds it
    over ten thousand (sent here, they took most of a minute)."""
    cap = 16 * 1024
    targets = 600
    env = make_env(answer_cache_bytes=cap)
    env.token = demo_env[0].token
    computer = demo_env[1].computer_object_ids[0]
    cache: AnswerCache = env.client.app.answers  # type: ignore[attr-defined]
    first = f"/api/v2/computers/{computer}/dcom-rights?skip=0"
    for skip in range(targets):
        response = env.get(f"/api/v2/computers/{computer}/dcom-rights?skip={skip}")
        assert response.status_code == 200
        assert cache.size <= cap
    assert 0 < len(cache.entries) < targets
    counted = sum(
        sys.getsizeof(answer.body) + sys.getsizeof(key) + ENTRY_OVERHEAD_BYTES
        for key, (answer, _) in cache.entries.items()
    )
    assert counted == cache.size <= cap
    assert cache.size > cap - 2 * max(c for _, c in cache.entries.values())  # it is used
    # Every object the cache holds, measured one by one: within what it counted.
    held = sys.getsizeof(cache.entries) + sum(
        sys.getsizeof(key)
        + sys.getsizeof(entry)
        + sys.getsizeof(entry[0])
        + sys.getsizeof(entry[0].etag)
        + sys.getsizeof(entry[0].body)
        + sys.getsizeof(entry[1])
        for key, entry in cache.entries.items()
    )
    assert held <= cache.size, (held, cache.size)
    # The oldest were dropped, the newest are kept.
    keys = list(cache.entries)
    newest, oldest = msgspec.json.decode(keys[-1]), msgspec.json.decode(keys[0])
    assert newest[2] == [["skip", [str(targets - 1)]]] and oldest[2] != [["skip", ["0"]]]
    assert env.get(first).status_code == 200


def test_the_cache_keeps_nothing_past_its_cap_or_across_versions() -> None:
    cache = AnswerCache(max_bytes=4096)
    key = make_key("GetSAMLProvider", {"saml_provider_id": "1"}, {}, [])
    assert cache.get(7, key) is None
    cache.put(7, key, Answer('"a"', b"x" * 100))
    assert cache.get(7, key) == Answer('"a"', b"x" * 100)
    assert cache.get(8, key) is None and cache.size == 0  # the version moved: all dropped
    cache.put(7, key, Answer('"a"', b"x"))  # made at the old version: not kept
    assert cache.entries == {}
    cache.put(8, key, Answer('"b"', b"x" * 5000))  # larger than the whole cap
    assert cache.entries == {}
    for i in range(10_000):  # answers of every size up to a fifth of the cap
        body = b"y" * (i % 800)
        cache.put(8, make_key("Op", {}, {"skip": [str(i)]}, []), Answer(f'"{i}"', body))
        assert cache.size <= 4096
    assert 0 < len(cache.entries) < 10_000
    counted = sum(
        sys.getsizeof(answer.body) + sys.getsizeof(key) + ENTRY_OVERHEAD_BYTES
        for key, (answer, _) in cache.entries.items()
    )
    assert counted == cache.size
    assert msgspec.json.decode(list(cache.entries)[-1])[2] == [["skip", ["9999"]]]


def test_if_none_match_is_read_as_rfc_9110_says() -> None:
    assert matches_none('"a"', '"a"') and matches_none('W/"a"', '"a"')
    assert matches_none(' "b" , W/"a" ', '"a"') and matches_none("*", '"a"')
    assert not matches_none(None, '"a"') and not matches_none('"b"', '"a"')
    assert not matches_none('"a', '"a"') and not matches_none("", '"a"')


def test_a_lower_polled_version_is_believed_when_polled_twice() -> None:
    store = postgres.PostgresDatabase("postgresql://unused/none", pool_size=1)
    store.note_version(100)
    store.note_polled_version(90)  # a poll begun before this process's commit
    assert store.data_version() == 100
    store.note_polled_version(120)
    assert store.data_version() == 120
    store.note_polled_version(50)
    store.note_polled_version(50)  # the store was restored from a backup
    assert store.data_version() == 50
    store.note_version(40)  # a notification older than what is known
    assert store.data_version() == 50


# --- two replicas on one PostgreSQL ------------------------------------------------------


@pytest.fixture
def replicas(database_url: str, tmp_path: Path) -> Iterator[list[str]]:
    with contextlib.ExitStack() as stack:
        bases = []
        for i in range(2):
            environment = server_environment(database_url, tmp_path / f"replica{i}")
            base, _ = stack.enter_context(served(environment))
            bases.append(base)
        yield bases


def admin_token(database_url: str) -> tokens.CreatedToken:
    keys = KeyBox(TEST_FERNET_KEY.encode())

    async def work(conn: Connection) -> tokens.CreatedToken:
        await users.create_user(conn, "admin", "Administrator", "pw-0123456789", False)
        return await tokens.create_user_token(conn, keys, "admin")

    return asyncio.run(run_in_transaction(database_url, work))


def create_provider_directly(database_url: str, name: str) -> None:
    async def work(conn: Connection) -> Any:
        return await saml.create_saml_provider(
            conn, name, name, f"http://idp.example/{name}", f"https://idp.example/{name}", []
        )

    asyncio.run(run_in_transaction(database_url, work))


async def cut_listeners(database_url: str) -> int:
    """Terminate the listening connections of the servers on this store; how many."""
    conn = await asyncpg.connect(asyncpg_dsn(POSTGRES_URL))
    try:
        cut: int = await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = $1 AND datname = $2",
            postgres.LISTENER_NAME,
            database_url.rsplit("/", 1)[1].split("?")[0],
        )
        return cut
    finally:
        await conn.close()


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_two_replicas_see_a_change_made_elsewhere(replicas: list[str], database_url: str) -> None:
    token = admin_token(database_url)
    with httpx.Client(timeout=10) as client:

        def names(base: str) -> list[str]:
            response = client.get(base + SAML, headers=signed_headers(token, "GET", SAML))
            return names_of(response)

        for base in replicas:
            assert names(base) == [] and names(base) == []  # the second from memory
        seen = []
        for name in ("okta", "entra"):
            create_provider_directly(database_url, name)
            changed = time.monotonic()
            for base in replicas:
                wait_until(
                    lambda base=base, name=name: name in names(base),  # type: ignore[misc]
                    timeout=10,
                    what=f"{base} to see {name}",
                )
                seen.append(time.monotonic() - changed)
        print(f"seen by both replicas after {max(seen) * 1000:.0f} ms at most")

        # A replica whose listening connection is cut learns of changes by its poll (each
        # second), then listens again.
        assert asyncio.run(cut_listeners(database_url)) == 2
        create_provider_directly(database_url, "ping")
        for base in replicas:
            wait_until(
                lambda base=base: "ping" in names(base),  # type: ignore[misc]
                timeout=15,
                what=f"{base} to see the change",
            )


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_sqlite_reads_the_version_when_the_wal_index_shows_a_commit(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit by any connection is seen at the next call, through the WAL-index header;
    a change the header would not show is still seen within DATA_VERSION_POLL_SECONDS."""
    monkeypatch.setattr(sqlite, "DATA_VERSION_POLL_SECONDS", 0.2)

    async def move(conn: Connection) -> None:  # a write that changes nothing else
        await conn.execute("UPDATE data_version SET version = version WHERE id = 1")

    async def scenario() -> None:
        store = create_database(database_url)
        assert isinstance(store, sqlite.SQLiteDatabase)
        await store.open()
        try:
            await store.follow_data_version()
            assert store.wal_index is not None
            first = store.data_version()
            assert first is not None and store.data_version() == first
            await run_in_transaction(database_url, move)  # another connection's commit
            second = store.data_version()
            assert second is not None and second > first
            # A WAL-index that shows nothing (its header frozen): the row is still read again
            # once the poll interval has passed.
            store.wal_index = mmap.mmap(-1, sqlite.WAL_INDEX_HEADER_BYTES)
            store.data_version()
            frozen = store.data_version()
            await run_in_transaction(database_url, move)
            assert store.data_version() == frozen
            await asyncio.sleep(0.25)  # the poll interval passing is what is tested
            later = store.data_version()
            assert later is not None and frozen is not None and later > frozen
        finally:
            await store.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_watching_the_wal_index_keeps_sqlites_locks(database_url: str) -> None:
    """Closing a descriptor of the `-shm` file would drop every lock this process holds on
    it (SQLite's), and another process would rebuild the WAL-index under this one."""

    def locks_held_on(path: str) -> int:
        inode = os.stat(path).st_ino
        held = 0
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            owner, device_inode = fields[-4], fields[-3]
            if owner == str(os.getpid()) and device_inode.endswith(f":{inode}"):
                held += 1
        return held

    async def scenario() -> tuple[int, int]:
        store = create_database(database_url)
        assert isinstance(store, sqlite.SQLiteDatabase)
        await store.open()
        try:
            async with store.reading() as conn:
                await conn.fetchval(READ_DATA_VERSION)
            shm = f"{store.path}-shm"
            before = locks_held_on(shm)
            await store.follow_data_version()
            assert store.wal_index is not None
            return before, locks_held_on(shm)
        finally:
            await store.close()

    before, after = asyncio.run(scenario())
    assert before > 0 and after >= before, (before, after)


class FreezingProxy:
    """A TCP proxy to PostgreSQL that can go silent (no reset, nothing forwarded), as a
    network path does when a firewall drops it."""

    def __init__(self) -> None:
        self.frozen = False
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", 5432)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    while self.frozen:
                        await asyncio.sleep(0.05)
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_a_listener_gone_silent_is_given_up(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its poll times out: the version is unknown (nothing answered from memory) until a
    new listener is connected, not the last one seen for as long as TCP takes to give up."""
    monkeypatch.setattr(postgres, "DATA_VERSION_POLL_SECONDS", 0.2)
    monkeypatch.setattr(postgres, "VERSION_READ_TIMEOUT_SECONDS", 0.5)

    async def until(condition: Callable[[], bool], seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while not condition():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    async def scenario() -> None:
        proxy = FreezingProxy()
        port = await proxy.start()
        store = create_database(database_url.replace("127.0.0.1:5432", f"127.0.0.1:{port}"))
        assert isinstance(store, postgres.PostgresDatabase)
        await store.open()
        try:
            await store.follow_data_version()
            assert store.data_version() is not None
            proxy.frozen = True
            assert await until(lambda: store.data_version() is None, 5)
            proxy.frozen = False
            assert await until(lambda: store.data_version() is not None, 15)
        finally:
            proxy.frozen = False
            await store.close()
            assert proxy.server is not None
            proxy.server.close()

    asyncio.run(scenario())


def test_an_answer_kept_for_one_user_never_reaches_another(make_env: Callable[..., Env]) -> None:
    """A job's tasks are its owner's (and an administrator's): the other collector gets the
    404 it always got, even with the owner's answer in memory and its ETag in hand."""
    from tests.test_uploads import JOBS, START, post

    env = make_env()
    env.create_admin()
    owner = env.user_with_token("collector", "Upload-Only")
    other = env.user_with_token("another-collector", "Upload-Only")
    job_id = post(env, START, owner).json()["data"]["id"]
    assert post(env, f"{JOBS}/{job_id}/end", owner).status_code == 200
    uri = f"{JOBS}/{job_id}/completed-tasks"
    first = env.get(uri, owner)
    assert first.status_code == 200 and env.get(uri, owner).content == first.content  # kept
    tag = {"If-None-Match": first.headers["etag"]}
    assert env.get(uri, owner, headers=tag).status_code == 304
    for sent in (None, tag, {"If-None-Match": "*"}):
        refused = env.get(uri, other, headers=sent)
        assert refused.status_code == 404, sent
        assert refused.json()["errors"][0]["context"] == "file_upload_job_id"


def test_a_replica_of_another_edition_tags_its_answers_apart(
    make_env: Callable[..., Env],
) -> None:
    """Replicas of both editions on one store (during a move to Enterprise) answer some
    operations differently: a tag made by one is not current at the other, though the data
    and the request are the same."""
    community = make_env(edition="community")
    community.create_admin()
    enterprise = make_env(edition="enterprise")
    enterprise.token = community.token
    uri = (
        "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"
        "&start=2000-01-01T00:00:00Z&end=2100-01-01T00:00:00Z"
    )
    made = community.get(uri)
    assert made.status_code == 200, made.text
    other = enterprise.get(uri, headers={"If-None-Match": made.headers["etag"]})
    assert other.status_code == 200 and other.headers["etag"] != made.headers["etag"]
    again = community.get(uri, headers={"If-None-Match": made.headers["etag"]})
    assert again.status_code == 304  # current where it was made


def stored_version(env: Env) -> int:
    """The store's data version, read in a transaction that moves none."""

    async def work(conn: Connection) -> int:
        return int(await conn.fetchval(READ_DATA_VERSION))

    return asyncio.run(run_in_transaction(env.url, work, changes_answers=False))


def test_a_jobs_bookkeeping_moves_no_data_version_and_changes_no_kept_answer(
    demo_env: tuple[Env, DemoResult],
) -> None:
    """Starting, feeding, ending and cancelling upload jobs is shown only by the job list and
    the audit log, which are made anew at each request: it moves no data version, so every
    kept answer and every tag a client holds stays current (before, each emptied every
    server's answers). Their ingest, which changes the graph, moves it."""
    from tests.test_answers_at_once import reads_of

    env, demo = demo_env
    bookkeeping = {op.operation_id for op in OPERATIONS if not op.changes_answers}
    assert bookkeeping == {
        "CreateFileUploadJob",
        "UploadFileToJob",
        "EndFileUploadJob",
        "CancelFileUploadJob",
    }
    kept = {uri: env.get(uri) for uri in reads_of(demo)}
    assert all(answer.status_code == 200 for answer in kept.values())
    version = stored_version(env)

    def post(uri: str, body: bytes = b"") -> dict[str, Any]:
        headers = {**env.signed_headers("POST", uri, body=body), "Content-Type": "application/json"}
        sent = env.request("POST", uri, headers, content=body)
        assert sent.status_code in (200, 201, 202), sent.text
        data: dict[str, Any] = sent.json()["data"]
        return data

    for finish in ("end", "cancel"):
        job = post("/api/v2/file-upload/start")["id"]
        post(f"/api/v2/file-upload/{job}", b'{"graph": {"nodes": [], "edges": []}}')
        post(f"/api/v2/file-upload/{job}/{finish}")
    assert stored_version(env) == version
    for uri, answer in kept.items():
        again = env.get(uri, headers={"If-None-Match": answer.headers["etag"]})
        assert again.status_code == 304, uri
