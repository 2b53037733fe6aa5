"""Saved queries as the reference keeps them: a user's own, shared with users or public,
changed by their owner (and, once public, by an administrator), exported one by one or all
together (JSON, zip) and imported from those files, the community query library's bundle
and the legacy BloodHound customqueries.json, each malformed entry refused by name while
the rest are kept. Both stores, answers validated against the OpenAPI document."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import httpx2 as httpx
import pytest

from graphsvc.saved_queries.transfer import with_literals
from tests.conftest import Env
from tests.test_tokens import send

QUERIES = "/api/v2/saved-queries"
KERBEROASTABLE = "MATCH (u:User) WHERE u.hasspn = true RETURN u"
DOMAIN_ADMINS = "MATCH (g:Group) WHERE g.objectid ENDS WITH '-512' RETURN g"


def create(env: Env, token: Any, name: str, query: str, description: str = "") -> Any:
    made = send(
        env, "POST", QUERIES, {"name": name, "query": query, "description": description}, token
    )
    assert made.status_code == 201, made.text
    return made.json()["data"]


def listed(env: Env, token: Any, query: str = "") -> list[tuple[str, str]]:
    found = env.get(f"{QUERIES}{query}", token=token)
    assert found.status_code == 200, found.text
    return [(q["name"], q["scope"]) for q in found.json()["data"]]


def upload(
    env: Env, path: str, content: bytes, content_type: str, token: Any = None
) -> httpx.Response:
    headers = {
        **env.signed_headers("POST", path, token, body=content),
        "Content-Type": content_type,
    }
    return env.request("POST", path, headers, content=content)


def zip_bytes(files: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, value in files.items():
            archive.writestr(name, value if isinstance(value, str | bytes) else json.dumps(value))
    return out.getvalue()


def test_a_saved_query_is_created_read_changed_and_deleted(env: Env) -> None:
    made = create(env, None, "Kerberoastable users", KERBEROASTABLE, "users with an SPN")
    assert (made["name"], made["query"], made["description"], made["scope"]) == (
        "Kerberoastable users",
        KERBEROASTABLE,
        "users with an SPN",
        "owned",
    )
    one = f"{QUERIES}/{made['id']}"
    assert env.get(one).json()["data"] == made
    changed = send(env, "PUT", one, {"description": "roastable"}).json()["data"]
    assert (changed["name"], changed["query"], changed["description"]) == (
        "Kerberoastable users",
        KERBEROASTABLE,
        "roastable",
    )
    assert changed["updated_at"] >= made["updated_at"]
    create(env, None, "Domain admins", DOMAIN_ADMINS)
    assert listed(env, None, "?sort_by=-name") == [
        ("Kerberoastable users", "owned"),
        ("Domain admins", "owned"),
    ]
    assert listed(env, None, "?name=~eq:admin") == [("Domain admins", "owned")]
    assert send(env, "DELETE", one).status_code == 204
    assert env.get(one).status_code == 404
    assert listed(env, None) == [("Domain admins", "owned")]


def test_what_a_saved_query_refuses(env: Env) -> None:
    first = create(env, None, "Mine", KERBEROASTABLE)
    other = create(env, None, "Other", DOMAIN_ADMINS)
    cases: list[tuple[str, str, dict[str, Any], int, str]] = [
        ("POST", QUERIES, {"name": "Mine", "query": DOMAIN_ADMINS}, 409, "you already have"),
        ("POST", QUERIES, {"name": " ", "query": DOMAIN_ADMINS}, 400, "a saved query needs a name"),
        ("POST", QUERIES, {"name": "x", "query": ""}, 400, "a saved query needs a query"),
        ("POST", QUERIES, {"name": "x" * 501, "query": "RETURN 1"}, 400, "name has 501"),
        ("POST", QUERIES, {"name": "x", "query": "RETURN 1", "color": 1}, 400, ""),
        ("PUT", f"{QUERIES}/{other['id']}", {"name": "Mine"}, 409, "the owner already has"),
        ("PUT", f"{QUERIES}/999999", {"name": "y"}, 404, "no saved query 999999"),
        ("GET", f"{QUERIES}/abc", {}, 400, ""),
        ("GET", f"{QUERIES}?scope=everything", {}, 400, "invalid scope 'everything'"),
        ("GET", f"{QUERIES}/export", {}, 400, "missing required query parameter: scope"),
        ("GET", f"{QUERIES}/export?scope=all&format=csv", {}, 400, "format must be"),
        ("GET", f"{QUERIES}?colour=eq:1", {}, 400, "the column 'colour' cannot be filtered"),
    ]
    for method, path, body, status, message in cases:
        answer = env.get(path) if method == "GET" else send(env, method, path, body)
        assert answer.status_code == status, (method, path, answer.text)
        assert answer.json()["errors"][0]["message"].startswith(message), answer.text
    assert env.get(f"{QUERIES}/{first['id']}").json()["data"]["query"] == KERBEROASTABLE
    reader = env.user_with_token("reader", "Read-Only")  # no saved_queries permission
    assert env.get(QUERIES, token=reader).status_code == 403


def test_sharing_and_publishing_follow_the_references_rules(env: Env) -> None:
    alice = env.user_with_token("alice", "User")
    bob = env.user_with_token("bob", "User")
    carol = env.user_with_token("carol", "User")
    ids = {name: env.get("/api/v2/self", token=t).json()["data"]["id"] for name, t in
           (("alice", alice), ("bob", bob), ("carol", carol))}  # fmt: skip
    query = create(env, alice, "Alice's", KERBEROASTABLE)
    one, permissions = f"{QUERIES}/{query['id']}", f"{QUERIES}/{query['id']}/permissions"
    assert env.get(one, token=bob).status_code == 404  # not seen: as if it did not exist
    shared = send(env, "PUT", permissions, {"user_ids": [ids["bob"]]}, alice)
    assert shared.status_code == 200, shared.text
    assert shared.json()["data"] == {
        "query_id": query["id"],
        "public": False,
        "shared_to_user_ids": [ids["bob"]],
    }
    assert listed(env, bob, "?scope=shared") == [("Alice's", "shared")]
    assert listed(env, bob) == []  # owned by default
    assert env.get(one, token=carol).status_code == 404
    for method, change in (("PUT", {"name": "Bob's now"}), ("DELETE", None)):
        refused = send(env, method, one, change, bob)
        assert refused.status_code == 403, refused.text
        assert "only its owner" in refused.json()["errors"][0]["message"]
    assert env.get(permissions, token=bob).status_code == 403
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"user_ids": [ids["alice"]]}, 400, "a query cannot be shared with its owner"),
        ({"user_ids": ["00000000-0000-4000-8000-000000000001"]}, 400, "no user"),
        ({"user_ids": [ids["carol"]], "public": True}, 400, "public cannot be true"),
    ]
    for body, status, message in cases:
        answer = send(env, "PUT", permissions, body, alice)
        assert answer.status_code == status, answer.text
        assert answer.json()["errors"][0]["message"].startswith(message)
    assert send(env, "PUT", permissions, {"user_ids": [ids["carol"]]}, bob).status_code == 403
    # Bob removes himself; Carol cannot remove Bob, nor herself where it is not shared.
    assert send(env, "DELETE", permissions, {"user_ids": [ids["bob"]]}, carol).status_code == 404
    assert send(env, "DELETE", permissions, {"user_ids": [ids["bob"]]}, bob).status_code == 204
    assert listed(env, bob, "?scope=shared") == []

    public = send(env, "PUT", permissions, {"public": True}, alice)
    assert public.json()["data"] == {
        "query_id": query["id"],
        "public": True,
        "shared_to_user_ids": [],
    }
    assert listed(env, carol, "?scope=public") == [("Alice's", "public")]
    assert listed(env, alice, "?scope=all") == [("Alice's", "owned")]
    again = send(env, "PUT", permissions, {"user_ids": [ids["carol"]]}, alice)
    assert again.status_code == 400 and "is public" in again.json()["errors"][0]["message"]
    assert send(env, "PUT", one, {"name": "Carol's"}, carol).status_code == 403
    # An administrator may change a public query and make it private; then it is gone for
    # the others again.
    assert send(env, "PUT", one, {"description": "checked"}).status_code == 200
    private = send(env, "PUT", permissions, {"public": False})
    assert private.status_code == 200, private.text
    assert listed(env, carol, "?scope=public") == []
    assert env.get(one).status_code == 404
    assert env.get(one, token=alice).json()["data"]["description"] == "checked"


def test_export_one_and_all_then_import_them_back(env: Env) -> None:
    create(env, None, "Kerberoastable: users/SPN", KERBEROASTABLE, "roast")
    second = create(env, None, "Domain admins", DOMAIN_ADMINS)
    one = env.get(f"{QUERIES}/{second['id']}/export")
    assert one.status_code == 200 and one.headers["content-type"] == "application/json"
    assert one.headers["content-disposition"].startswith(
        'attachment; filename="Domain admins.json"'
    )
    assert one.json() == {"name": "Domain admins", "query": DOMAIN_ADMINS, "description": ""}

    everything = env.get(f"{QUERIES}/export?scope=owned")
    assert everything.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(everything.content)) as archive:
        files = {name: json.loads(archive.read(name)) for name in archive.namelist()}
    assert files == {
        "Domain admins.json": {"name": "Domain admins", "query": DOMAIN_ADMINS, "description": ""},
        "Kerberoastable_ users_SPN.json": {
            "name": "Kerberoastable: users/SPN",
            "query": KERBEROASTABLE,
            "description": "roast",
        },
    }
    as_list = env.get(f"{QUERIES}/export?scope=all&format=json").json()
    assert [q["name"] for q in as_list] == ["Domain admins", "Kerberoastable: users/SPN"]

    # Into another user's store of queries: the zip, then the JSON list (all taken now).
    dana = env.user_with_token("dana", "User")
    imported = upload(env, f"{QUERIES}/import", everything.content, "application/zip", dana)
    assert imported.status_code == 201, imported.text
    kept = imported.json()["data"]
    assert sorted(q["name"] for q in kept["imported"]) == [
        "Domain admins",
        "Kerberoastable: users/SPN",
    ]
    assert kept["refused"] == []
    assert sorted(listed(env, dana)) == [
        ("Domain admins", "owned"),
        ("Kerberoastable: users/SPN", "owned"),
    ]
    again = upload(env, f"{QUERIES}/import", json.dumps(as_list).encode(), "application/json", dana)
    assert again.status_code == 400
    message = again.json()["errors"][0]["message"]
    assert message.startswith("no saved query imported: body #1 (Domain admins): you already have")


def test_import_keeps_the_good_entries_and_refuses_each_bad_one_by_name(env: Env) -> None:
    legacy = {
        "queries": [
            {
                "name": "Admins by name",
                "category": "Lab",
                "queryList": [
                    {
                        "final": True,
                        "query": "MATCH (g:Group) WHERE g.name = $name RETURN g // '$name' kept",
                        "props": {"name": "DOMAIN ADMINS@TESTLAB.LOCAL"},
                    }
                ],
            },
            {
                "name": "Pick a domain, then its admins",
                "queryList": [
                    {"final": False, "title": "Domain?", "query": "MATCH (d:Domain) RETURN d.name"},
                    {"final": True, "query": "MATCH (g:Group {domain: $result}) RETURN g"},
                ],
            },
            {"name": "No steps", "queryList": []},
        ]
    }
    library = [
        {
            "name": "Computers with unconstrained delegation",
            "guid": "5f0f4c1e-0000-4000-8000-000000000001",
            "prebuilt": False,
            "platforms": ["Active Directory"],
            "category": "Delegation",
            "description": None,
            "query": "MATCH (c:Computer) WHERE c.unconstraineddelegation = true RETURN c",
            "revision": 1,
            "resources": [],
            "acknowledgements": [],
        },
        {"name": "", "query": "RETURN 1"},
        {"name": "Not text", "query": 42},
    ]
    body = zip_bytes(
        {
            "legacy/customqueries.json": legacy,
            "library.json": library,
            "broken.json": "{not json",
            "one.json": {"name": "Single", "query": "MATCH (n:Domain) RETURN n"},
            "__MACOSX/._one.json": b"\x00\x05",
            "notes/.hidden.json": "{}",
        }
    )
    answer = upload(env, f"{QUERIES}/import", body, "application/zip")
    assert answer.status_code == 201, answer.text
    found = answer.json()["data"]
    imported = {q["name"]: q for q in found["imported"]}
    assert sorted(imported) == [
        "Admins by name",
        "Computers with unconstrained delegation",
        "Single",
    ]
    assert imported["Admins by name"]["query"] == (
        "MATCH (g:Group) WHERE g.name = 'DOMAIN ADMINS@TESTLAB.LOCAL' RETURN g // '$name' kept"
    )
    assert imported["Admins by name"]["description"] == "Lab"
    refused = {(r["source"], r["name"]): r["reason"] for r in found["refused"]}
    assert set(refused) == {
        ("legacy/customqueries.json #2", "Pick a domain, then its admins"),
        ("legacy/customqueries.json #3", "No steps"),
        ("library.json #2", ""),
        ("library.json #3", "Not text"),
        ("broken.json", ""),
    }
    assert refused[("legacy/customqueries.json #2", "Pick a domain, then its admins")].startswith(
        "a query of 2 steps"
    )
    assert refused[("library.json #3", "Not text")] == "no `query` (text, not empty)"
    assert refused[("broken.json", "")].startswith("not JSON")
    assert len(listed(env, None)) == 3
    audit = env.get("/api/v2/audit?action=saved_query.imported").json()["data"]["logs"]
    assert audit and "3 saved queries imported, 5 refused" in json.dumps(audit[0])


def test_import_refuses_what_is_not_queries(env: Env) -> None:
    path = f"{QUERIES}/import"
    cases: list[tuple[bytes, str, int, str]] = [
        (b"PK\x03\x04 not really", "application/zip", 400, "the body is not a zip archive"),
        (b"[]", "application/json", 400, "the body holds no saved query"),
        (b'"text"', "application/json", 400, "no saved query imported: body: not a saved query"),
        (b"name,query", "text/csv", 415, "Content-Type 'text/csv' is not accepted"),
    ]
    for content, content_type, status, message in cases:
        answer = upload(env, path, content, content_type)
        assert answer.status_code == status, answer.text
        assert answer.json()["errors"][0]["message"].startswith(message), answer.text
    assert listed(env, None) == []


def test_import_refuses_hostile_entries_by_name_and_keeps_the_rest(env: Env) -> None:
    deep_props = {"x": json.loads("[" * 40 + "1" + "]" * 40)}
    body = (
        '[{"name": "kept", "query": "RETURN 1"},'
        ' {"name": "lone \\ud800", "query": "RETURN 1"},'
        ' {"name": "lone query", "query": "RETURN \'\\udfff\'"},'
        ' {"queryList": [{"final": true, "query": "RETURN $x", "props": '
        + json.dumps(deep_props)
        + '}], "name": "deep props"},'
        ' {"queryList": [{"final": true, "query": "RETURN $x", "props": {"x": 1e400}}],'
        ' "name": "infinite"}]'
    )
    answer = upload(env, f"{QUERIES}/import", body.encode(), "application/json")
    assert answer.status_code == 201, answer.text
    found = answer.json()["data"]
    assert [q["name"] for q in found["imported"]] == ["kept"]
    assert [(r["name"], r["reason"]) for r in found["refused"]] == [
        ("lone \\ud800", "its name holds a lone surrogate (\\ud800...)"),
        ("lone query", "its query holds a lone surrogate (\\ud800...)"),
        ("deep props", "its parameter 'x' nests lists more than 32 deep"),
        ("infinite", "its parameter 'x' is neither text, a number, a boolean nor a list"),
    ]
    for content, message in (
        ("[" * 5000 + "]" * 5000, "no saved query imported: body: not JSON this server reads"),
        ('{"name": "n", "query": NaN}', "no saved query imported: body: not JSON: NaN is not"),
    ):
        refused = upload(env, f"{QUERIES}/import", content.encode(), "application/json")
        assert refused.status_code == 400, refused.text
        assert refused.json()["errors"][0]["message"].startswith(message), refused.text
    many = json.dumps([{"name": f"q{i}", "query": "RETURN 1"} for i in range(10_001)])
    refused = upload(env, f"{QUERIES}/import", many.encode(), "application/json")
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["message"] == (
        "the body holds 10001 entries; at most 10000 are imported at once: split it"
    )
    assert listed(env, None) == [("kept", "owned")]


@pytest.mark.parametrize(
    ("query", "props", "expected"),
    [
        (
            "RETURN $a, $b, $c",
            {"a": "it's", "b": 3, "c": [True, "x"]},
            "RETURN 'it\\'s', 3, [true, 'x']",
        ),
        ("MATCH (n {name: {name}}) RETURN n", {"name": "A"}, "MATCH (n {name: 'A'}) RETURN n"),
        ('RETURN "$a", `$a`, $ab, $a', {"a": 1}, 'RETURN "$a", `$a`, $ab, 1'),
    ],
)
def test_legacy_props_become_literals_outside_quotes(
    query: str, props: dict[str, Any], expected: str
) -> None:
    assert with_literals(query, props) == expected
