"""AdminTo, CanPSRemote, ExecuteDCOM and CanRDP from the computers' local groups
(analysis/local_groups.py), on both stores: the reference's RDP harnesses (extracted into
tests/fixtures/bloodhound-ce/harnesses/localgroups/, README there) with Citrix support on and
off, and the local groups of the reference's ADCS collection against its analysed graph."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graphsvc.ingest.run import ingest_files
from tests.conftest import FIXTURES, Env
from tests.test_ad_relationships import derived_edges, put_analysis, stored_edges
from tests.test_escalations import HARNESSES

LOCAL_GROUPS = HARNESSES / "localgroups"
ADCS = FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "all" / "adcs.zip"
V6 = FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "ingest"
ANALYSED = FIXTURES / "bloodhound-ce" / "graphify" / "Version6ADCSJSON" / "analysis"


def opengraph(harness: dict[str, Any], rdu_holds_the_right: bool) -> dict[str, Any]:
    edges = [tuple(edge) for edge in harness["edges"]]
    if rdu_holds_the_right:
        computer = next(n["id"] for n in harness["nodes"] if "Computer" in n["kinds"])
        rdu = next(n["id"] for n in harness["nodes"] if n["id"].endswith("-555"))
        edges.append((rdu, "RemoteInteractiveLogonRight", computer))
    return {
        "graph": {
            "nodes": [
                {"id": n["id"], "kinds": [*n["kinds"], "Base"], "properties": n["properties"]}
                for n in harness["nodes"]
            ],
            "edges": [{"start": {"value": s}, "end": {"value": e}, "kind": k} for s, k, e in edges],
        }
    }


def variants() -> list[Any]:
    return [
        pytest.param(path, i, id=f"{path.stem}-{i}")
        for path in sorted(LOCAL_GROUPS.glob("*.json"))
        for i in range(len(json.loads(path.read_text())["variants"]))
    ]


@pytest.mark.parametrize(("path", "step"), variants())
def test_a_reference_rdp_harness_gets_the_can_rdp_its_test_expects(
    env: Env, tmp_path: Path, path: Path, step: int
) -> None:
    harness = json.loads(path.read_text())
    variant = harness["variants"][step]
    (tmp_path / "graph.json").write_text(
        json.dumps(opengraph(harness, variant["remote_desktop_users_hold_the_right"]))
    )
    env.run_in_transaction(
        lambda conn: ingest_files(
            conn, [tmp_path / "graph.json"], citrix_rdp_support=variant["citrix"]
        )
    )
    found = {s for s, k, _ in derived_edges(env) if k == "CanRDP"}
    assert found == {oid.upper() for oid in variant["can_rdp"]}, variant["test"]


def test_without_citrix_support_direct_access_users_change_nothing(
    env: Env, tmp_path: Path
) -> None:
    """The Citrix harness analysed without the setting: its Direct Access Users group is
    ignored, and CanRDP is the user-rights rule's, as on the harness without the group."""
    harness = json.loads((LOCAL_GROUPS / "RDPHarnessWithCitrix.json").read_text())
    (tmp_path / "graph.json").write_text(json.dumps(opengraph(harness, False)))
    env.run_in_transaction(lambda conn: ingest_files(conn, [tmp_path / "graph.json"]))
    found = {s for s, k, _ in derived_edges(env) if k == "CanRDP"}
    plain = json.loads((LOCAL_GROUPS / "RDPHarness.json").read_text())["variants"][0]
    assert found == {oid.upper() for oid in plain["can_rdp"]}


def test_the_adcs_collections_local_groups_as_the_reference_keeps_and_analyses_them(
    env: Env,
) -> None:
    """The DC's BUILTIN groups with members are ADLocalGroup nodes LocalToComputer the DC,
    their members MemberOfLocalGroup them (7 and 12, as the reference's ingested graph);
    AdminTo from the direct members of Administrators (3); no CanRDP (its Remote Desktop
    Users group is empty)."""
    env.run_in_transaction(lambda conn: ingest_files(conn, [ADCS]))
    reference = json.loads((ANALYSED / "derived-edges.json").read_text())
    counts = Counter(k for _, k, _ in stored_edges(env))
    for kind in ("LocalToComputer", "MemberOfLocalGroup", "RemoteInteractiveLogonRight"):
        assert counts[kind] == reference["edge_counts"][kind], kind
    derived = derived_edges(env)
    admins = {(s, e) for s, k, e in derived if k == "AdminTo"}
    expected = {(s, e) for s, k, e in reference["derived"] if k == "AdminTo"}
    assert admins == expected and len(admins) == reference["edge_counts"]["AdminTo"] == 3
    assert not any(k == "CanRDP" for _, k, _ in derived)


def test_a_member_servers_local_groups_are_nodes_of_their_own(env: Env) -> None:
    """WIN10 of the reference's TESTLAB collection: its groups are ADLocalGroup nodes named
    as SharpHound names them; Domain Users, the one member of Remote Desktop Users and the
    holder of the logon right, gets CanRDP; each direct member of Administrators AdminTo."""
    env.run_in_transaction(lambda conn: ingest_files(conn, [V6]))
    win10 = "S-1-5-21-3130019616-2776909439-2417379446-1104"
    found = env.get(f"/api/v2/search?q={win10}-555").json()["data"]
    assert [(g["type"], g["name"]) for g in found] == [
        ("ADLocalGroup", "REMOTE DESKTOP USERS@WIN10.TESTLAB.LOCAL")
    ]
    edges = stored_edges(env)
    assert (f"{win10}-555", "LocalToComputer", win10) in edges
    assert (
        "S-1-5-21-3130019616-2776909439-2417379446-513",
        "MemberOfLocalGroup",
        f"{win10}-555",
    ) in edges
    derived = derived_edges(env)
    local = {"AdminTo", "CanRDP", "CanPSRemote", "ExecuteDCOM"}
    assert {(s, k) for s, k, e in derived if e == win10 and k in local} == {
        ("S-1-5-21-3130019616-2776909439-2417379446-513", "CanRDP"),
        ("S-1-5-21-3130019616-2776909439-2417379446-512", "AdminTo"),
        ("S-1-5-21-3130019616-2776909439-2417379446-1105", "AdminTo"),
        ("S-1-5-21-3130019616-2776909439-2417379446-1105", "CanPSRemote"),
        ("TESTLAB.LOCAL-S-1-1-0", "ExecuteDCOM"),
    }


def test_the_setting_reaches_an_analysis_asked_for(
    make_env: Callable[..., Env], tmp_path: Path
) -> None:
    """GRAPHSVC_CITRIX_RDP_SUPPORT as a server reads it: `PUT /api/v2/analysis` analyses
    the Citrix harness again with it, and CanRDP becomes the Citrix rule's."""
    env = make_env(citrix_rdp_support=True)
    env.create_admin()
    harness = json.loads((LOCAL_GROUPS / "RDPHarnessWithCitrix.json").read_text())
    (tmp_path / "graph.json").write_text(json.dumps(opengraph(harness, False)))
    env.run_in_transaction(lambda conn: ingest_files(conn, [tmp_path / "graph.json"]))
    plain = json.loads((LOCAL_GROUPS / "RDPHarness.json").read_text())["variants"][0]
    found = {s for s, k, _ in derived_edges(env) if k == "CanRDP"}
    assert found == {oid.upper() for oid in plain["can_rdp"]}
    assert put_analysis(env).status_code == 202
    found = {s for s, k, _ in derived_edges(env) if k == "CanRDP"}
    assert found == {oid.upper() for oid in harness["variants"][0]["can_rdp"]}
