"""The reference's list filters (`column=op:value`) on the token and upload-job lists, as
its web client sends them (`/api/v2/tokens?user_id=eq:<id>`), with graphsvc's refusals:
an unknown column, operator or value is a 400 naming it, on both stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest

from graphsvc.store.db import Connection
from graphsvc.store.filters import EQUALITY, Filter, FilterColumn, filter_conditions
from tests.conftest import Env, wait_until
from tests.test_tokens import send
from tests.test_uploads import JOBS, START, post, send_file

TOKENS = "/api/v2/tokens"


def listed(env: Env, query: str, token: Any = None) -> list[dict[str, Any]]:
    response = env.get(f"{TOKENS}?{query}" if query else TOKENS, token=token)
    assert response.status_code == 200, response.text
    tokens: list[dict[str, Any]] = response.json()["data"]["tokens"]
    return tokens


def error_of(env: Env, uri: str, token: Any = None) -> tuple[int, str]:
    response = env.get(uri, token=token)
    return response.status_code, response.json()["errors"][0]["message"]


def at(moment: datetime) -> str:
    return quote(moment.isoformat().replace("+00:00", "Z"))


@pytest.fixture
def named_tokens(env: Env) -> dict[str, Any]:
    """Two users with named tokens: the admin's "ci" and "nightly", the reader's "laptop"."""
    reader = env.user_with_token("reader", "Read-Only")
    for name in ("ci", "nightly"):
        assert send(env, "POST", TOKENS, {"token_name": name}).status_code == 200
    assert send(env, "POST", TOKENS, {"token_name": "laptop"}, reader).status_code == 200
    me = env.get("/api/v2/self").json()["data"]["id"]
    them = env.get("/api/v2/self", token=reader).json()["data"]["id"]
    return {"admin": me, "reader": them, "reader_token": reader}


def names(tokens: list[dict[str, Any]]) -> set[str]:
    return {t["name"]["string"] for t in tokens if t["name"]["valid"]}


def test_the_web_clients_token_list(env: Env, named_tokens: dict[str, Any]) -> None:
    reader, token = named_tokens["reader"], named_tokens["reader_token"]
    own = listed(env, f"user_id=eq:{reader}", token)
    assert names(own) == {"laptop"} and {t["user_id"]["uuid"] for t in own} == {reader}
    assert listed(env, "", token) == own  # without a filter: still only its own
    # An administrator filters on anyone.
    assert names(listed(env, f"user_id=eq:{reader}")) == {"laptop"}
    assert listed(env, f"user_id={reader}") == listed(env, f"user_id=eq:{reader}")  # bare: eq
    assert "laptop" not in names(listed(env, f"user_id=neq:{reader}"))
    assert {"ci", "nightly", "laptop"} <= names(listed(env, ""))


def test_the_reference_refusals_of_a_user_id_filter(env: Env, named_tokens: dict[str, Any]) -> None:
    admin, reader, token = (named_tokens[k] for k in ("admin", "reader", "reader_token"))
    status, message = error_of(env, f"{TOKENS}?user_id=eq:{admin}", token)
    assert status == 403 and message.startswith(
        "filtering tokens by another user's user_id requires admin privileges"
    )
    status, message = error_of(env, f"{TOKENS}?user_id=neq:{reader}", token)
    assert (status, message) == (
        403,
        "non-admin users may only apply the eq operator when filtering by user_id",
    )


def test_names_times_and_several_filters_together(env: Env, named_tokens: dict[str, Any]) -> None:
    everything = listed(env, "")
    assert names(listed(env, "name=eq:ci")) == {"ci"}
    assert names(listed(env, "name=neq:ci")) == names(everything) - {"ci"}
    unnamed = [t for t in everything if not t["name"]["valid"]]  # the fixtures' own tokens
    assert len(listed(env, "name=eq:null")) == len(unnamed) > 0
    assert len(listed(env, "name=neq:null")) == len(everything) - len(unnamed)
    created = sorted(datetime.fromisoformat(t["created_at"]) for t in everything)
    middle = created[len(created) // 2]
    after = listed(env, f"created_at=gte:{at(middle)}")
    before = listed(env, f"created_at=lt:{at(middle)}")
    assert len(after) + len(before) == len(everything) and after and before
    # Repeated: ANDed.
    window = listed(env, f"created_at=gte:{at(middle)}&created_at=lte:{at(middle)}")
    assert window and all(datetime.fromisoformat(t["created_at"]) == middle for t in window)
    assert listed(env, f"name=eq:ci&created_at=gt:{at(created[-1] + timedelta(days=1))}") == []
    by_name = [t["name"]["string"] for t in listed(env, "name=neq:null&sort_by=-name")]
    assert by_name == sorted(by_name, reverse=True)


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [
        ("key=eq:abc", 400, "the column 'key' cannot be filtered; filterable: created_at, "
         "deleted_at, hmac_method, id, last_access, name, updated_at, user_id"),
        ("name=gt:a", 400, "filter name: the operator 'gt' is not supported for this column; "
         "operators: eq, neq"),
        ("name=like:a", 400, "filter name='like:a': unknown operator 'like'; operators: eq, "
         "neq, gt, gte, lt, lte, ~eq"),
        ("created_at=gte:yesterday", 400, "filter created_at must be an RFC 3339 date-time, "
         "got 'yesterday'"),
        ("user_id=eq:42", 400, "filter user_id must be a UUID, got '42'"),
        ("name=eq:a%00b", 400, "query parameter 'name' must not contain a NUL character"),
        ("sort_by=id", 400, "sort_by: cannot sort by 'id'; sortable: created_at, deleted_at, "
         "last_access, name, updated_at"),
    ],
)  # fmt: skip
def test_what_cannot_be_filtered_is_named(env: Env, query: str, status: int, message: str) -> None:
    assert error_of(env, f"{TOKENS}?{query}") == (status, message)


def start_job(env: Env, token: Any) -> int:
    response = post(env, START, token)
    assert response.status_code == 201, response.text
    return int(response.json()["data"]["id"])


def jobs_listed(env: Env, query: str, token: Any = None) -> list[dict[str, Any]]:
    response = env.get(f"{JOBS}?{query}" if query else JOBS, token=token)
    assert response.status_code == 200, response.text
    jobs: list[dict[str, Any]] = response.json()["data"]
    assert response.json()["count"] == len(jobs)  # every test here fits one page
    return jobs


def test_upload_job_filters(env: Env) -> None:
    uploader = env.user_with_token("uploader", "Upload-Only")
    first, second = start_job(env, uploader), start_job(env, env.token)
    file = b'{"graph": {"nodes": [{"id": "A", "kinds": ["Thing"]}]}}'
    assert send_file(env, uploader, first, "a.json", file, "application/json").status_code == 202
    assert [j["id"] for j in jobs_listed(env, f"id=eq:{first}")] == [first]
    assert [j["id"] for j in jobs_listed(env, f"id=gt:{first}")] == [second]
    assert {j["id"] for j in jobs_listed(env, "status=eq:1")} == {first, second}
    assert jobs_listed(env, "status=neq:1") == []
    assert [j["id"] for j in jobs_listed(env, "total_files=gte:1")] == [first]
    assert [j["id"] for j in jobs_listed(env, "end_time=eq:null&sort_by=id")] == [first, second]
    # The web client's list: newest first, paged.
    assert [j["id"] for j in jobs_listed(env, "skip=0&limit=10&sort_by=-id")] == [second, first]
    # An uploader sees its own jobs, whatever it asks for.
    assert [j["id"] for j in jobs_listed(env, "", uploader)] == [first]
    admin_id = env.get("/api/v2/self").json()["data"]["id"]
    assert jobs_listed(env, f"user_id=eq:{admin_id}", uploader) == []


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("status=eq:70000", "filter status must be an integer from -32768 to 32767, got '70000'"),
        ("id=eq:1.5", "filter id must be an integer from -9223372036854775808 to "
         "9223372036854775807, got '1.5'"),
        ("user_email_address=eq:a@b", "the column 'user_email_address' cannot be filtered; "
         "filterable: created_at, end_time, id, last_ingest, start_time, status, "
         "status_message, total_files, updated_at, user_id"),
        ("status=~eq:1", "filter status: the operator '~eq' is not supported for this column; "
         "operators: eq, neq"),
    ],
)  # fmt: skip
def test_upload_job_filter_refusals(env: Env, query: str, message: str) -> None:
    assert error_of(env, f"{JOBS}?{query}") == (400, message)


def test_contains_is_case_insensitive_and_takes_wildcards_literally(env: Env) -> None:
    """`~eq:` (no list of the reference's that graphsvc serves takes it yet besides through
    this function): a substring, any case, with % and _ matched as themselves."""
    for name in ("Nightly_Build", "nightly-build", "100% done", "other", "Ñandú à São"):
        assert send(env, "POST", TOKENS, {"token_name": name}).status_code == 200
    column = {"name": FilterColumn("name", "text", (*EQUALITY, "~eq"), nullable=True)}

    def matching(text: str) -> list[str]:
        async def work(conn: Connection) -> list[str]:
            args: list[Any] = []
            found = filter_conditions(conn.dialect, [Filter("name", "~eq", text)], column, args)
            (condition,) = found
            rows = await conn.fetch(
                f"SELECT name FROM auth_tokens WHERE {condition} ORDER BY name", *args
            )
            return [r[0] for r in rows]

        return env.run_in_transaction(work)

    assert matching("NIGHTLY") == ["Nightly_Build", "nightly-build"]
    assert matching("_b") == ["Nightly_Build"]
    assert matching("0%") == ["100% done"]
    # Past ASCII too: SQLite's own upper() changes only ASCII letters.
    assert matching("ñandú") == matching("ÑANDÚ À SÃO") == ["Ñandú à São"]
    assert matching("zzz") == []


def test_time_filters_see_a_token_made_a_moment_ago(env: Env) -> None:
    before = datetime.now(UTC)
    # The token is made later by the clock: it has ticked past `before` (at once, but for a
    # clock that ticks coarsely).
    wait_until(lambda: datetime.now(UTC) > before, timeout=5, what="the clock to tick")
    assert send(env, "POST", TOKENS, {"token_name": "fresh"}).status_code == 200
    assert names(listed(env, f"created_at=gt:{at(before)}")) == {"fresh"}
