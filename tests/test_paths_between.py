"""Paths between sets (GET /api/v2/graphs/paths-between, `graphsvc path --from-tag`) and a
tag's exposure (GET /api/v2/asset-group-tags/{id}/exposure): checked against searches
written here over the edges worked out from the raw files of a real collection, on both
stores."""

from __future__ import annotations

import json
from collections import defaultdict, deque
from itertools import pairwise
from typing import Any
from urllib.parse import urlencode

from tests.conftest import Env, ingest
from tests.test_sharphound import SAMPLES, Expected, analysed_edges, raw_documents
from tests.test_shortest_path import traversable
from tests.test_tags import mark
from tests.test_tier_zero import expected_tier_zero
from tests.test_tokens import send

SAMPLE = SAMPLES["sample zip (3 domains, 3 collections)"]
BETWEEN = "/api/v2/graphs/paths-between"
Edge = tuple[str, str, str]


def distances(edges: list[Edge], sources: set[str], backward: bool) -> dict[str, int]:
    """Breadth-first from the sources, forward (or back against the edges)."""
    step: dict[str, list[str]] = defaultdict(list)
    for start, _, end in edges:
        if backward:
            step[end].append(start)
        else:
            step[start].append(end)
    distance = dict.fromkeys(sources, 0)
    queue = deque(sources)
    while queue:
        node = queue.popleft()
        for far in step[node]:
            if far not in distance:
                distance[far] = distance[node] + 1
                queue.append(far)
    return distance


def expected_paths(edges: list[Edge], start: str, targets: set[str]) -> tuple[int, set[Edge], int]:
    """A start's shortest paths to its nearest targets: their length, their edges (a step
    one level further from the start and one nearer a target), and how many there are."""
    ahead = distances(edges, {start}, backward=False)
    reached = [ahead[t] for t in targets if t in ahead]
    if start in targets or not reached:
        return 0, set(), 0
    length = min(reached)
    behind = distances(edges, targets, backward=True)
    on = {
        (s, k, e)
        for s, k, e in edges
        if s in ahead
        and e in behind
        and ahead[s] + 1 == ahead[e]
        and ahead[e] + behind[e] == length
    }
    ways = {start: 1}
    for depth in range(1, length + 1):
        for s, _, e in sorted(on):
            if ahead[e] == depth:
                ways[e] = ways.get(e, 0) + ways.get(s, 0)
    return length, on, sum(ways.get(t, 0) for t in targets if ahead.get(t) == length)


def answered_paths(body: dict[str, Any]) -> list[list[Edge]]:
    ids = {key: node["objectId"] for key, node in body["data"]["nodes"].items()}
    edges = [(ids[e["source"]], e["kind"], ids[e["target"]]) for e in body["data"]["edges"]]
    return [[edges[at] for at in path] for path in body["data"]["paths"]]


def test_paths_from_owned_objects_to_tier_zero_match_a_search(env: Env) -> None:
    ingest(env, SAMPLE)
    expected = Expected(raw_documents(SAMPLE), analysed_edges(env))
    edges = traversable(expected)
    tier_zero = set().union(*expected_tier_zero(SAMPLE).values())
    users = sorted(o for o, (label, _) in expected.nodes.items() if label == "User")
    owned = users[:: max(1, len(users) // 40)]  # some forty users, tier zero among them
    assert any(u in tier_zero for u in owned)
    change = [{"selector_name": u, "sid": u, "action": "add"} for u in owned]
    assert send(env, "PUT", "/api/v2/asset-groups/2/selectors", change).status_code == 201
    query = {"start_tag": "owned", "end_tag": "tier-zero", "limit": 10_000}
    body = env.get(f"{BETWEEN}?{urlencode(query)}").json()
    assert body["data"]["truncated"] is False
    paths = answered_paths(body)
    by_start: dict[str, list[list[Edge]]] = defaultdict(list)
    for path in paths:
        assert all(a[2] == b[0] for a, b in pairwise(path)), path
        assert path[-1][2] in tier_zero and path[0][0] in owned
        by_start[path[0][0]].append(path)
    reaching = 0
    for start in owned:
        length, on, count = expected_paths(edges, start, tier_zero)
        found = by_start.get(start, [])
        assert {e for p in found for e in p} == on, start
        assert len(found) == count and len({tuple(p) for p in found}) == count, start
        assert all(len(p) == length for p in found), start
        reaching += bool(count)
    assert body["data"]["reaching"] == reaching > 3
    starts = [p[0][0] for p in paths]
    lengths = [len(by_start[s][0]) for s in starts]
    assert lengths == sorted(lengths), "the nearest starts first"
    # Cut at one path: the nearest start's first.
    one = env.get(f"{BETWEEN}?{urlencode({**query, 'limit': 1})}").json()["data"]
    assert one["truncated"] is True and len(one["paths"]) == 1
    assert answered_paths({"data": one})[0] == paths[0]


def test_paths_from_listed_objects_and_refusals(env: Env) -> None:
    ingest(env, SAMPLES["v6 folder"])
    dfm, admins = (
        "S-1-5-21-3130019616-2776909439-2417379446-1105",
        "S-1-5-21-3130019616-2776909439-2417379446-512",
    )
    body = env.get(f"{BETWEEN}?{urlencode({'start_nodes': dfm, 'end_nodes': admins})}").json()
    single = env.get(
        "/api/v2/graphs/shortest-path?" + urlencode({"start_node": dfm, "end_node": admins})
    ).json()
    assert {(e["source"], e["kind"], e["target"]) for e in body["data"]["edges"]} == {
        (e["source"], e["kind"], e["target"]) for e in single["data"]["edges"]
    }
    assert len(body["data"]["paths"]) == 2
    for query, status, context in (
        ({"end_tag": "tier-zero"}, 400, "start_tag"),
        ({"start_tag": "owned", "start_nodes": dfm, "end_tag": "tier-zero"}, 400, "start_tag"),
        ({"start_tag": "pwned", "end_tag": "tier-zero"}, 404, "start_tag"),
        ({"start_nodes": "S-1-2-3", "end_tag": "tier-zero"}, 404, "start_nodes"),
        ({"start_nodes": dfm, "end_tag": "1", "relationship_kinds": "in:Bogus"}, 400,
         "relationship_kinds"),
    ):  # fmt: skip
        answer = env.get(f"{BETWEEN}?{urlencode(query)}")
        assert answer.status_code == status, (query, answer.text)
        assert answer.json()["errors"][0]["context"] == context
    nothing = env.get(f"{BETWEEN}?{urlencode({'start_tag': 'owned', 'end_tag': 'tier-zero'})}")
    assert nothing.json()["data"] == {
        "nodes": {}, "edges": [], "paths": [], "reaching": 0, "truncated": False
    }  # fmt: skip


def test_the_path_command_from_a_tag_to_a_tag(env: Env) -> None:
    assert env.cli("ingest", str(SAMPLES["v6 folder"])).exit_code == 0
    dfm = "S-1-5-21-3130019616-2776909439-2417379446-1105"
    mark(env, 2, dfm)
    query = {"start_tag": "owned", "end_tag": "tier-zero"}
    answer = env.get(f"{BETWEEN}?{urlencode(query)}").json()
    count = len(answer["data"]["paths"])
    printed = env.cli("path", "--from-tag", "owned", "--to-tag", "tier-zero")
    assert printed.exit_code == 0, printed.output
    lines = printed.output.splitlines()
    assert lines[0] == f"{count} shortest path(s) from 1 start(s):" and count > 1
    assert len(lines) == 1 + count
    for number, path in enumerate(answered_paths(answer), 1):
        names = {n["objectId"]: n["label"] for n in answer["data"]["nodes"].values()}
        steps = "".join(f" -{kind}-> {names[end]}" for _, kind, end in path)
        assert lines[number] == f"  {number}. DFM@TESTLAB.LOCAL{steps}"
    as_json = env.cli("path", "--from-tag", "owned", "--to-tag", "tier-zero", "--json")
    assert json.loads(as_json.stdout) == answer
    named = env.cli("path", "dfm@testlab.local", "--to-tag", "Tier Zero")
    assert named.output == printed.output
    refused = env.cli("path", "--to-tag", "tier-zero")
    assert refused.exit_code != 0 and "give START or --from-tag" in refused.output


def test_exposure_of_a_label_matches_a_search_back_from_its_members(env: Env) -> None:
    ingest(env, SAMPLE)
    expected = Expected(raw_documents(SAMPLE), analysed_edges(env))
    computers = sorted(o for o, (label, _) in expected.nodes.items() if label == "Computer")
    label = send(env, "POST", "/api/v2/asset-group-tags", {"name": "Servers"}).json()["data"]
    seeds = [{"type": 1, "value": c} for c in computers[:3]]
    made = send(env, "POST", f"/api/v2/asset-group-tags/{label['id']}/selectors",
                {"name": "three", "seeds": seeds})  # fmt: skip
    assert made.status_code == 201, made.text
    distance = distances(traversable(expected), set(computers[:3]), backward=True)
    principals = {
        o for o, (kind, _) in expected.nodes.items() if kind in ("User", "Computer", "Group")
    }
    exposed = {o: d for o, d in distance.items() if d > 0 and o in principals}
    body = env.get(f"/api/v2/asset-group-tags/{label['id']}/exposure?limit=1000").json()
    assert body["count"] == len(exposed) > 0
    assert {e["objectID"]: e["length"] for e in body["data"]} == exposed
    tier_zero = set().union(*expected_tier_zero(SAMPLE).values())
    marked = {e["objectID"] for e in body["data"] if "Tag_Tier_Zero" in e["kinds"]}
    assert marked == set(exposed) & tier_zero and marked, "the exposed show their tags"
    assert {e["objectID"] for e in body["data"] if e["isTierZero"]} == marked
    assert {e["objectID"] for e in body["data"] if "admin_tier_0" in e["system_tags"]} == marked
    assert not any(e["isOwnedObject"] for e in body["data"])
    text = env.cli("exposure", "--tag", "servers", "--limit", "2")
    assert text.exit_code == 0 and "have a path to the members of servers" in text.output
