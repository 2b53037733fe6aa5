"""GET /api/v2/graphs/shortest-path: every answer checked against a plain breadth-first search
written here, over the edges worked out from the raw files of both real collections and over
generated graphs (property-based), on both stores; the filters, the errors and a new
ingest seen by the next request."""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict, deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphsvc.graph import path_index
from graphsvc.graph.paths import TRAVERSABLE_KINDS
from tests.conftest import Env, ingest
from tests.test_ad_domain_stats import raw_records
from tests.test_sharphound import SAMPLES, TESTLAB, Expected, raw_documents
from tests.test_tier_zero import expected_tier_zero

Edge = tuple[str, str, str]  # start, kind, end (object ids)
# TESTLAB's trusted domain: its only edges are trusts, which a search does not follow.
EXTERNAL = "S-1-5-21-3084884204-958224920-2707782874"
ADMINS = f"{TESTLAB}-512"


def shortest_path_edges(edges: Iterable[Edge], start: str, end: str) -> set[Edge]:
    """The edges of every shortest path from start to end: a breadth-first search forward,
    then back from the end along edges that go one level down."""
    forward: dict[str, list[Edge]] = defaultdict(list)
    for edge in edges:
        forward[edge[0]].append(edge)
    distance = {start: 0}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for _, _, far in forward[node]:
            if far not in distance:
                distance[far] = distance[node] + 1
                queue.append(far)
    if end not in distance or start == end:
        return set()
    found: set[Edge] = set()
    layer = {end}
    while layer:
        below = {e for node in distance for e in forward[node] if e[2] in layer}
        below = {e for e in below if distance[e[0]] == distance[e[2]] - 1}
        found |= below
        layer = {e[0] for e in below} - {start}
    return found


def ask(env: Env, start: str, end: str, **extra: str) -> Any:
    return env.get("/api/v2/graphs/shortest-path?" + urlencode(
        {"start_node": start, "end_node": end, **extra}
    ))  # fmt: skip


def answered_edges(body: dict[str, Any]) -> set[Edge]:
    ids = {key: node["objectId"] for key, node in body["data"]["nodes"].items()}
    found = {(ids[e["source"]], e["kind"], ids[e["target"]]) for e in body["data"]["edges"]}
    assert len(found) == len(body["data"]["edges"]), "each edge once"
    on_edges = {n for e in body["data"]["edges"] for n in (e["source"], e["target"])}
    assert on_edges == set(body["data"]["nodes"]), "the nodes are those of the edges"
    return found


def traversable(expected: Expected) -> list[Edge]:
    return [(s, k, e) for (s, k, e) in expected.edges if k in TRAVERSABLE_KINDS]


@pytest.mark.parametrize("name", ["v6 folder", "sample zip (3 domains, 3 collections)"])
def test_every_user_and_computer_to_each_domains_admins(env: Env, name: str) -> None:
    path = SAMPLES[name]
    ingest(env, path)
    expected = Expected(raw_documents(path))
    edges = traversable(expected)
    admins = [f"{d}-512" for d in sorted(expected.domains) if f"{d}-512" in expected.nodes]
    starts = sorted(o for o, (label, _) in expected.nodes.items() if label in ("User", "Computer"))
    found_paths = 0
    for admin in admins:
        for start in starts:
            want = shortest_path_edges(edges, start, admin)
            response = ask(env, start, admin)
            if not want:
                assert response.status_code == 404, (start, admin, response.text)
                continue
            assert response.status_code == 200, response.text
            assert answered_edges(response.json()) == want, (start, admin)
            found_paths += 1
    assert found_paths > 10


def test_a_path_on_testlab_and_its_nodes(env: Env) -> None:
    ingest(env, SAMPLES["v6 folder"])
    body = ask(env, f"{TESTLAB}-1105", f"{TESTLAB}-512").json()["data"]
    nodes = {n["objectId"]: n for n in body["nodes"].values()}
    admins = nodes[f"{TESTLAB}-512"]
    assert admins["kind"] == "Group" and admins["label"] == "DOMAIN ADMINS@TESTLAB.LOCAL"
    assert admins["isTierZero"] is True and admins["isOwnedObject"] is False
    assert set(admins["kinds"]) == {"Group", "Base"}
    assert all(e["label"] == e["kind"] for e in body["edges"])


def test_kind_filters(env: Env) -> None:
    ingest(env, SAMPLES["v6 folder"])
    expected = Expected(raw_documents(SAMPLES["v6 folder"]))
    start, end = f"{TESTLAB}-1105", f"{TESTLAB}-512"
    only = {"MemberOf", "HasSession", "AdminTo"}
    response = ask(env, start, end, relationship_kinds="in:" + ",".join(sorted(only)))
    want = shortest_path_edges([e for e in expected.edges if e[1] in only], start, end)
    if want:
        assert answered_edges(response.json()) == want
    else:
        assert response.status_code == 404
    left_out = {"HasSession"}
    response = ask(env, start, end, relationship_kinds="nin:HasSession")
    kept = [e for e in traversable(expected) if e[1] not in left_out]
    want = shortest_path_edges(kept, start, end)
    assert (answered_edges(response.json()) if want else set()) == want
    # A kind outside the default set may be asked for by name.
    response = ask(env, f"{TESTLAB}-2122", TESTLAB, relationship_kinds="in:GetChangesAll")
    assert answered_edges(response.json()) == {(f"{TESTLAB}-2122", "GetChangesAll", TESTLAB)}


@pytest.mark.parametrize(
    ("query", "status", "context", "words"),
    [
        ({"start_node": "S-1-5-21-1-2-3", "end_node": ADMINS}, 404, "start_node", "no node"),
        ({"start_node": f"{TESTLAB}-512", "end_node": "nothing"}, 404, "end_node", "no node"),
        ({"start_node": EXTERNAL, "end_node": f"{TESTLAB}-512"}, 404, "end_node", "no path"),
        ({"start_node": ADMINS, "end_node": ADMINS}, 404, "end_node", "no path"),
        ({"end_node": f"{TESTLAB}-512"}, 400, "start_node", "missing"),
        ({"start_node": f"{TESTLAB}-1105"}, 400, "end_node", "missing"),
        ({"start_node": "a", "end_node": "b", "relationship_kinds": "all:MemberOf"}, 400,
         "relationship_kinds", "in:Kind1"),
        ({"start_node": "a", "end_node": "b", "relationship_kinds": "in:"}, 400,
         "relationship_kinds", "in:Kind1"),
        ({"start_node": "a", "end_node": "b", "relationship_kinds": "in:MemberOf,NoSuchKind"},
         400, "relationship_kinds", "'NoSuchKind'"),
        ({"start_node": "a", "end_node": "b", "only_traversable": "maybe"}, 400,
         "only_traversable", "true or false"),
    ],
)  # fmt: skip
def test_refusals_name_what_is_wrong(
    env: Env, query: dict[str, str], status: int, context: str, words: str
) -> None:
    ingest(env, SAMPLES["v6 folder"])
    response = env.get("/api/v2/graphs/shortest-path?" + urlencode(query))
    assert response.status_code == status, response.text
    error = response.json()["errors"][0]
    assert error["context"] == context and words in error["message"], error


def opengraph(prefix: str, edges: list[tuple[int, str, int]], nodes: int) -> dict[str, Any]:
    def ref(i: int) -> dict[str, str]:
        return {"value": f"{prefix}-{i}"}

    return {
        "graph": {
            "nodes": [{"id": f"{prefix}-{i}", "kinds": ["Thing"]} for i in range(nodes)],
            "edges": [{"kind": kind, "start": ref(a), "end": ref(b)} for a, kind, b in edges],
        }
    }


KINDS = st.sampled_from(["MemberOf", "AdminTo", "GenericAll", "GetChanges"])


@st.composite
def graphs(draw: st.DrawFn) -> tuple[int, list[tuple[int, str, int]], list[tuple[int, int]]]:
    size = draw(st.integers(2, 14))
    node = st.integers(0, size - 1)
    edges = draw(st.lists(st.tuples(node, KINDS, node), max_size=40))
    pairs = draw(st.lists(st.tuples(node, node), min_size=1, max_size=6))
    return size, edges, pairs


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_generated_graphs_match_a_plain_search(env: Env, tmp_path: Path) -> None:
    """Each example is a new graph in the same store (ids prefixed by the example's
    number): the index is rebuilt for every ingest, and answers only within its graph."""
    counter = iter(range(10_000))

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(graph=graphs())
    def check(graph: tuple[int, list[tuple[int, str, int]], list[tuple[int, int]]]) -> None:
        size, edges, pairs = graph
        prefix = f"G{next(counter)}"
        document = tmp_path / f"{prefix}.json"
        document.write_text(json.dumps(opengraph(prefix, edges, size)))
        ingest(env, document)
        named = {(f"{prefix}-{a}", k, f"{prefix}-{b}") for a, k, b in edges}
        followed = [e for e in named if e[1] in TRAVERSABLE_KINDS]
        for a, b in pairs:
            start, end = f"{prefix}-{a}", f"{prefix}-{b}"
            want = shortest_path_edges(followed, start, end)
            response = ask(env, start, end)
            if want:
                assert answered_edges(response.json()) == want
            else:
                assert response.status_code == 404, response.text

    check()


def test_path_command_prints_the_steps_and_the_api_answer(env: Env) -> None:
    """`graphsvc path` on the same store as the test app: its steps, level by level, count
    the paths; --json is the route's answer."""
    assert env.cli("ingest", str(SAMPLES["v6 folder"])).exit_code == 0
    start = f"{TESTLAB}-1105"
    text = env.cli("path", start, ADMINS)
    assert text.exit_code == 0, text.output
    assert text.output.splitlines() == [
        "2 shortest path(s) of 3 step(s) from DFM@TESTLAB.LOCAL to DOMAIN ADMINS@TESTLAB.LOCAL:",
        "  1. DFM@TESTLAB.LOCAL -AdminTo-> WIN10.TESTLAB.LOCAL",
        "  1. DFM@TESTLAB.LOCAL -CanPSRemote-> WIN10.TESTLAB.LOCAL",
        "  2. WIN10.TESTLAB.LOCAL -HasSession-> ADMINISTRATOR@TESTLAB.LOCAL",
        "  3. ADMINISTRATOR@TESTLAB.LOCAL -MemberOf-> DOMAIN ADMINS@TESTLAB.LOCAL",
    ]
    answered = json.loads(env.cli("path", start, ADMINS, "--json").stdout)
    assert answered_edges(answered) == answered_edges(ask(env, start, ADMINS).json())
    missing = env.cli("path", EXTERNAL, ADMINS)
    assert missing.exit_code == 1 and "end_node: no path from" in missing.output


# --- exposure: who reaches a domain's tier zero -------------------------------------------


def expected_exposure(path: Path, domain: str) -> tuple[dict[str, int], set[str], dict[str, int]]:
    """From the raw files: each principal's distance to the domain's tier zero (over the
    traversable kinds; principals in tier zero left out), the domain's enabled users, and
    every node's distance."""
    expected = Expected(raw_documents(path))
    backward: dict[str, list[str]] = defaultdict(list)
    for start, _, end in traversable(expected):
        backward[end].append(start)
    distance = dict.fromkeys(expected_tier_zero(path)[domain], 0)
    queue = deque(distance)
    while queue:
        node = queue.popleft()
        for before in backward[node]:
            if before not in distance:
                distance[before] = distance[node] + 1
                queue.append(before)
    principals = {
        oid for oid, (label, _) in expected.nodes.items() if label in ("User", "Computer", "Group")
    }
    records = raw_records(path)
    enabled = {
        oid
        for oid, (label, node_domain) in expected.nodes.items()
        if label == "User"
        and node_domain == domain
        and records.get(oid, {}).get("properties", {}).get("enabled") is True
    }
    exposed = {oid: d for oid, d in distance.items() if d > 0 and oid in principals}
    return exposed, enabled, distance


@pytest.mark.parametrize("name", ["v6 folder", "sample zip (3 domains, 3 collections)"])
def test_exposure_of_each_domain_matches_a_search_back_from_tier_zero(env: Env, name: str) -> None:
    path = SAMPLES[name]
    ingest(env, path)
    expected = Expected(raw_documents(path))
    edges = set(traversable(expected))
    domains = sorted(d for d in expected.domains if expected.nodes.get(d, ("",))[0] == "Domain")
    seen = 0
    for domain in domains:
        exposed, enabled, distance = expected_exposure(path, domain)
        body = env.get(f"/api/v2/domains/{domain}/exposure?limit=1000").json()
        assert body["count"] == len(exposed) == len(body["data"]), domain
        assert {e["objectID"]: e["length"] for e in body["data"]} == exposed
        lengths = [e["length"] for e in body["data"]]
        assert lengths == sorted(lengths), "shortest first"
        for entry in body["data"]:
            hop = entry["firstHop"]
            assert (entry["objectID"], hop["kind"], hop["objectID"]) in edges
            assert distance[hop["objectID"]] == entry["length"] - 1
        users = {u for u in enabled if u in exposed}
        assert body["users"]["enabled"] == len(enabled)
        assert body["users"]["exposed"] == len(users)
        assert body["users"]["share"] == pytest.approx(len(users) / len(enabled) if enabled else 0)
        seen += len(exposed)
    assert seen > 10


def test_exposure_pages_and_refuses_what_it_must(env: Env) -> None:
    ingest(env, SAMPLES["v6 folder"])
    whole = env.get(f"/api/v2/domains/{TESTLAB}/exposure?limit=1000").json()
    pages = [
        e
        for skip in range(0, whole["count"], 5)
        for e in env.get(f"/api/v2/domains/{TESTLAB}/exposure?skip={skip}&limit=5").json()["data"]
    ]
    assert pages == whole["data"]
    assert env.get(f"/api/v2/domains/{TESTLAB}/exposure").json()["limit"] == 10
    unknown = env.get("/api/v2/domains/S-1-5-21-1-2-3/exposure")
    assert unknown.status_code == 404 and "no Domain" in unknown.json()["errors"][0]["message"]
    assert env.get(f"/api/v2/domains/{TESTLAB}/exposure?limit=-1").status_code == 400


def test_exposure_command(env: Env) -> None:
    assert env.cli("ingest", str(SAMPLES["v6 folder"])).exit_code == 0
    body = env.get(f"/api/v2/domains/{TESTLAB}/exposure?limit=3").json()
    text = env.cli("exposure", TESTLAB, "--limit", "3")
    assert text.exit_code == 0, text.output
    users = body["users"]
    lines = text.output.splitlines()
    share = f"{100 * users['share']:.1f}%"
    assert lines[0] == (
        f"{users['exposed']} of {users['enabled']} enabled users ({share}) have a path to "
        f"tier zero; {body['count']} principals in all:"
    )
    first = body["data"][0]
    assert lines[1] == (
        f"  {first['length']}  {first['name']} ({first['label']}) "
        f"-{first['firstHop']['kind']}-> {first['firstHop']['name']}"
    )
    assert json.loads(env.cli("exposure", TESTLAB, "--limit", "3", "--json").stdout) == body


def test_a_build_cut_off_by_its_request_goes_on_for_the_next(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index is built on a connection of its own: a request that times out while it
    builds leaves it running, and the next request gets the answer from that same build."""
    ingest(env, SAMPLES["v6 folder"])
    builds: list[Any] = []
    build = path_index.build_index

    async def slow_build(conn: Any, version: Any) -> Any:
        builds.append(version)
        await asyncio.sleep(1.5)
        return await build(conn, version)

    monkeypatch.setattr(path_index, "build_index", slow_build)
    uri = "/api/v2/graphs/shortest-path?" + urlencode(
        {"start_node": f"{TESTLAB}-1105", "end_node": ADMINS}
    )
    cut = env.get(uri, headers={"Prefer": "wait=1"})
    assert cut.status_code == 500
    assert cut.json()["errors"][0]["message"] == "request timed out after 1 seconds"
    time.sleep(1.5)
    assert env.get(uri).status_code == 200
    assert len(builds) == 1


def test_azure_kinds_are_followed_by_default(env: Env, tmp_path: Path) -> None:
    """A user in a group that owns an app: AZMemberOf then AZOwns, both in the reference's
    Azure traversable kinds."""
    tenant = "44444444-4444-4444-8444-444444444444"
    user, group, app = (f"aaaaaaaa-0000-4000-8000-00000000000{i}" for i in (1, 2, 3))
    document = {
        "meta": {"type": "azure", "version": 5},
        "data": [
            {"kind": "AZTenant", "data": {"tenantId": tenant, "displayName": "DELTA"}},
            {"kind": "AZUser", "data": {"id": user, "tenantId": tenant,
                                        "userPrincipalName": "u@delta"}},
            {"kind": "AZGroup", "data": {"id": group, "tenantId": tenant, "displayName": "G"}},
            {"kind": "AZApp", "data": {"appId": app, "tenantId": tenant, "displayName": "A"}},
            {"kind": "AZGroupMember", "data": {"groupId": group, "members": [
                {"member": {"id": user, "@odata.type": "#microsoft.graph.user"}}]}},
            {"kind": "AZAppOwner", "data": {"appId": app, "owners": [
                {"owner": {"id": group, "@odata.type": "#microsoft.graph.group"}}]}},
        ],
    }  # fmt: skip
    (tmp_path / "azure.json").write_text(json.dumps(document))
    ingest(env, tmp_path / "azure.json")
    response = ask(env, user, app)
    assert response.status_code == 200, response.text
    assert answered_edges(response.json()) == {
        (user.upper(), "AZMemberOf", group.upper()),
        (group.upper(), "AZOwns", app.upper()),
    }
    assert ask(env, user, app, relationship_kinds="nin:AZOwns").status_code == 404
