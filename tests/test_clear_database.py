"""Clearing the database (`POST /api/v2/clear-database`, `GET /api/v2/graphs/source-kinds`,
`graphsvc clear-database`), on both stores: each part deletes what it names and nothing
else, at once, audited; every refusal is a 4xx that deletes nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2 as httpx

from graphsvc.accounts import tokens
from graphsvc.store import uploads
from graphsvc.store.db import Connection
from tests.conftest import FIXTURES, Env, ingest
from tests.test_cypher import post as ask
from tests.test_uploads import count_rows, json_files, upload, wait_for_job

CLEAR = "/api/v2/clear-database"
SOURCE_KINDS = "/api/v2/graphs/source-kinds"
V6 = FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "ingest"
DOMAIN = "S-1-5-21-3130019616-2776909439-2417379446"


def clear(env: Env, body: Any, token: tokens.CreatedToken | None = None) -> httpx.Response:
    content = json.dumps(body).encode() if not isinstance(body, bytes) else body
    headers = {
        **env.signed_headers("POST", CLEAR, token, body=content),
        "Content-Type": "application/json",
    }
    return env.request("POST", CLEAR, headers, content=content)


def count(env: Env, query: str) -> int:
    answer = ask(env, {"query": query})
    assert answer.status_code == 200, answer.text
    value: int = answer.json()["data"]["literals"][0]["value"]
    return value


def graph_counts(env: Env) -> tuple[int, int]:
    return count(env, "MATCH (n) RETURN count(n)"), count(env, "MATCH ()-[r]->() RETURN count(r)")


def audit_entries(env: Env) -> list[dict[str, Any]]:
    answer = env.get("/api/v2/audit?action=eq:DeleteBloodhoundData&limit=100")
    assert answer.status_code == 200, answer.text
    entries: list[dict[str, Any]] = answer.json()["data"]["logs"]
    return sorted(entries, key=lambda e: e["id"])


def opengraph(nodes: list[tuple[str, list[str]]], source_kind: str | None) -> dict[str, Any]:
    document: dict[str, Any] = {
        "graph": {
            "nodes": [
                {"id": node_id, "kinds": kinds, "properties": {"name": node_id}}
                for node_id, kinds in nodes
            ],
            "edges": [],
        }
    }
    if source_kind:
        document["metadata"] = {"source_kind": source_kind}
    return document


def test_clearing_the_collected_graph_empties_it_for_every_reader_and_audits_it(
    env: Env,
) -> None:
    ingest(env, V6)
    nodes, relationships = graph_counts(env)
    assert nodes > 50 and relationships > 500
    path = f"/api/v2/graphs/shortest-path?start_node={DOMAIN}-1104&end_node={DOMAIN}-512"
    assert env.get(path).status_code == 200  # the path index holds the graph
    answer = clear(env, {"deleteCollectedGraphData": True})
    assert answer.status_code == 204, answer.text
    assert answer.content == b""
    assert graph_counts(env) == (0, 0)
    assert env.get(path).status_code == 404  # the path index moved with the commit
    assert env.get(f"/api/v2/search?q={DOMAIN}").json()["data"] == []
    # The statistics of the runs are history, not graph data: kept.
    assert env.get(f"/api/v2/ad-domains/{DOMAIN}/data-quality-stats").json()["data"]
    entries = audit_entries(env)
    assert [(e["status"], e["fields"].get("delete_request_successful")) for e in entries] == [
        ("intent", None),
        ("success", "collected graph data"),
    ]
    assert entries[0]["fields"]["options"]["deleteCollectedGraphData"] is True
    # The store can be filled again, and holds what the new run brings.
    ingest(env, V6)
    assert graph_counts(env) == (nodes, relationships)


def test_source_kinds_are_listed_and_clear_their_nodes(env: Env, tmp_path: Path) -> None:
    """The reference's own case (its TestDeleteSourceKindsData fixture's shape): nodes of
    Base, AZBase, an OpenGraph source kind and none, deleted by source kind, then the
    nodes of none ("sourceless", 0)."""
    plain = tmp_path / "plain.json"
    plain.write_text(
        json.dumps(
            opengraph([("N1", ["Base", "Computer"]), ("N2", ["AZBase", "Computer"]),
                       ("N4", ["Computer"])], None)
        )
    )  # fmt: skip
    github = tmp_path / "github.json"
    github.write_text(json.dumps(opengraph([("N3", ["Computer"])], "GithubBase")))
    ingest(env, plain, github)
    listed = env.get(SOURCE_KINDS)
    assert listed.status_code == 200, listed.text
    kinds = listed.json()["data"]["kinds"]
    assert kinds == [
        {"id": 2, "name": "AZBase"},
        {"id": 1, "name": "Base"},
        {"id": 3, "name": "GithubBase"},
        {"id": 0, "name": "Sourceless"},
    ]
    answer = clear(env, {"deleteSourceKinds": [2, 3]})
    assert answer.status_code == 204, answer.text
    names = ask(env, {"query": "MATCH (n) RETURN n.name ORDER BY n.name"}).json()["data"]
    assert [literal["value"] for literal in names["literals"]] == ["N1", "N4"]
    # Base and AZBase stay listed; the OpenGraph source kind is gone with its nodes.
    assert [k["name"] for k in env.get(SOURCE_KINDS).json()["data"]["kinds"]] == [
        "AZBase",
        "Base",
        "Sourceless",
    ]
    assert clear(env, {"deleteSourceKinds": [0]}).status_code == 204
    assert count(env, "MATCH (n) RETURN count(n)") == 1
    assert count(env, "MATCH (n:Base) RETURN count(n)") == 1


def test_relationships_of_a_kind_are_cleared_and_nothing_else(env: Env) -> None:
    ingest(env, V6)
    nodes, relationships = graph_counts(env)
    sessions = count(env, "MATCH ()-[r:HasSession]->() RETURN count(r)")
    assert sessions > 0
    assert clear(env, {"deleteRelationships": ["HasSession"]}).status_code == 204
    assert count(env, "MATCH ()-[r:HasSession]->() RETURN count(r)") == 0
    assert graph_counts(env) == (nodes, relationships - sessions)
    assert audit_entries(env)[-1]["fields"]["delete_request_successful"] == "HasSession"


def test_history_is_cleared_apart_from_the_graph(
    uploading: tuple[Env, tokens.CreatedToken],
) -> None:
    env, collector = uploading
    job = upload(env, collector, json_files(V6))
    assert wait_for_job(env, collector, job)["status"] == uploads.COMPLETE
    graph = graph_counts(env)
    assert count_rows(env, "file_upload_jobs") == 1
    assert count_rows(env, "ad_domain_stats") > 0
    body = {"deleteFileIngestHistory": True, "deleteDataQualityHistory": True}
    assert clear(env, body).status_code == 204
    assert count_rows(env, "file_upload_jobs") == count_rows(env, "file_upload_files") == 0
    assert count_rows(env, "ad_domain_stats") == count_rows(env, "data_quality_aggregations") == 0
    assert env.get(f"/api/v2/ad-domains/{DOMAIN}/data-quality-stats").json()["data"] == []
    assert graph_counts(env) == graph


def test_every_refusal_names_its_reason_and_deletes_nothing(env: Env) -> None:
    ingest(env, V6)
    before = graph_counts(env)
    refusals = [
        ({}, 400, "please select something to delete"),
        ({"deleteFileIngestHistory": False}, 400, "please select something to delete"),
        (
            {"deleteCollectedGraphData": True, "deleteRelationships": ["HasSession"]},
            400,
            "may not be combined",
        ),
        ({"deleteSourceKinds": [99]}, 400, "requested source kind id 99 not found"),
        ({"deleteRelationships": ["HasSesion"]}, 400, "no relationship kind 'HasSesion'"),
        ({"deleteAssetGroupSelectors": [99]}, 400, "no asset group 99"),
        ({"deleteCollectedGraphData": "yes"}, 400, "deleteCollectedGraphData"),
        ({"deleteEverything": True}, 400, "deleteEverything"),
        (b"{not json", 400, ""),
    ]
    for body, status, words in refusals:
        answer = clear(env, body)
        assert answer.status_code == status, (body, answer.text)
        assert words in answer.json()["errors"][0]["message"], (body, answer.text)
    reader = env.user_with_token("reader", "Read-Only")
    refused = clear(env, {"deleteCollectedGraphData": True}, reader)
    assert refused.status_code == 403, refused.text
    assert "db/Wipe" in refused.json()["errors"][0]["message"]

    async def hold_the_lease(conn: Connection) -> None:
        now = datetime.now(UTC)
        assert await uploads.take_lease(conn, "an ingester", now, now + timedelta(minutes=5))

    env.run_in_transaction(hold_the_lease)
    busy = clear(env, {"deleteCollectedGraphData": True})
    assert busy.status_code == 409, busy.text
    assert "ingest is under way" in busy.json()["errors"][0]["message"]
    assert graph_counts(env) == before
    assert audit_entries(env) == []


def test_the_command_line_asks_first_and_clears_as_the_route_does(env: Env) -> None:
    ingest(env, V6)
    nodes, relationships = graph_counts(env)
    sessions = count(env, "MATCH ()-[r:HasSession]->() RETURN count(r)")
    declined = env.cli("clear-database", "--relationships", "HasSession", stdin="n\n")
    assert declined.exit_code == 1 and "aborted" in declined.output
    assert graph_counts(env) == (nodes, relationships)
    done = env.cli("clear-database", "--relationships", "HasSession", "--yes", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {"deleted": ["HasSession"]}
    assert graph_counts(env) == (nodes, relationships - sessions)
    unknown = env.cli("clear-database", "--source-kind", "Github", "--yes")
    assert unknown.exit_code == 1
    assert "no source kind 'Github' (known: AZBase, Base, Sourceless)" in unknown.output
    nothing = env.cli("clear-database", "--yes")
    assert nothing.exit_code == 1 and "nothing to delete" in nothing.output
    everything = env.cli("clear-database", "--all", "--yes")
    assert everything.exit_code == 0 and "collected graph data" in everything.output
    assert graph_counts(env) == (0, 0)
    assert [e["status"] for e in audit_entries(env)] == ["intent", "success"] * 2
