"""Cypher queries on real collections, each answer checked against FalkorDB's on the same graph
(tests/cypher_oracle.py), on both stores; the route's answer, its refusals and its caps; the
`graphsvc query` command."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from graphsvc.cypher import columnar, runtime, service
from graphsvc.cypher.execute import execute
from graphsvc.cypher.graph import NodeTables, QueryGraph
from graphsvc.cypher.parse import parse
from graphsvc.cypher.runtime import Caps
from graphsvc.cypher.values import Node, Rel
from graphsvc.cypher.values import Path as CypherPath
from graphsvc.errors import ApiError
from graphsvc.graph.paths import PathIndex
from graphsvc.ingest.run import ingest_files
from graphsvc.store.db import Connection, run_in_transaction
from tests.conftest import Env, Templates, ingest
from tests.cypher_oracle import LoadedGraph, Oracle, plain, read_store_rows

FIXTURES = Path(__file__).parent / "fixtures"
V6 = FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "ingest"
SAMPLE_ZIP = FIXTURES / "bloodhound-docs" / "ad_sampledata.zip"
CYPHER = "/api/v2/graphs/cypher"
DOMAIN_ADMINS = "S-1-5-21-3130019616-2776909439-2417379446-512"


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    started = Oracle()
    yield started
    started.close()


class Both:
    """One store's graph, asked of graphsvc and of FalkorDB."""

    def __init__(self, url: str, oracle: Oracle) -> None:
        self.url = url
        self.engine = service.CypherEngine(PathIndex(), NodeTables(), Caps(100_000, 10_000, 2**30))
        rows = asyncio.run(run_in_transaction(url, read_store_rows))
        self.object_ids = {node: properties["objectid"] for node, _, properties in rows.nodes}
        self.falkor = LoadedGraph(oracle, rows)

    def ours(self, query: str, parameters: dict[str, Any] | None = None) -> list[list[Any]]:
        async def work(conn: Connection) -> tuple[QueryGraph, Any]:
            return await service.run_query(conn, self.engine, query, parameters or {})

        graph, result = asyncio.run(run_in_transaction(self.url, work))
        return [[normal(v, graph, self.object_ids) for v in row] for row in result.rows]

    def agree(self, query: str, ordered: bool = False) -> list[list[Any]]:
        mine, theirs = self.ours(query), self.falkor.rows(query)
        if not ordered:
            mine, theirs = sorted(mine, key=repr), sorted(theirs, key=repr)
        assert mine == theirs, (query, mine[:5], theirs[:5], len(mine), len(theirs))
        return mine


def normal(value: Any, graph: QueryGraph, object_id: dict[int, str]) -> Any:
    """A value as FalkorDB's are compared: a node by its object id, a relationship by its
    ends' and its kind, a path by its nodes' and kinds, numbers as floats."""
    if isinstance(value, Node):
        return ("node", object_id[value.id])
    if isinstance(value, Rel):
        return ("rel", object_id[value.start], graph.kind_names[value.kind], object_id[value.end])
    if isinstance(value, CypherPath):
        kinds = tuple(graph.kind_names[r.kind] for r in value.rels)
        return ("path", tuple(object_id[n] for n in value.nodes), kinds)
    return plain(value, lambda v: normal(v, graph, object_id))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def v6(
    request: pytest.FixtureRequest,
    templates: Templates,
    tmp_path_factory: pytest.TempPathFactory,
    oracle: Oracle,
) -> Iterator[Both]:
    """The v6 collection in a store of each kind, made once for the module's queries (they
    only read it)."""
    if request.param == "sqlite":
        url = templates.sqlite_copy(tmp_path_factory.mktemp("cypher") / "v6.sqlite3")
    else:
        url = templates.postgres_copy()
    files = sorted(V6.glob("*.json"))
    asyncio.run(run_in_transaction(url, lambda conn: ingest_files(conn, files)))
    yield Both(url, oracle)
    if request.param == "postgresql":
        templates.drop_postgres_copy(url)


# Each asked of both engines; the rows compared as multisets (in order, for the ordered).
QUERIES = [
    "MATCH (u:User) RETURN u",
    "MATCH (u:User) RETURN u.name, u.enabled, u.hasspn",
    "MATCH (u:User {enabled: true}) RETURN count(u)",
    "MATCH (n:Base) RETURN count(n)",
    "MATCH (n) RETURN count(*)",
    "MATCH (u:User) WHERE u.hasspn = true RETURN u.name",
    "MATCH (u:User) WHERE NOT u.dontreqpreauth RETURN u.name",
    "MATCH (c:Computer) WHERE c.unconstraineddelegation = true RETURN c.name",
    "MATCH (u:User) WHERE u.enabled = true AND NOT u.name ENDS WITH '$' RETURN u.name",
    "MATCH (u:User) WHERE u.name STARTS WITH 'A' OR u.name CONTAINS 'SVC' RETURN u.name",
    "MATCH (u:User) WHERE u.pwdlastset < 1600000000 XOR u.enabled RETURN u.name",
    "MATCH (n) WHERE n.objectid IN ['S-1-5-21-3130019616-2776909439-2417379446-512', "
    "'S-1-5-21-3130019616-2776909439-2417379446-500'] RETURN n",
    "MATCH (u:User) WHERE u.email IS NULL RETURN count(u)",
    "MATCH (u:User) WHERE u.displayname IS NOT NULL RETURN u.displayname",
    "MATCH (n:Group:Base) RETURN n.name",
    "MATCH (n) WHERE n:Computer OR n:GPO RETURN n.name",
    "MATCH (a)-[r]->(b) RETURN type(r), count(*)",
    "MATCH (a)-[r:AdminTo|CanRDP]->(c:Computer) RETURN a.name, type(r), c.name",
    "MATCH (a)-[r:AdminTo|:CanRDP]->(c) RETURN r",
    "MATCH (g:Group)<-[:MemberOf]-(u:User) RETURN g.name, count(u) AS members",
    "MATCH (u:User)-[:MemberOf*1..]->(g:Group) RETURN DISTINCT u.name, g.name",
    "MATCH p = (u:User)-[:MemberOf*1..3]->(g:Group) RETURN p",
    "MATCH p = (g:Group)<-[:MemberOf*2]-(x) RETURN p",
    "MATCH (n)-[:MemberOf*0..1]->(m:Group) WHERE n.name STARTS WITH 'D' RETURN n.name, m.name",
    "MATCH (u:User)-[:MemberOf]->(g)-[:MemberOf]->(h) RETURN u.name, g.name, h.name",
    "MATCH (a)-[:MemberOf]->(g:Group), (b)-[:MemberOf]->(g) WHERE a.name < b.name "
    "RETURN a.name, b.name, g.name",
    "MATCH (u:User) WHERE NOT (u)-[:MemberOf]->(:Group) RETURN u.name",
    "MATCH (u:User) WHERE (u)-[:AdminTo]->() RETURN u.name",
    "MATCH (c:Computer) OPTIONAL MATCH (c)-[:HasSession]->(u:User) RETURN c.name, u.name",
    "MATCH (c:Computer) OPTIONAL MATCH (c)-[:HasSession]-(u) RETURN c.name, count(u)",
    "MATCH (c:Computer) WITH c, size([(c)<-[:AdminTo]-(x) | x]) AS admins WHERE admins > 0 "
    "RETURN c.name, admins",
    "MATCH (u:User) WITH u.domain AS d, collect(u.name) AS names RETURN d, size(names)",
    "MATCH (u:User) WITH u ORDER BY u.name LIMIT 3 RETURN u.name",
    "MATCH (u:User) RETURN u.name AS n UNION MATCH (g:Group) RETURN g.name AS n",
    "MATCH (u:User) RETURN u.enabled AS e UNION ALL MATCH (c:Computer) RETURN c.enabled AS e",
    "MATCH (u:User) RETURN CASE WHEN u.enabled THEN 'on' ELSE 'off' END AS state, count(*)",
    "MATCH (u:User) RETURN CASE u.admincount WHEN true THEN 1 WHEN false THEN 0 END, u.name",
    "MATCH (u:User) WHERE any(s IN u.serviceprincipalnames WHERE s CONTAINS '/') RETURN u.name",
    "MATCH (u:User) WHERE all(s IN u.sidhistory WHERE s STARTS WITH 'S-1-5') RETURN u.name",
    "MATCH (u:User) WHERE none(s IN u.serviceprincipalnames WHERE s CONTAINS 'x') RETURN count(u)",
    "MATCH (u:User) WHERE single(s IN u.sidhistory WHERE s ENDS WITH '1105') RETURN u.name",
    "MATCH (u:User) RETURN u.name, [x IN u.sidhistory | toLower(x)], size(u.sidhistory)",
    "MATCH (u:User) RETURN [x IN u.serviceprincipalnames WHERE x CONTAINS 'SQL']",
    "MATCH (u:User) RETURN min(u.pwdlastset), max(u.pwdlastset), sum(u.pwdlastset), "
    "avg(u.pwdlastset), count(DISTINCT u.enabled)",
    "MATCH (u:User) RETURN u.name, split(u.name, '@')[1], toUpper(u.name), toLower(u.name)",
    "MATCH (u:User) RETURN coalesce(u.email, u.displayname, 'none'), substring(u.name, 1, 3)",
    "MATCH (u:User) RETURN u.name, u.name + '!', toString(u.pwdlastset), toInteger('12')",
    "MATCH (u:User) RETURN size(labels(u)), 'Base' IN labels(u), keys(u) = keys(u)",
    "MATCH (a)-[r:MemberOf]->(b) WHERE startNode(r) = a AND endNode(r) = b RETURN count(r)",
    "MATCH p = (u:User)-[:MemberOf]->(g) RETURN length(p), nodes(p), relationships(p)",
    "MATCH (g:Group) RETURN g.name, head(collect(g.objectid)), last([1, 2, 3])",
    "MATCH (u:User) UNWIND u.sidhistory AS sid RETURN u.name, sid",
    "UNWIND [1, 2, 3] AS x UNWIND [10, 20] AS y RETURN x * y, x + y, y / x, y % x",
    "RETURN 7 / 2, -7 / 2, 7 % 3, 2 ^ 3, 1 + 2.5, 'a' + 'b', [1] + [2], range(1, 5), abs(-3)",
    "RETURN [1, 2, 3][0], [1, 2, 3][-1], [1, 2, 3][1..], [1, 2, 3][..2], {a: 1}.a",
    "RETURN null = null, null <> 1, 1 = 1.0, 'a' < 'b', [1, 2] = [1, 2], 1 IN [1, null]",
    "RETURN 2 IN [1, null], NOT null, null OR true, null AND false, 1 < 2 < 3",
    "MATCH (u:User) WHERE u.name IN $names RETURN u.name",
    # Filters decided a whole property column at a time (cypher/match.py filter_columns).
    "MATCH (u:User) WHERE u.name <> 1 RETURN count(u)",
    "MATCH (u:User) WHERE u.name = 1 OR u.enabled RETURN count(u)",
    "MATCH (u:User) WHERE 1600000000 > u.pwdlastset RETURN u.name",
    "MATCH (u:User) WHERE u.pwdlastset >= 1579128216 AND NOT u.enabled RETURN count(u)",
    "MATCH (u:User) WHERE u.enabled IS NULL RETURN count(u)",
    "MATCH (n) WHERE n.name < 'D' AND n.objectid IS NOT NULL RETURN n.name",
    "MATCH (u:User {name: 'ADMINISTRATOR@TESTLAB.LOCAL', enabled: true}) RETURN u.objectid",
    "MATCH (c:Computer {enabled: 'true'}) RETURN count(c)",
    "MATCH (u:User) WHERE u.enabled <> false RETURN count(u)",
    # Found by an attack: a WHERE on the MATCH's own path variable was a 500.
    "MATCH p = (a:User)-[:MemberOf]->(b) WHERE length(p) = 1 RETURN count(*)",
    "MATCH p = (u:User)-[:MemberOf*1..3]->(g) WHERE all(n IN nodes(p) WHERE n.name IS NOT NULL) "
    "RETURN count(p)",
    "RETURN 9007199254740993 % 2, -7 % 3, 7 % -3",
    # Found by the generated queries: a pattern predicate tested before its variable was
    # bound matched from every node.
    "MATCH (a)-[:MemberOf]->(b) WHERE NOT (b)-[:MemberOf]->() RETURN a.name, b.name",
    "MATCH (a:User)-[:MemberOf]->(b) WHERE (b)-[:MemberOf]->(:Group) RETURN count(*)",
    # One relationship grouped and counted as arrays (cypher/columnar.py pair_counts).
    "MATCH (g:Group)<-[:MemberOf]-(u:User {enabled: true}) RETURN g.name, count(u), "
    "count(DISTINCT u)",
    "MATCH (u:User)-[:MemberOf]-(g) RETURN u.enabled, g.domain, count(*)",
    "MATCH (g:Group)<-[:MemberOf]-(m) WITH g, count(m) AS members WHERE members > 1 "
    "RETURN g.name, members",
    "MATCH (a)-[:AdminTo]->(c:Computer) WHERE c.enabled AND a.admincount IS NOT NULL "
    "RETURN c, count(*) AS admins",
    "MATCH (a)-[:MemberOf]->(b:Group) RETURN count(*), count(DISTINCT a), count(DISTINCT b)",
    "MATCH (a:GPO)-[:AdminTo]->(b) RETURN count(*)",
]


@pytest.mark.parametrize("query", QUERIES)
def test_each_query_answers_as_falkordb_does(v6: Both, query: str) -> None:
    parameters = {"names": ["ADMINISTRATOR@TESTLAB.LOCAL", "NOBODY"]}
    if "$" in query:
        mine = sorted(v6.ours(query, parameters), key=repr)
        theirs = sorted(v6.falkor.rows(query, parameters), key=repr)
        assert mine == theirs and mine, (mine, theirs)
        return
    found = v6.agree(query)
    assert found or "NOT (u)-[:MemberOf]" in query, "the query finds something to compare"


ORDERED = [
    "MATCH (u:User) RETURN u.name ORDER BY u.name",
    "MATCH (u:User) RETURN u.name AS n ORDER BY n DESC SKIP 2 LIMIT 3",
    "MATCH (g:Group)<-[:MemberOf]-(u) RETURN g.name, count(u) AS c ORDER BY c DESC, g.name",
    "MATCH (u:User) RETURN u.name, u.pwdlastset ORDER BY u.pwdlastset, u.name",
    "MATCH (n:Base) RETURN DISTINCT n.domain AS domain ORDER BY domain",
    "MATCH (n:Base) RETURN DISTINCT n.domain AS domain ORDER BY domain DESC",
]


@pytest.mark.parametrize("query", ORDERED)
def test_ordered_answers_are_in_falkordbs_order(v6: Both, query: str) -> None:
    assert v6.agree(query, ordered=True)


# FalkorDB takes shortestPath in WITH and RETURN only, and allShortestPaths between ends
# already bound: the same question, written as it takes it.
KINDS = "MemberOf|AdminTo|HasSession|GenericAll"


def test_shortest_paths_have_falkordbs_lengths_and_all_of_them_its_paths(v6: Both) -> None:
    asked = {"da": DOMAIN_ADMINS}
    mine = v6.ours(
        f"MATCH p = shortestPath((u:User)-[:{KINDS}*1..]->(g:Group)) WHERE g.objectid = $da "
        "RETURN u.name, length(p)",
        asked,
    )
    theirs = v6.falkor.rows(
        f"MATCH (u:User), (g:Group {{objectid: $da}}) WITH u, shortestPath((u)-[:{KINDS}*1..]->(g))"
        " AS p WHERE p IS NOT NULL RETURN u.name, length(p)",
        asked,
    )
    assert sorted(mine) == sorted(theirs) and mine
    every = v6.ours(
        f"MATCH p = allShortestPaths((u:User)-[:{KINDS}*1..]->(g:Group {{objectid: $da}})) "
        "RETURN p",
        asked,
    )
    all_theirs = v6.falkor.rows(
        f"MATCH (u:User), (g:Group {{objectid: $da}}) WITH u, g "
        f"MATCH p = allShortestPaths((u)-[:{KINDS}*1..]->(g)) RETURN p",
        asked,
    )
    assert sorted(every, key=repr) == sorted(all_theirs, key=repr) and len(every) >= len(mine)
    # The end named inline: one end, many starts, searched back from it (`many_to_one`).
    inline = f"MATCH p = shortestPath((u:User)-[:{KINDS}*1..]->(g:Group {{objectid: $da}}))"
    assert sorted(v6.ours(f"{inline} RETURN u.name, length(p)", asked)) == sorted(theirs)
    paths = v6.ours(f"{inline} RETURN p", asked)
    assert len(paths) == len(mine) and all(path in every for path in paths)


def test_the_attack_path_macros_walk_the_traversable_kinds(v6: Both) -> None:
    from graphsvc.cypher.kinds import AD_ATTACK_PATHS

    kinds = "|".join(AD_ATTACK_PATHS)
    macro = v6.ours(
        "MATCH p = allShortestPaths((u:User)-[:AD_ATTACK_PATHS*1..]->(g:Group {objectid: $da})) "
        "RETURN p",
        {"da": DOMAIN_ADMINS},
    )
    spelled = v6.falkor.rows(
        "MATCH (u:User), (g:Group {objectid: $da}) WITH u, g "
        f"MATCH p = allShortestPaths((u)-[:{kinds}*1..]->(g)) RETURN p",
        {"da": DOMAIN_ADMINS},
    )
    assert sorted(macro, key=repr) == sorted(spelled, key=repr) and macro


def test_regular_expressions_match_the_whole_text_as_python_does(v6: Both) -> None:
    """FalkorDB has no =~: the names are filtered here instead."""
    names = [row[0] for row in v6.falkor.rows("MATCH (u:User) RETURN u.name")]
    for pattern in ("(?i).*admin.*", "ADMIN.*", ".*@TESTLAB\\.LOCAL", "admin"):
        expected = sorted(n for n in names if re.fullmatch(pattern, n))
        found = v6.ours("MATCH (u:User) WHERE u.name =~ $p RETURN u.name", {"p": pattern})
        assert sorted(row[0] for row in found) == expected, pattern
    assert expected == [] and len(names) > 5


# --- the route ------------------------------------------------------------------------------


def post(env: Env, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    content = json.dumps(body).encode()
    sent = {
        **env.signed_headers("POST", CYPHER, body=content),
        "Content-Type": "application/json",
        **(headers or {}),
    }
    return env.request("POST", CYPHER, sent, content=content)


def test_the_route_answers_the_reference_unified_graph(env: Env) -> None:
    ingest(env, *sorted(V6.glob("*.json")))
    response = post(
        env,
        {
            "query": "MATCH p = (u:User {name: 'ADMINISTRATOR@TESTLAB.LOCAL'})-[:MemberOf]->(g) "
            "RETURN p, count(g) AS groups"
        },
    )
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    names = {node["label"] for node in data["nodes"].values()}
    assert "ADMINISTRATOR@TESTLAB.LOCAL" in names and len(names) >= 2
    user = next(n for n in data["nodes"].values() if n["label"] == "ADMINISTRATOR@TESTLAB.LOCAL")
    assert user["kind"] == "User" and "Base" in user["kinds"] and "properties" not in user
    assert user["objectId"].endswith("-500") and user["isOwnedObject"] is False
    assert all(e["kind"] == "MemberOf" == e["label"] for e in data["edges"])
    assert all(e["source"] in data["nodes"] and e["target"] in data["nodes"] for e in data["edges"])
    assert {literal["key"] for literal in data["literals"]} == {"groups"}
    assert "node_keys" not in data


def test_include_properties_adds_each_nodes_and_the_sorted_keys(env: Env) -> None:
    ingest(env, *sorted(V6.glob("*.json")))
    response = post(
        env,
        {
            "query": "MATCH (u:User)-[r:MemberOf]->(g) WHERE u.hasspn RETURN u, r, g",
            "include_properties": True,
        },
    )
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    every = set().union(*(node["properties"] for node in data["nodes"].values()))
    assert data["node_keys"] == sorted(every) and "objectid" in every and "hasspn" in every
    assert all("properties" in edge for edge in data["edges"])


def test_tier_zero_is_a_label_and_a_tag(env: Env) -> None:
    ingest(env, *sorted(V6.glob("*.json")))
    response = post(
        env,
        {"query": "MATCH (n:Tag_Tier_Zero) RETURN n, n.system_tags AS tags LIMIT 1"},
    )
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    (node,) = data["nodes"].values()
    assert node["isTierZero"] is True and "Tag_Tier_Zero" in node["kinds"]
    assert data["literals"] == [{"value": "admin_tier_0", "key": "tags"}]


def test_an_empty_result_is_a_404_and_a_count_of_nothing_a_200(env: Env) -> None:
    ingest(env, *sorted(V6.glob("*.json")))
    nothing = post(env, {"query": "MATCH (n:User {name: 'NOBODY'}) RETURN n"})
    assert nothing.status_code == 404, nothing.text
    counted = post(env, {"query": "MATCH (n:User {name: 'NOBODY'}) RETURN count(n)"})
    assert counted.json()["data"]["literals"] == [{"value": 0, "key": "count(n)"}]


@pytest.mark.parametrize(
    ("query", "code", "words"),
    [
        ("CREATE (n:User {name: 'x'}) RETURN n", "cypher_updating", "CREATE"),
        ("MATCH (n) DETACH DELETE n", "cypher_updating", "DELETE"),
        ("MATCH (n) SET n.owned = true RETURN n", "cypher_updating", "SET"),
        ("MERGE (n:User {name: 'x'}) RETURN n", "cypher_updating", "MERGE"),
        ("CALL db.labels()", "cypher_procedure", "CALL"),
        ("MATCH (n) RETRN n", "cypher_syntax", "line 1:11"),
        ("MATCH (n) RETURN m", "cypher_semantic", "`m` is not defined"),
        ("MATCH (n) RETURN nosuch(n)", "cypher_semantic", "unknown function nosuch()"),
        ("MATCH (n) RETURN n.name + $missing", "cypher_semantic", "$missing"),
        (
            "MATCH (n) WHERE (n)-->(x) RETURN n",
            "cypher_semantic",
            "line 1:17 a pattern predicate cannot bring in a new variable (x)",
        ),
        ("   ", "cypher_empty", "empty"),
    ],
)
def test_what_is_refused_is_a_400_naming_it(env: Env, query: str, code: str, words: str) -> None:
    response = post(env, {"query": query})
    assert response.status_code == 400, response.text
    message = response.json()["errors"][0]["message"]
    assert words in message, message


def test_a_misspelled_field_is_refused(env: Env) -> None:
    response = post(env, {"query": "RETURN 1", "include_propertes": True})
    assert response.status_code == 400 and "include_propertes" in response.text


def test_parameters_are_values_of_the_query(env: Env) -> None:
    ingest(env, *sorted(V6.glob("*.json")))
    response = post(
        env,
        {
            "query": "MATCH (n {objectid: $id}) RETURN n.name AS name",
            "parameters": {"id": DOMAIN_ADMINS},
        },
    )
    assert response.json()["data"]["literals"] == [
        {"value": "DOMAIN ADMINS@TESTLAB.LOCAL", "key": "name"}
    ]


def test_the_caps_refuse_with_a_413_naming_them(make_env: Any) -> None:
    env = make_env(cypher_max_rows=50, cypher_max_paths=3)
    env.create_admin()
    ingest(env, *sorted(V6.glob("*.json")))
    rows = post(env, {"query": "MATCH (n) RETURN n"})
    assert rows.status_code == 413 and "cypher_max_rows" in rows.text, rows.text
    ordered = post(env, {"query": "MATCH (n) RETURN n.name ORDER BY n.name LIMIT 1"})
    assert ordered.status_code == 413 and "cypher_max_rows" in ordered.text
    limited = post(env, {"query": "MATCH (n) RETURN n.name LIMIT 5"})
    assert limited.status_code == 200  # a LIMIT stops the walk before the cap
    paths = post(env, {"query": "MATCH p = shortestPath((a:User)-[*1..]->(b:Group)) RETURN p"})
    assert paths.status_code == 413 and "cypher_max_paths" in paths.text


def test_a_query_that_grows_memory_past_its_cap_is_a_413(make_env: Any) -> None:
    env = make_env(cypher_max_memory_mb=64)
    env.create_admin()
    # Each inner list is 100,000 integers (about 4 MB): the cap stops it after a few dozen,
    # where it would take about 400 GB to finish.
    grown = post(env, {"query": "RETURN size([x IN range(1, 100000) | range(1, 100000)])"})
    assert grown.status_code == 413, grown.text
    assert grown.json()["errors"][0]["message"].endswith(
        "(the cypher_max_memory_mb cap): return fewer or smaller values (count() rather than "
        "collect(), say), narrow it with WHERE, or end it with LIMIT"
    )
    small = post(env, {"query": "RETURN size([x IN range(1, 100) | range(1, 100)]) AS n"})
    assert small.status_code == 200 and small.json()["data"]["literals"][0]["value"] == 100


def test_an_answer_is_kept_and_named_while_the_data_is_unchanged(env: Env) -> None:
    ingest(env, *sorted(V6.glob("*.json")))
    body = {"query": "MATCH (u:User) RETURN count(u)"}
    first = post(env, body)
    tag = first.headers["etag"]
    again = post(env, body, {"If-None-Match": tag})
    assert again.status_code == 304
    other = post(env, {"query": "MATCH (g:Group) RETURN count(g)"}, {"If-None-Match": tag})
    assert other.status_code == 200 and other.headers["etag"] != tag
    ingest(env, FIXTURES / "bloodhound-ce" / "fixtures" / "v5" / "ingest" / "computers.json")
    changed = post(env, body, {"If-None-Match": tag})
    assert changed.status_code == 200


def test_the_query_command_prints_a_table_json_and_a_plan(env: Env) -> None:
    ingest(env, *sorted(V6.glob("*.json")))
    text = "MATCH (u:User) WHERE u.hasspn RETURN u.name AS name ORDER BY name"
    table = env.cli("query", text)
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert (lines[0].strip() == "name" and lines[-1].endswith("rows)")) or lines[-1] == "(1 row)"
    as_json = env.cli("query", "--json", text)
    assert json.loads(as_json.output)["data"]["literals"][0]["key"] == "name"
    plan = env.cli("query", "--explain", text)
    assert "MATCH (u:User)" in plan.output and "ORDER BY" in plan.output, plan.output
    refused = env.cli("query", "MATCH (n) DELETE n")
    assert refused.exit_code != 0 and "updating clauses are not supported" in refused.output


def test_a_query_past_its_wait_is_the_timeout_and_its_thread_stops(env: Env) -> None:
    ingest(env, *sorted(V6.glob("*.json")))
    endless = {"query": "MATCH p = (a)-[*]-(b) RETURN count(p)"}  # every trail: billions
    response = post(env, endless, {"Prefer": "wait=1"})
    assert response.status_code == 500 and "timed out after 1 seconds" in response.text
    assert post(env, {"query": "RETURN 1 AS one"}).status_code == 200


@pytest.mark.parametrize(
    "query",
    [
        "MATCH p = (a)-[*]-(b) RETURN count(p)",  # every trail of the graph
        # No graph walked: the lists' own loops tick.
        "RETURN size([x IN range(1, 20000) | size([y IN range(1, 20000) WHERE y = x])])",
        "RETURN any(x IN range(1, 100000) WHERE any(y IN range(1, 100000) WHERE y < x - 1e9))",
    ],
)
def test_a_cancelled_run_stops_at_its_next_tick(v6: Both, query: str) -> None:
    """The thread cannot be killed: a cancelled request tells its run, which stops."""
    stopped = threading.Event()

    async def work(conn: Connection) -> None:
        _, run = await service.query_graph(conn, v6.engine, parse("RETURN 1"), {})
        endless = parse(query)

        def count() -> Any:
            try:
                return execute(endless, run)
            finally:
                stopped.set()

        with pytest.raises(TimeoutError):
            await asyncio.wait_for(service.in_thread(run, count), 0.5)
        assert run.cancelled.is_set()

    asyncio.run(run_in_transaction(v6.url, work))
    assert stopped.wait(10), "the run went on after its request was cancelled"


def test_a_small_query_ends_on_the_event_loop_and_a_longer_one_in_its_thread(
    v6: Both, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query is tried on the event loop first (service.run_to_end): one of a few steps
    ends there, with no thread; one past the budget, or one that would pass over more than
    INLINE_ELEMENTS values at once, is run again in a thread, with the same answer."""
    threads: list[Any] = []
    in_thread = service.in_thread

    async def counted(run: Any, work: Any) -> Any:
        threads.append(run)
        return await in_thread(run, work)

    monkeypatch.setattr(service, "in_thread", counted)
    administrator = {"id": "S-1-5-21-3130019616-2776909439-2417379446-500"}
    assert v6.ours("MATCH (u:User {objectid: $id}) RETURN u.name", administrator)
    assert threads == []
    assert v6.ours("UNWIND range(1, 5000) AS x RETURN count(x)") == [[5000]]
    ran_inline = len(threads)
    monkeypatch.setattr(service, "INLINE_BUDGET_SECONDS", 0.0)
    assert v6.ours("UNWIND range(1, 5000) AS x RETURN count(x)") == [[5000]]
    assert len(threads) == ran_inline + 1, "past its budget, the query went to a thread"
    monkeypatch.setattr(service, "INLINE_BUDGET_SECONDS", 60.0)
    enabled = v6.ours("MATCH (u:User) WHERE u.enabled RETURN count(u)")
    assert len(threads) == ran_inline + 1
    monkeypatch.setattr(runtime, "INLINE_ELEMENTS", 2)
    assert v6.ours("MATCH (u:User) WHERE u.enabled RETURN count(u)") == enabled
    assert len(threads) == ran_inline + 2, "a pass over every user went to a thread"
    # A label's count is the size of its list: no pass, however many nodes carry it.
    assert v6.ours("MATCH (u:User) RETURN count(u)")
    assert len(threads) == ran_inline + 2


def test_a_query_moved_to_its_thread_stops_when_its_request_is_cancelled(
    v6: Both, monkeypatch: pytest.MonkeyPatch
) -> None:
    stopped = threading.Event()

    def execute_and_tell(query: Any, run: Any) -> Any:
        try:
            return execute(query, run)
        finally:
            if run.inline_until is None:  # the thread's run, not the attempt on the loop
                stopped.set()

    monkeypatch.setattr(service, "execute", execute_and_tell)

    async def work(conn: Connection) -> None:
        endless = parse("MATCH p = (a)-[*]-(b) RETURN count(p)")
        _, run = await service.query_graph(conn, v6.engine, endless, {})
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(service.run_to_end(endless, run), 0.5)

    asyncio.run(run_in_transaction(v6.url, work))
    assert stopped.wait(10), "the run went on after its request was cancelled"


def test_values_the_attack_found_answer_as_cypher_says(v6: Both) -> None:
    assert v6.ours("RETURN substring('abc', 1, null), left('abc', null), 9007199254740993 % 2") == [
        [None, None, 1]
    ]
    none = v6.ours(
        "MATCH p = shortestPath((g:Group {objectid: $da})-[:MemberOf*]->"
        "(u:User {name: 'ADMINISTRATOR@TESTLAB.LOCAL'})) RETURN p",
        {"da": DOMAIN_ADMINS},
    )
    assert none == []  # no path: no row (it was a 500)


OVERFLOW = "integer overflow: the result does not fit in 64 bits"


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("RETURN 2 ^ 10000", ""),
        ("RETURN 'abc' =~ '('", ""),
        ("RETURN [1, 2, 3][1.5..2]", ""),
        ("RETURN round(0.0 / 0.0)", ""),
        ("RETURN 'a' + true", ""),
        ("MATCH (u:User) WHERE u.pwdlastset RETURN count(u)", ""),
        ("RETURN 9223372036854775807 + 1", OVERFLOW),
        ("RETURN -9223372036854775807 - 2", OVERFLOW),
        ("RETURN 3037000500 * 3037000500", OVERFLOW),
        ("WITH -9223372036854775807 - 1 AS least RETURN -least", OVERFLOW),
        ("UNWIND [9223372036854775807, 1] AS x RETURN sum(x)", OVERFLOW),
    ],
)
def test_values_python_cannot_make_or_cypher_cannot_hold_are_a_400(
    v6: Both, query: str, words: str
) -> None:
    with pytest.raises(ApiError) as refused:
        v6.ours(query)
    assert refused.value.status == 400, refused.value.message
    assert words in refused.value.message


def test_the_largest_integers_are_answered(v6: Both) -> None:
    largest = v6.ours(
        "RETURN toString(9223372036854775806 + 1), toString(-9223372036854775807 - 1)"
    )
    assert largest == [["9223372036854775807", "-9223372036854775808"]]


def test_floats_are_written_as_cypher_writes_them(v6: Both) -> None:
    written = v6.ours(
        "UNWIND [3.0, 0.001, 1234567.5, 1e7, 1e16, 12345678.9, 1.5e-5, -2.5e-300, 0.0 / 0.0,"
        " 1e308 * 10, -1e308 * 10] AS x RETURN toString(x), 'x' + x"
    )
    expected = [
        "3.0", "0.001", "1234567.5", "1.0E7", "1.0E16", "1.23456789E7", "1.5E-5",
        "-2.5E-300", "NaN", "Infinity", "-Infinity",
    ]  # fmt: skip
    assert written == [[text, "x" + text] for text in expected]


def test_object_ids_named_as_constants_and_computed_find_the_same_node(v6: Both) -> None:
    constant = v6.ours("MATCH (g {objectid: $da}) RETURN g.name", {"da": DOMAIN_ADMINS})
    computed = v6.ours(
        "MATCH (g:Group {objectid: $da}) MATCH (x {objectid: g.objectid}) RETURN x.name",
        {"da": DOMAIN_ADMINS},
    )
    in_where = v6.ours("MATCH (x) WHERE x.objectid = $da RETURN x.name", {"da": DOMAIN_ADMINS})
    assert constant == computed == in_where == [["DOMAIN ADMINS@TESTLAB.LOCAL"]]
    assert v6.ours("MATCH (g {objectid: 'S-1-5-21-NO-SUCH'}) RETURN g") == []


def test_a_key_the_stores_json_paths_cannot_name_is_read_from_the_whole_maps(v6: Both) -> None:
    every = v6.ours("MATCH (n:User) RETURN count(n)")
    assert v6.ours('MATCH (n:User) WHERE n.`a"b` IS NULL RETURN count(n)') == every
    assert v6.ours('MATCH (n:User) RETURN DISTINCT n.`a"b`') == [[None]]


def test_properties_a_query_reads_are_those_the_answer_shows(env: Env) -> None:
    ingest(env, *sorted(V6.glob("*.json")))
    query = (
        "MATCH (n:User:Tag_Tier_Zero) RETURN n, properties(n) AS p, keys(n) AS k,"
        " n.lastseen AS seen, n.system_tags AS tags, n.objectid AS id LIMIT 1"
    )
    response = post(env, {"query": query, "include_properties": True})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    (node,) = data["nodes"].values()
    read = {literal["key"]: literal["value"] for literal in data["literals"]}
    assert read["p"] == node["properties"] and read["k"] == sorted(node["properties"])
    assert read["seen"] == node["properties"]["lastseen"] and read["tags"] == "admin_tier_0"
    assert node["properties"]["system_tags"] == "admin_tier_0"
    assert read["id"] == node["objectId"] == node["properties"]["objectid"]


def test_starts_or_ends_with_what_is_not_a_string_keeps_no_node(v6: Both) -> None:
    """`v.key STARTS WITH x` is null unless both are strings (openCypher): the column-wide
    test (cypher/match.py affix_test) keeps no node for a number, a list or null, as the
    node-by-node test (under NOT NOT) does."""
    assert v6.ours("MATCH (u:User) WHERE u.name STARTS WITH 'ADMIN' RETURN count(u)")[0][0] > 0
    for given in (5, None, ["ADMIN"], True):
        for op in ("STARTS WITH", "ENDS WITH"):
            for where in (f"u.name {op} $p", f"NOT NOT u.name {op} $p"):
                query = f"MATCH (u:User) WHERE {where} RETURN count(u)"
                assert v6.ours(query, {"p": given}) == [[0]], (query, given)


def test_a_pattern_map_given_as_a_parameter_must_be_a_map(v6: Both) -> None:
    named = v6.ours("MATCH (n:Group $p) RETURN n.name", {"p": {"objectid": DOMAIN_ADMINS}})
    assert named == [["DOMAIN ADMINS@TESTLAB.LOCAL"]]
    for given in (None, 5, ["objectid"]):
        with pytest.raises(ApiError) as refused:
            v6.ours("MATCH (n:Group $p) RETURN n.name", {"p": given})
        assert refused.value.status == 400
        assert "a pattern's property map $p must be a map" in refused.value.message
    with pytest.raises(ApiError) as refused:
        v6.ours("MATCH (n)-[r:MemberOf $q]->(g) RETURN count(r)", {"q": None})
    assert "a pattern's property map $q must be a map, got NULL" in refused.value.message


@pytest.mark.parametrize(
    "match",
    [
        "MATCH (u:User)",
        "MATCH (u:User {enabled: true})",
        "MATCH (u:User) WHERE u.enabled AND u.name CONTAINS '@'",
        "MATCH (u:Group:Base)",
    ],
)
@pytest.mark.parametrize(
    "returned",
    [
        "RETURN u.name, u.objectid, u.enabled",
        "RETURN u, u.name AS name SKIP 2 LIMIT 3",
        "RETURN u.admincount LIMIT $few",
        "RETURN count(u), count(*) AS rows",
    ],
)
def test_a_one_node_match_read_off_the_columns_answers_as_the_general_plan(
    v6: Both, match: str, returned: str
) -> None:
    """The single-node plan (`columnar.single_node`) against the general one, which a
    `WITH` between the clauses makes the query take: the same rows in the same order."""
    given = {"few": 4}
    direct = v6.ours(f"{match} {returned}", given)
    general = v6.ours(f"{match} WITH u {returned}", given)
    assert direct == general and direct


@pytest.mark.parametrize(
    "match",
    [
        "MATCH (a:User {name: 'ADMINISTRATOR@TESTLAB.LOCAL'})-[:MemberOf*1..]->(b:Group)",
        "MATCH (a:Group)<-[:MemberOf*]-(b) WHERE b.enabled",
        "MATCH (a:Computer)-[:MemberOf*0..]->(b)",
        "MATCH (a {objectid: $start})-[:MemberOf|AdminTo*1..]->(b)",
    ],
)
@pytest.mark.parametrize(
    "returned",
    [
        "RETURN count(DISTINCT b) AS n",
        "RETURN DISTINCT b.name AS name ORDER BY name LIMIT 7",
        "RETURN b.enabled AS e, count(DISTINCT b) AS n, min(b.name) AS first ORDER BY n, e",
        "WITH DISTINCT b WHERE b:Group RETURN collect(b.name) AS names",
    ],
)
@pytest.mark.parametrize("at_once", [False, True])
def test_the_nodes_a_variable_length_pattern_reaches_answer_as_the_general_plan(
    v6: Both, match: str, returned: str, at_once: bool
) -> None:
    """The plan that searches once for the nodes a variable-length relationship reaches
    (`columnar.reached_ends`) against the general one, which walks every trail (a `WITH`
    between the clauses makes the query take it): the same rows, the search node by node
    or a whole frontier in one numpy pass (`at_once`)."""
    given = {"start": f"{DOMAIN_ADMINS[:-4]}-500"}  # the fixture's Administrator
    direct, general = f"{match} {returned}", f"{match} WITH a, b {returned}"

    async def plans(conn: Connection) -> list[str]:
        return [await service.explain_query(conn, v6.engine, q, given) for q in (direct, general)]

    shown = asyncio.run(run_in_transaction(v6.url, plans))
    assert "the nodes reached from the starts" in shown[0], shown[0]
    assert "the nodes reached from the starts" not in shown[1], shown[1]
    with mock.patch.object(columnar, "SEARCH_AT_ONCE", 1 if at_once else 10**9):
        found = v6.ours(direct, given)
    expected = v6.ours(general, given)
    if "collect" in returned:
        found, expected = [sorted(found[0][0])], [sorted(expected[0][0])]
    assert found == expected and found


@pytest.mark.parametrize(
    "match",
    [
        "MATCH (a:Group)<-[:MemberOf]-(b:User)",
        "MATCH (a:User {enabled: true})-[:MemberOf|AdminTo]->(b)",
        "MATCH (a:User)-[:MemberOf]-(b) WHERE a.enabled AND b.name >= 'D'",
        "MATCH (a)-[:MemberOf|AdminTo|HasSession]->(b) WHERE a.enabled = true",
    ],
)
@pytest.mark.parametrize(
    "returned",
    [
        "RETURN a.name, count(b) AS n",
        "RETURN a, b.enabled, count(*) AS n, count(DISTINCT b) AS d",
        "RETURN count(*) AS n, count(DISTINCT a) AS d",
        "WITH a, count(b) AS n WHERE n > 1 RETURN a.name, n ORDER BY n DESC, a.name LIMIT 5",
        # The first groups of an order found on arrays (columnar.TopGroups): by a count, a
        # node, a true/false, a string and a number property.
        "RETURN a, b.enabled AS e, count(*) AS n ORDER BY n DESC, e, a SKIP 1 LIMIT 3",
        "RETURN b.name AS name, count(a) AS n ORDER BY name DESC LIMIT 4",
        "RETURN b.pwdlastset AS p, count(DISTINCT a) AS n ORDER BY n, p DESC LIMIT 4",
    ],
)
def test_one_relationship_counted_as_arrays_answers_as_the_general_plan(
    v6: Both, match: str, returned: str
) -> None:
    """The plan that groups and counts one relationship's matches as arrays
    (`columnar.pair_counts`) against the general one, which a `WITH` between the clauses
    makes the query take: the same rows."""
    direct, general = f"{match} {returned}", f"{match} WITH a, b {returned}"

    async def plans(conn: Connection) -> list[str]:
        return [await service.explain_query(conn, v6.engine, q, {}) for q in (direct, general)]

    shown = asyncio.run(run_in_transaction(v6.url, plans))
    assert "grouped and counted as arrays" in shown[0], shown[0]
    assert "grouped and counted as arrays" not in shown[1], shown[1]
    found, expected = v6.ours(direct), v6.ours(general)
    if "ORDER BY" not in returned:
        found, expected = sorted(found, key=repr), sorted(expected, key=repr)
    assert found == expected and found
