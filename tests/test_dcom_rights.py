"""GET /api/v2/computers/{object_id}/dcom-rights (spec 4.5)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.bulk import bulk_insert_graph
from bench.shapes import ScaleGraph
from graphsvc.demo.dataset import DOMAIN, sid
from tests.conftest import Env, ingest

FILE01, APP01, WS03, DC01 = sid(1300), sid(1301), sid(1304), sid(1000)
URL = "/api/v2/computers/{}/dcom-rights"
Node = tuple[str, list[str]]  # id, kinds
Edge = tuple[str, str, str]  # kind, start id, end id


def names(response_json: dict[str, Any]) -> list[str]:
    return [entry["name"] for entry in response_json["data"]]


def test_direct_and_nested_holders_each_once(demo_env: tuple[Env, object]) -> None:
    env, _ = demo_env
    response = env.get(URL.format(FILE01) + "?limit=100")
    assert response.status_code == 200
    body = response.json()
    # DCOM OPERATORS holds the right; IT OPERATIONS > HELPDESK > TIER1 SUPPORT nest inside it.
    expected = [
        *sorted(
            f"{n}@{DOMAIN}"
            for n in (
                "DCOM OPERATORS",
                "IT OPERATIONS",
                "HELPDESK",
                "TIER1 SUPPORT",
                "ALICE",
                "BOB",
                "CAROL",
                "DAVE",
                "SVC_BACKUP",
            )
        ),
        f"WS01.{DOMAIN}",
    ]
    assert names(body) == sorted(expected)
    assert body["count"] == 10 and body["skip"] == 0 and body["limit"] == 100
    alice = next(e for e in body["data"] if e["name"] == f"ALICE@{DOMAIN}")
    assert alice == {
        "objectID": sid(1104),
        "name": f"ALICE@{DOMAIN}",
        "label": "User",
        "kinds": ["User", "Base"],
    }
    computer = next(e for e in body["data"] if e["label"] == "Computer")
    assert computer["objectID"] == sid(1302)


def test_default_page_is_ten_sorted_by_name(demo_env: tuple[Env, object]) -> None:
    env, _ = demo_env
    body = env.get(URL.format(FILE01)).json()
    assert body["limit"] == 10 and body["skip"] == 0 and len(body["data"]) == 10
    assert names(body) == sorted(names(body))


def test_object_id_is_case_insensitive(demo_env: tuple[Env, object]) -> None:
    env, _ = demo_env
    response = env.get(URL.format(APP01.lower()))
    assert response.status_code == 200
    assert names(response.json()) == [
        f"ERIN@{DOMAIN}",
        f"SERVER ADMINS@{DOMAIN}",
        f"SVC_SCCM@{DOMAIN}",
    ]


def test_computer_without_holders_is_an_empty_list(demo_env: tuple[Env, object]) -> None:
    env, _ = demo_env
    body = env.get(URL.format(WS03)).json()
    assert body == {"count": 0, "skip": 0, "limit": 10, "data": []}


def test_paging_and_count(demo_env: tuple[Env, object]) -> None:
    env, _ = demo_env
    everything = names(env.get(URL.format(FILE01) + "?limit=100").json())
    page = env.get(URL.format(FILE01) + "?skip=3&limit=4").json()
    assert page["count"] == 10 and names(page) == everything[3:7]
    past_end = env.get(URL.format(FILE01) + "?skip=50").json()
    assert past_end["count"] == 10 and past_end["data"] == []
    none = env.get(URL.format(FILE01) + "?limit=0").json()
    assert none["count"] == 10 and none["data"] == []


def test_sort_by_label_then_descending_name(demo_env: tuple[Env, object]) -> None:
    env, _ = demo_env
    data = env.get(URL.format(FILE01) + "?limit=100&sort_by=label&sort_by=-name").json()["data"]
    keys = [(e["label"], e["name"]) for e in data]
    expected = sorted(keys, key=lambda k: k[1], reverse=True)
    expected.sort(key=lambda k: k[0])
    assert keys == expected
    by_id = env.get(URL.format(FILE01) + "?limit=100&sort_by=-objectid").json()["data"]
    assert [e["objectID"] for e in by_id] == sorted((e["objectID"] for e in by_id), reverse=True)


def test_unknown_computer_is_404(demo_env: tuple[Env, object]) -> None:
    env, _ = demo_env
    response = env.get(URL.format("S-1-5-21-1-2-3-4242"))
    assert response.status_code == 404
    error = response.json()["errors"][0]
    assert error["context"] == "object_id"
    assert error["message"] == (
        "no computer with object id 'S-1-5-21-1-2-3-4242'; object ids are SIDs "
        "(S-1-5-21-...): find one by name with GET /api/v2/search?q=NAME&type=Computer "
        "or `graphsvc find NAME --kind Computer`"
    )


def test_a_user_is_not_a_computer(demo_env: tuple[Env, object]) -> None:
    env, _ = demo_env
    assert env.get(URL.format(sid(1104))).status_code == 404


def test_type_graph_and_other_types_are_400(demo_env: tuple[Env, object]) -> None:
    env, _ = demo_env
    graph = env.get(URL.format(FILE01) + "?type=graph")
    assert graph.status_code == 400 and "only type=list" in graph.json()["errors"][0]["message"]
    assert env.get(URL.format(FILE01) + "?type=tree").status_code == 400
    assert env.get(URL.format(FILE01) + "?type=list").status_code == 200


def test_bad_paging_and_sorting_are_400_naming_the_parameter(demo_env: tuple[Env, object]) -> None:
    env, _ = demo_env
    for query, context in [
        ("skip=-1", "skip"),
        ("limit=1.5", "limit"),
        ("limit=abc", "limit"),
        ("skip=99999999999", "skip"),
        ("limit=10001", "limit"),
        ("skip=1&skip=2", "skip"),
        ("sort_by=created_at", "sort_by"),
        ("sort_by=", "sort_by"),
        ("sort_by=-", "sort_by"),
    ]:
        response = env.get(URL.format(FILE01) + "?" + query)
        assert response.status_code == 400, query
        assert response.json()["errors"][0]["context"] == context, query
    too_many = env.get(URL.format(FILE01) + "?limit=10001").json()["errors"][0]["message"]
    assert "10000" in too_many


def ingest_opengraph(env: Env, folder: Path, nodes: list[Node], edges: list[Edge]) -> None:
    """Ingest an OpenGraph file of these nodes (id, kinds) and edges (kind, start, end); a
    node is named by its id."""
    path = folder / "graph.json"
    path.write_text(
        json.dumps(
            {
                "graph": {
                    "nodes": [
                        {"id": node_id, "kinds": kinds, "properties": {"name": node_id}}
                        for node_id, kinds in nodes
                    ],
                    "edges": [
                        {"kind": kind, "start": {"value": start}, "end": {"value": end}}
                        for kind, start, end in edges
                    ],
                }
            }
        )
    )
    ingest(env, path)


def test_group_cycles_terminate(env: Env, tmp_path: Path) -> None:
    """Two groups that are members of each other: each holder still appears once."""
    ingest_opengraph(
        env,
        tmp_path,
        [("C1", ["Computer"]), ("G1", ["Group"]), ("G2", ["Group"]), ("U1", ["User"])],
        [
            ("ExecuteDCOM", "G1", "C1"),
            ("MemberOf", "G2", "G1"),
            ("MemberOf", "G1", "G2"),
            ("MemberOf", "U1", "G2"),
        ],
    )
    body = env.get(URL.format("c1")).json()
    assert body["count"] == 3 and names(body) == ["G1", "G2", "U1"]


def test_a_node_whose_kinds_include_computer_is_a_computer_to_both_routes(
    env: Env, tmp_path: Path
) -> None:
    """A node labelled Server (its first kind) that is also a Computer: dcom-rights lists its
    holders, as dcom-users does, and the computer's own route counts them."""
    ingest_opengraph(
        env,
        tmp_path,
        [("SRV1", ["Server", "Computer"]), ("G1", ["Group"]), ("U1", ["User"]), ("U2", ["User"])],
        [("ExecuteDCOM", "G1", "SRV1"), ("ExecuteDCOM", "U2", "SRV1"), ("MemberOf", "U1", "G1")],
    )
    rights = env.get(URL.format("srv1") + "?limit=100")
    assert rights.status_code == 200, rights.text
    users = env.get("/api/v2/computers/srv1/dcom-users?limit=100")
    assert users.status_code == 200, users.text
    # dcom-users says how each holds it; dcom-rights keeps the spec's four fields.
    listed = users.json()
    holds = {row["objectID"]: row.pop("holds") for row in listed["data"]}
    assert rights.json() == listed
    assert holds == {
        "G1": [{"kind": "ExecuteDCOM", "through": None}],
        "U1": [{"kind": "ExecuteDCOM", "through": rights.json()["data"][0]}],
        "U2": [{"kind": "ExecuteDCOM", "through": None}],
    }
    assert names(rights.json()) == ["G1", "U1", "U2"]
    assert rights.json()["data"][0]["label"] == "Group"
    entity = env.get("/api/v2/computers/srv1").json()["data"]
    assert entity["dcomUsers"] == 3 and entity["props"]["name"] == "SRV1"
    assert env.get(URL.format("u1")).status_code == 404, "a user is still no computer"


def test_both_routes_list_the_same_holders_through_nested_groups_and_a_cycle(
    env: Env, tmp_path: Path
) -> None:
    """G1 holds the right on both computers; G2 and G1 are members of each other, G3 is in
    G2, and the Server-and-Computer node is itself in G3 (a member of a holder is listed,
    the computer included)."""
    ingest_opengraph(
        env,
        tmp_path,
        [
            ("C1", ["Computer"]),
            ("SRV1", ["Server", "Computer"]),
            *((group, ["Group"]) for group in ("G1", "G2", "G3")),
            *((user, ["User"]) for user in ("U1", "U2", "U3")),
        ],
        [
            ("ExecuteDCOM", "G1", "C1"),
            ("ExecuteDCOM", "G1", "SRV1"),
            ("ExecuteDCOM", "U3", "SRV1"),
            ("MemberOf", "G1", "G2"),
            ("MemberOf", "G2", "G1"),
            ("MemberOf", "G3", "G2"),
            ("MemberOf", "U1", "G3"),
            ("MemberOf", "U2", "G1"),
            ("MemberOf", "SRV1", "G3"),
        ],
    )
    through_g1 = {"G1", "G2", "G3", "U1", "U2", "SRV1"}
    for computer, expected in (("C1", through_g1), ("SRV1", through_g1 | {"U3"})):
        for path in (URL.format(computer), f"/api/v2/computers/{computer}/dcom-users"):
            body = env.get(path + "?limit=100").json()
            assert set(names(body)) == expected, path
            assert body["count"] == len(body["data"]) == len(expected), path


def load_scale_graph(env: Env, graph: ScaleGraph) -> tuple[int, int]:
    now = datetime.now(UTC)
    return env.run_in_transaction(
        lambda conn: bulk_insert_graph(conn, graph.node_rows(), graph.edge_rows(), graph.sid, now)
    )


def test_a_bulk_loaded_scale_graph_answers_its_known_holders(env: Env) -> None:
    graph = ScaleGraph(2000, wide_members=120)
    nodes, edges = load_scale_graph(env, graph)
    assert nodes == 2000
    assert 9 <= edges / nodes <= 11, "about ten edges per node"
    for computer in (0, 1, 2, 20, 40):
        object_id = graph.object_id(graph.computer_id(computer))
        body = env.get(URL.format(object_id) + "?limit=10000").json()
        expected = graph.dcom_holders(computer)
        assert {entry["objectID"] for entry in body["data"]} == expected, computer
        assert body["count"] == len(expected)
    assert len(graph.dcom_holders(0)) > 20, "a nested tree of groups and their users"
    assert graph.dcom_holders(1) == set()
    assert len(graph.dcom_holders(2)) == 121, "the wide group and its members"
    if env.url.startswith("postgresql"):
        # Planning the recursive walk on stale row estimates took seconds at a million nodes.
        analyzed = env.run_in_transaction(
            lambda conn: conn.fetchval(
                "SELECT count(*) FROM pg_stat_user_tables WHERE last_analyze IS NOT NULL "
                "AND relname IN ('nodes', 'edges', 'node_kinds')"
            )
        )
        assert analyzed == 3


def test_bulk_loading_twice_keeps_ids_apart(env: Env) -> None:
    first, second = ScaleGraph(300), ScaleGraph(300, sid="S-1-5-21-901-901-901")
    load_scale_graph(env, first)
    load_scale_graph(env, second)
    for graph in (first, second):
        object_id = graph.object_id(graph.computer_id(0))
        body = env.get(URL.format(object_id) + "?limit=10000").json()
        assert {entry["objectID"] for entry in body["data"]} == graph.dcom_holders(0)
