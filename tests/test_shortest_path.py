"""GET /api/v2/graphs/shortest-path: every answer checked against a plain breadth-first search
written here, over the edges worked out from the raw files of both real collections and over
generated graphs (property-based), on both stores; the filters, the errors and a new
ingest seen by the next request; the statements a request runs on an index built for the
store's data version."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphsvc import wire
from graphsvc.cli.data import describe_paths
from graphsvc.graph import path_index
from graphsvc.graph.paths import TRAVERSABLE_KINDS
from graphsvc.store import db, dialect, postgres, sqlite
from graphsvc.store.db import Connection
from tests.conftest import Env, ingest
from tests.test_ad_domain_stats import raw_records
from tests.test_sharphound import SAMPLES, TESTLAB, Expected, analysed_edges, raw_documents
from tests.test_tier_zero import expected_tier_zero

Edge = tuple[str, str, str]  # start, kind, end (object ids)
# Print Operators: a group that holds nothing, so no search starting there goes anywhere.
ISOLATED = "TESTLAB.LOCAL-S-1-5-32-550"
ADMINS = f"{TESTLAB}-512"
FOOTHOLD = f"{TESTLAB}-1105"  # DFM, three steps from Domain Admins
ADMINISTRATOR = f"{TESTLAB}-500"  # a member of Domain Admins


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
    expected = Expected(raw_documents(path), analysed_edges(env))
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
    assert set(admins["kinds"]) == {"Group", "Base", "Tag_Tier_Zero"}  # its tag's label too
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
        ({"start_node": ISOLATED, "end_node": f"{TESTLAB}-512"}, 404, "end_node", "no path"),
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


def test_path_command_prints_the_paths_and_the_api_answer(env: Env) -> None:
    """`graphsvc path` on the same store as the test app: each shortest path on a line of
    its own, from object ids or names; --json is the route's answer."""
    assert env.cli("ingest", str(SAMPLES["v6 folder"])).exit_code == 0
    start = f"{TESTLAB}-1105"
    expected = [
        "2 shortest path(s) of 3 step(s) from DFM@TESTLAB.LOCAL to DOMAIN ADMINS@TESTLAB.LOCAL:",
        "  1. DFM@TESTLAB.LOCAL -AdminTo-> WIN10.TESTLAB.LOCAL -HasSession-> "
        "ADMINISTRATOR@TESTLAB.LOCAL -MemberOf-> DOMAIN ADMINS@TESTLAB.LOCAL",
        "  2. DFM@TESTLAB.LOCAL -CanPSRemote-> WIN10.TESTLAB.LOCAL -HasSession-> "
        "ADMINISTRATOR@TESTLAB.LOCAL -MemberOf-> DOMAIN ADMINS@TESTLAB.LOCAL",
    ]
    text = env.cli("path", start, ADMINS)
    assert text.exit_code == 0, text.output
    assert text.output.splitlines() == expected
    by_name = env.cli("path", "dfm@testlab.local", "Domain Admins@TESTLAB.LOCAL")
    assert by_name.exit_code == 0, by_name.output
    assert by_name.output.splitlines() == expected
    answered = json.loads(env.cli("path", start, ADMINS, "--json").stdout)
    assert answered_edges(answered) == answered_edges(ask(env, start, ADMINS).json())
    missing = env.cli("path", ISOLATED, ADMINS)
    assert missing.exit_code == 1 and "end_node: no path from" in missing.output
    by_id, named = env.cli("exposure", TESTLAB), env.cli("exposure", "testlab.local")
    assert named.exit_code == 0 and named.output == by_id.output, named.output
    unknown = env.cli("path", "NOBODY@TESTLAB.LOCAL", ADMINS)
    assert unknown.exit_code == 1
    assert "START: no node has the object id or the name 'NOBODY@TESTLAB.LOCAL'" in unknown.output


def test_a_name_several_nodes_have_is_refused_with_them(env: Env) -> None:
    assert env.cli("ingest", str(SAMPLES["v6 folder"])).exit_code == 0

    async def rename(conn: Connection) -> None:
        await conn.execute(
            "UPDATE nodes SET name = 'TWIN' WHERE object_id IN ($1, $2)", ISOLATED, ADMINS
        )

    env.run_in_transaction(rename)
    refused = env.cli("path", f"{TESTLAB}-1105", "twin")
    assert refused.exit_code == 1
    lines = refused.output.splitlines()
    assert "END: several nodes are named 'twin'; give one's object id:" in lines[0]
    assert sorted(line.split()[0] for line in lines[1:]) == sorted([ISOLATED, ADMINS])


def test_the_path_command_prints_a_hundred_paths_and_counts_the_rest() -> None:
    """Start -> 12 groups -> 12 groups -> end: 144 shortest paths of 3 steps."""
    when = datetime.now(UTC)
    names = ["START", *(f"A{i:02d}" for i in range(12)), *(f"B{i:02d}" for i in range(12)), "END"]
    nodes = {n: wire.PathNode(n, "Group", ["Group"], n, False, False, when, "") for n in names}
    a_side, b_side = names[1:13], names[13:25]
    edges = [
        *(("START", a) for a in a_side),
        *((a, b) for a in a_side for b in b_side),
        *((b, "END") for b in b_side),
    ]
    graph = wire.PathGraph(
        nodes, [wire.PathEdge(a, b, "MemberOf", "MemberOf", when) for a, b in edges]
    )
    lines = describe_paths(graph, "START", "END").splitlines()
    assert lines[0] == "144 shortest path(s) of 3 step(s) from START to END:"
    assert lines[1] == "  1. START -MemberOf-> A00 -MemberOf-> B00 -MemberOf-> END"
    assert lines[100] == "  100. START -MemberOf-> A08 -MemberOf-> B03 -MemberOf-> END"
    assert lines[101:] == ["  ... 44 more: --json gives them all"]


# --- exposure: who reaches a domain's tier zero -------------------------------------------


def expected_exposure(
    env: Env, path: Path, domain: str
) -> tuple[dict[str, int], set[str], dict[str, int]]:
    """From the raw files: each principal's distance to the domain's tier zero (over the
    traversable kinds; principals in tier zero left out), the domain's enabled users, and
    every node's distance."""
    expected = Expected(raw_documents(path), analysed_edges(env))
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
    expected = Expected(raw_documents(path), analysed_edges(env))
    edges = set(traversable(expected))
    domains = sorted(d for d in expected.domains if expected.nodes.get(d, ("",))[0] == "Domain")
    seen = 0
    for domain in domains:
        exposed, enabled, distance = expected_exposure(env, path, domain)
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
    release = threading.Event()
    build = path_index.build_index

    async def held_build(conn: Any, version: Any) -> Any:
        builds.append(version)
        await asyncio.to_thread(release.wait, 60)
        return await build(conn, version)

    monkeypatch.setattr(path_index, "build_index", held_build)
    uri = "/api/v2/graphs/shortest-path?" + urlencode({"start_node": FOOTHOLD, "end_node": ADMINS})
    cut = env.get(uri, headers={"Prefer": "wait=1"})
    assert cut.status_code == 500
    assert cut.json()["errors"][0]["message"] == "request timed out after 1 seconds"
    release.set()
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


# --- the statements of a request on an index built for the store's data version -----------


@dataclass(frozen=True)
class Statement:
    issuer: str  # the function that ran it (a store function: read_path_nodes)
    for_paths: bool  # run by the shortest-path operation or its index (graphsvc.graph)


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[Statement]:
    """Every statement run on a pooled connection of either store from here on (SQLite's
    fetchrow, fetchval and execute run through its fetch)."""
    seen: list[Statement] = []
    store_modules = {m.__name__ for m in (db, dialect, sqlite, postgres)}

    def recording(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def recorded(conn: Any, sql: str, *args: Any) -> Any:
            caller = sys._getframe(1)
            # A read in chunks is its reader's (paging.chunks_by_id runs its statements).
            while (
                caller.f_globals["__name__"] in store_modules
                or caller.f_code.co_qualname == "chunks_by_id"
            ):
                assert caller.f_back is not None
                caller = caller.f_back
            modules = set()
            frame: Any = caller
            while frame is not None:
                modules.add(frame.f_globals.get("__name__", ""))
                frame = frame.f_back
            for_paths = any(m.startswith("graphsvc.graph.") for m in modules)
            seen.append(Statement(caller.f_code.co_qualname, for_paths))
            return await original(conn, sql, *args)

        return recorded

    for connection, names in (
        (sqlite.SQLiteConnection, ("fetch",)),
        (postgres.PostgresConnection, ("fetch", "fetchrow", "fetchval", "execute")),
    ):
        for name in names:
            monkeypatch.setattr(connection, name, recording(getattr(connection, name)))
    return seen


def run_for_paths(statements: list[Statement]) -> list[str]:
    """The issuers of the statements run for the shortest-path operation since the last
    call (authentication's are not counted: a token lookup is not the operation's)."""
    issuers = [s.issuer for s in statements if s.for_paths]
    statements.clear()
    return issuers


def test_a_warm_path_miss_reads_only_the_nodes_and_edges_it_found(
    env: Env, statements: list[Statement]
) -> None:
    """On an index built for the store's data version, a request whose answer is not kept
    runs two statements: the nodes and the edges of the paths found. Not the graph's
    version, the kinds nor the ends' ids: the index holds them (the ids hashed). A write
    that changes no graph moves the data version: the graph's version is read once, and
    the index kept, not built again."""
    ingest(env, SAMPLES["v6 folder"])
    assert ask(env, FOOTHOLD, ADMINS).status_code == 200  # the index built
    assert "read_edge_chunks" in run_for_paths(statements)

    found = ask(env, ADMINISTRATOR, ADMINS)  # another request: its answer is not kept
    assert found.status_code == 200, found.text
    assert answered_edges(found.json()) == {(ADMINISTRATOR, "MemberOf", ADMINS)}
    assert run_for_paths(statements) == ["read_path_nodes", "read_edge_times"]
    # No path: which nodes the ids name, from the store (the index holds only their hashes).
    assert ask(env, ISOLATED, ADMINS).status_code == 404
    assert run_for_paths(statements) == ["node_ids"]
    # An id no node has: its hash is not in the index.
    assert ask(env, f"{TESTLAB}-9999", ADMINS).status_code == 404
    assert ask(env, FOOTHOLD, ADMINS, relationship_kinds="in:NoSuchKind").status_code == 400
    assert run_for_paths(statements) == []

    env.user_with_token("reader", "Read-Only")  # moves the data version, not the graph
    assert ask(env, f"{TESTLAB}-1104", ADMINS).status_code == 200
    assert run_for_paths(statements) == ["read_graph_version", "read_path_nodes", "read_edge_times"]
    assert ask(env, ADMINISTRATOR, ADMINS, relationship_kinds="in:MemberOf").status_code == 200
    assert run_for_paths(statements) == ["read_path_nodes", "read_edge_times"]


def test_kinds_are_checked_against_the_index(env: Env, tmp_path: Path) -> None:
    """A kind the graph does not know is refused as before, with the graph's kinds named; a
    kind a schema extension then registers (without an ingest run) is known to the next
    request."""
    ingest(env, SAMPLES["v6 folder"])

    async def kinds(conn: Connection) -> list[str]:
        return sorted(r[0] for r in await conn.fetch("SELECT name FROM kinds"))

    known = env.run_in_transaction(kinds)
    refused = ask(env, ADMINISTRATOR, ADMINS, relationship_kinds="in:MemberOf,Tinkers")
    assert refused.status_code == 400, refused.text
    assert refused.json()["errors"][0] == {
        "context": "relationship_kinds",
        "message": f"unknown relationship kind 'Tinkers'; kinds in this graph: {', '.join(known)}",
    }
    definition = tmp_path / "extension.json"
    definition.write_text(json.dumps({
        "name": "workshop", "display_name": "Workshop", "version": "1",
        "node_kinds": ["Widget"], "relationship_kinds": ["Tinkers"],
        "environment_kinds": [{"kind": "Widget"}],
    }))  # fmt: skip
    registered = env.cli("schema", "register", str(definition))
    assert registered.exit_code == 0, registered.output
    followed = ask(env, ADMINISTRATOR, ADMINS, relationship_kinds="in:MemberOf,Tinkers")
    assert followed.status_code == 200, followed.text
    assert answered_edges(followed.json()) == {(ADMINISTRATOR, "MemberOf", ADMINS)}


def test_object_ids_that_share_a_hash_are_told_apart(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index finds a request's ends by the hashes of their object ids; two ids can share
    one. With a hash that every id of a length shares, every answer is still the plain
    search's, and an id no node has is still no node."""
    monkeypatch.setattr(path_index, "object_id_digest", lambda o: len(o).to_bytes(8, "little"))
    ingest(env, SAMPLES["v6 folder"])
    expected = Expected(raw_documents(SAMPLES["v6 folder"]))
    edges = traversable(expected)
    starts = sorted(o for o, (label, _) in expected.nodes.items() if label in ("User", "Computer"))
    for start in starts:
        want = shortest_path_edges(edges, start, ADMINS)
        response = ask(env, start, ADMINS)
        if want:
            assert answered_edges(response.json()) == want, start
        else:
            assert response.status_code == 404, (start, response.text)
            assert response.json()["errors"][0]["message"].startswith("no path"), start
    unknown = ask(env, f"{TESTLAB}-9999", ADMINS)  # as long as DFM's id
    assert unknown.json()["errors"][0] == {
        "context": "start_node",
        "message": f"no node with object id '{TESTLAB}-9999'",
    }
