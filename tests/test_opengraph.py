"""Loading OpenGraph files: the documentation's examples, merging, all-or-nothing, and every
bad input named by file and element."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graphsvc.ingest.records import IngestError
from graphsvc.store import graph
from graphsvc.store.db import Connection
from tests.conftest import FIXTURES, Env, ingest

DOCS = FIXTURES / "bloodhound-docs"


def write(folder: Path, name: str, document: Any) -> Path:
    path = folder / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def graph_rows(env: Env) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    async def read(conn: Connection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        nodes = [
            tuple(r)
            for r in await conn.fetch(
                "SELECT object_id, name, label, kinds, properties FROM nodes ORDER BY object_id"
            )
        ]
        edges = [
            tuple(r)
            for r in await conn.fetch(
                """SELECT s.object_id, k.name, e.object_id FROM edges x
                JOIN nodes s ON s.id = x.start_id JOIN nodes e ON e.id = x.end_id
                JOIN kinds k ON k.id = x.kind_id ORDER BY 1, 2, 3"""
            )
        ]
        return nodes, edges

    return env.run_in_transaction(read)


def test_minimal_fixture(env: Env) -> None:
    result = ingest(env, DOCS / "opengraph-minimal.json")
    raw = json.loads((DOCS / "opengraph-minimal.json").read_text())
    assert result.nodes == len(raw["graph"]["nodes"]) and result.edges == len(raw["graph"]["edges"])
    nodes, edges = graph_rows(env)
    assert [(n[0], n[1], n[2]) for n in nodes] == [
        ("123", "BOB", "Person"),
        ("234", "ALICE", "Person"),
    ]
    assert edges == [("123", "Knows", "234")]
    assert json.loads(nodes[0][4]) == {"displayname": "bob", "property": "a", "name": "BOB"}


def test_source_kind_is_appended_to_every_node(env: Env) -> None:
    path = DOCS / "opengraph-ui-test-payload.json"
    raw = json.loads(path.read_text())
    ingest(env, path)
    nodes, edges = graph_rows(env)
    assert len(nodes) == len(raw["graph"]["nodes"]) and len(edges) == len(raw["graph"]["edges"])
    kinds = {n[0]: json.loads(n[3]) for n in nodes}
    assert kinds["EXAMPLE-ADMIN-1"] == ["Example_AdminAccount", "Example_HighValue", "Example"]
    assert all(k[-1] == "Example" for k in kinds.values())


def test_the_schema_documents_are_not_payloads(env: Env) -> None:
    with pytest.raises(IngestError, match=r"opengraph-node\.json.*unknown format"):
        ingest(env, DOCS / "opengraph-node.json")


def test_ids_are_upper_cased_and_nodes_merge_across_files(env: Env, tmp_path: Path) -> None:
    first = write(
        tmp_path,
        "a.json",
        {
            "graph": {
                "nodes": [
                    {
                        "id": "node-a",
                        "kinds": ["Thing"],
                        "properties": {"name": "A", "colour": "red"},
                    }
                ]
            }
        },
    )
    second = write(
        tmp_path,
        "b.json",
        {
            "graph": {
                "nodes": [{"id": "NODE-A", "kinds": ["Other"], "properties": {"size": 3}}],
                "edges": [
                    {"kind": "Self", "start": {"value": "node-a"}, "end": {"value": "Node-A"}}
                ],
            }
        },
    )
    result = ingest(env, first, second)
    assert result.nodes == 1 and result.edges == 1
    nodes, edges = graph_rows(env)
    assert nodes[0][:3] == ("NODE-A", "A", "Other")
    assert json.loads(nodes[0][3]) == ["Other", "Thing"]
    assert json.loads(nodes[0][4]) == {"name": "A", "colour": "red", "size": 3}
    assert edges == [("NODE-A", "Self", "NODE-A")]


def test_ingesting_twice_gives_the_same_graph_and_a_new_run(env: Env) -> None:
    path = DOCS / "opengraph-ui-test-payload.json"
    first, second = ingest(env, path), ingest(env, path)
    assert first.run_id != second.run_id and (first.nodes, first.edges) == (2 + 2, 2)
    assert env.run_in_transaction(graph.count_graph) == (4, 2)


def test_edges_may_match_by_name_property_and_stored_nodes(env: Env, tmp_path: Path) -> None:
    ingest(
        env,
        write(
            tmp_path,
            "base.json",
            {
                "graph": {
                    "nodes": [
                        {
                            "id": "s-1",
                            "kinds": ["User"],
                            "properties": {"name": "ALICE@X", "email": "a@x"},
                        },
                        {
                            "id": "s-2",
                            "kinds": ["Computer"],
                            "properties": {"name": "PC1", "asset": 7},
                        },
                        {
                            "id": "s-3",
                            "kinds": ["Computer"],
                            "properties": {"name": "PC2", "asset": "7", "managed": True},
                        },
                    ]
                }
            },
        ),
    )
    ingest(
        env,
        write(
            tmp_path,
            "edges.json",
            {
                "graph": {
                    "edges": [
                        {
                            "kind": "Uses",
                            "start": {"match_by": "name", "value": "alice@x"},
                            "end": {
                                "match_by": "property",
                                "property_matchers": [
                                    {"key": "asset", "operator": "equals", "value": 7}
                                ],
                                "kind": "Computer",
                            },
                        },
                        {
                            "kind": "Knows",
                            "start": {
                                "match_by": "property",
                                "property_matchers": [{"key": "email", "value": "a@x"}],
                            },
                            "end": {"value": "S-2"},
                        },
                        {
                            "kind": "Manages",
                            "start": {"value": "s-1"},
                            "end": {
                                "match_by": "property",
                                "property_matchers": [{"key": "managed", "value": True}],
                            },
                        },
                    ]
                }
            },
        ),
    )
    _, edges = graph_rows(env)
    # 7 matched the number, not the string "7"; true matched the boolean.
    assert edges == [("S-1", "Knows", "S-2"), ("S-1", "Manages", "S-3"), ("S-1", "Uses", "S-2")]


BAD_DOCUMENTS = [
    ("{not json", "not valid JSON", None),
    ("[1, 2]", "unknown format", None),
    ({"meta": {"type": "frobs"}, "data": []}, "unknown type 'frobs'", "meta.type"),
    ({"meta": "users", "data": []}, "must be an object with a string 'type'", "meta"),
    (
        {"meta": {"type": "users"}, "data": [{"Properties": {}}]},
        "'ObjectIdentifier' must be",
        "data[0]",
    ),
    ({"meta": {"type": "azure"}, "data": [{"data": {}}]}, "string 'kind'", "data[0]"),
    (
        {"meta": {"type": "azure"}, "data": [{"kind": "AZUser", "data": {"displayName": "x"}}]},
        "needs 'id'",
        "data[0]",
    ),
    ({"meta": {"type": "deleted"}, "data": [42]}, "object id string", "data[0]"),
    ('{"meta": {"type": "users"}, "data": [{"ObjectIdentifier": "S-1"', "not valid JSON", None),
    ({"graph": []}, "must be an object", "graph"),
    ({"graph": {}}, "needs 'nodes', 'edges' or both", "graph"),
    ({"graph": {"nodes": {}}}, "must be an array", "graph.nodes"),
    ({"graph": {"nodes": [{"kinds": ["A"]}]}}, "'id' must be", "graph.nodes[0]"),
    ({"graph": {"nodes": [{"id": "x", "kinds": "A"}]}}, "'kinds' must be", "graph.nodes[0]"),
    (
        {"graph": {"nodes": [{"id": "x", "kinds": ["A", "B", "C", "D"]}]}},
        "at most 3",
        "graph.nodes[0]",
    ),
    (
        {"graph": {"nodes": [{"id": "x", "kinds": ["A"], "properties": {"p": {"nested": 1}}}]}},
        "values must be",
        "graph.nodes[0].properties.p",
    ),
    (
        {"graph": {"nodes": [{"id": "x", "kinds": ["A"], "properties": {"p": [1, "a"]}}]}},
        "values must be",
        "graph.nodes[0].properties.p",
    ),
    (
        {"graph": {"nodes": [{"id": "x", "kinds": ["A"], "properties": {"objectid": "y"}}]}},
        "differs from the node id",
        "graph.nodes[0].properties",
    ),
    (
        {"metadata": {"source_kind": "A", "extra": 1}, "graph": {"nodes": []}},
        "unknown field",
        "metadata",
    ),
    (
        {
            "graph": {
                "edges": [{"kind": "Has-Dash", "start": {"value": "a"}, "end": {"value": "b"}}]
            }
        },
        "'kind' must match",
        "graph.edges[0]",
    ),
    (
        {"graph": {"edges": [{"kind": "K", "start": {"value": "a"}}]}},
        "must be an object",
        "graph.edges[0].end",
    ),
    (
        {
            "graph": {
                "edges": [
                    {
                        "kind": "K",
                        "start": {"value": "a", "match_by": "guess"},
                        "end": {"value": "b"},
                    }
                ]
            }
        },
        "'match_by' must be",
        "graph.edges[0].start",
    ),
    (
        {
            "graph": {
                "edges": [{"kind": "K", "start": {"match_by": "property"}, "end": {"value": "b"}}]
            }
        },
        "property_matchers",
        "graph.edges[0].start",
    ),
    (
        {
            "graph": {
                "nodes": [{"id": "a", "kinds": ["A"]}],
                "edges": [{"kind": "K", "start": {"value": "a"}, "end": {"value": "missing"}}],
            }
        },
        "no node with id 'missing'",
        "graph.edges[0].end",
    ),
    (
        {
            "graph": {
                "nodes": [{"id": "a", "kinds": ["A"]}, {"id": "b", "kinds": ["B"]}],
                "edges": [
                    {"kind": "K", "start": {"value": "a", "kind": "B"}, "end": {"value": "b"}}
                ],
            }
        },
        "no node of kind B",
        "graph.edges[0].start",
    ),
    (
        {
            "graph": {
                "nodes": [
                    {"id": "a", "kinds": ["A"], "properties": {"name": "same"}},
                    {"id": "b", "kinds": ["A"], "properties": {"name": "same"}},
                ],
                "edges": [
                    {
                        "kind": "K",
                        "start": {"value": "same", "match_by": "name"},
                        "end": {"value": "a"},
                    }
                ],
            }
        },
        "more than one node",
        "graph.edges[0].start",
    ),
]


@pytest.mark.parametrize(("document", "message", "element"), BAD_DOCUMENTS)
def test_bad_files_name_the_file_and_element_and_change_nothing(
    env: Env, tmp_path: Path, document: Any, message: str, element: str | None
) -> None:
    good = write(tmp_path, "good.json", {"graph": {"nodes": [{"id": "keep", "kinds": ["A"]}]}})
    bad = write(tmp_path, "bad.json", document)
    with pytest.raises(IngestError) as caught:
        ingest(env, good, bad)
    text = str(caught.value)
    assert text.startswith(str(bad)) and message in text
    if element:
        assert f": {element}: " in text
    assert env.run_in_transaction(graph.count_graph) == (0, 0)


def test_a_utf8_byte_order_mark_is_accepted(env: Env, tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(
        b"\xef\xbb\xbf" + json.dumps({"graph": {"nodes": [{"id": "x", "kinds": ["A"]}]}}).encode()
    )
    assert ingest(env, path).nodes == 1


def test_an_unreadable_or_non_utf8_file_is_named(env: Env, tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"graph": {"nodes": [{"id": "\xe9", "kinds": ["A"]}]}}')
    with pytest.raises(
        IngestError,
        match=r"latin1\.json: not valid JSON \(lexical error: invalid "
        r"bytes in UTF8 string\.\)",
    ):
        ingest(env, path)
    with pytest.raises(IngestError, match=r"absent\.json: no such file or folder"):
        ingest(env, tmp_path / "absent.json")
