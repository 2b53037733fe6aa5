"""Certificate-services escalations (analysis/escalations.py), on both stores, on the
reference's own integration harnesses: their graphs (the Go setups of
cmd/api/src/test/integration/harnesses.go, or the arrows diagrams some load) and the start
nodes its tests expect of each edge (packages/go/analysis/ad/adcs_integration_test.go),
extracted into tests/fixtures/bloodhound-ce/harnesses/ (README there: provenance, licence,
format).

Each harness is loaded as an OpenGraph document and the whole analysis runs, as after an
ingest. Two adjustments, both the reference's own newer rules rather than changes to its
data: an enterprise CA with no hosting computer gets an enabled one (the newest analysis
skips a CA no running computer hosts, and newer harness setups add one; the older setups
extracted predate it), and registry values the Go setups write as numeric strings ("31")
are numbers, as a collector reports them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graphsvc.analysis.escalations import Rules
from graphsvc.analysis.pki import read_public_key_services
from tests.conftest import FIXTURES, Env, ingest
from tests.test_ad_relationships import derived_edges

HARNESSES = FIXTURES / "bloodhound-ce" / "harnesses"
REGISTRY_KEYS = ("certificatemappingmethodsraw", "strongcertificatebindingenforcementraw")


def harness_files() -> list[Path]:
    return sorted(p for p in HARNESSES.glob("*.json") if json.loads(p.read_text())["expected"])


# Authenticated Users, Everyone, Protected Users, Domain Admins, Enterprise Admins
WELL_KNOWN_SUFFIXES = ("-S-1-5-11", "-S-1-1-0", "-525", "-512", "-519")


def graph_ids(harness: dict[str, Any]) -> dict[str, str]:
    """Each node's id in the graph: its name, but for the well-known groups, which the
    analysis knows by their object ids (the harness sets them)."""
    ids = {}
    for node in harness["nodes"]:
        object_id = node["properties"].get("objectid")
        special = isinstance(object_id, str) and object_id.upper().endswith(WELL_KNOWN_SUFFIXES)
        ids[node["id"]] = object_id if special else node["id"]
    return ids


def opengraph(harness: dict[str, Any]) -> dict[str, Any]:
    ids = graph_ids(harness)
    nodes = [{**node, "id": ids[node["id"]]} for node in harness["nodes"]]
    edges = [(ids[s], k, ids[e]) for s, k, e in harness["edges"]]
    hosted = {e for _, kind, e in edges if kind == "HostsCAService"}
    extra_nodes, extra_edges = [], []
    for node in nodes:
        if "EnterpriseCA" in node["kinds"] and node["id"] not in hosted:
            host = f"{node['id']}Host"
            extra_nodes.append({"id": host, "kinds": ["Computer"], "properties": {"enabled": True}})
            extra_edges.append((host, "HostsCAService", node["id"]))
    return {
        "graph": {
            "nodes": [
                {
                    "id": node["id"],
                    "kinds": [*(k for k in node["kinds"] if k != "Base"), "Base"],
                    "properties": {"name": node["id"], **properties(node["properties"])},
                }
                for node in [*nodes, *extra_nodes]
            ],
            "edges": [
                {"start": {"value": s}, "end": {"value": e}, "kind": k}
                for s, k, e in [*edges, *extra_edges]
            ],
        }
    }


def properties(found: dict[str, Any]) -> dict[str, Any]:
    # A Go nil slice is extracted as null: the property is absent.
    kept = {k: v for k, v in found.items() if k != "objectid" and v is not None}
    for key in REGISTRY_KEYS:
        value = kept.get(key)
        if isinstance(value, str) and value.lstrip("-").isdigit():
            kept[key] = int(value)
    return kept


@pytest.mark.parametrize("path", harness_files(), ids=lambda p: p.stem)
def test_a_reference_harness_gets_the_edges_its_test_expects(
    env: Env, tmp_path: Path, path: Path
) -> None:
    harness = json.loads(path.read_text())
    folder = tmp_path / "harness"
    folder.mkdir()
    (folder / "graph.json").write_text(json.dumps(opengraph(harness)))
    ingest(env, folder)
    derived = derived_edges(env)
    ids = graph_ids(harness)

    def graph_id(name: str) -> str:
        return ids.get(name, name).upper()  # OpenGraph ids are upper-cased

    agents = [(graph_id(s), graph_id(e)) for s, k, e in harness["edges"] if k == "EnrollOnBehalfOf"]
    for kind, expected in harness["expected"].items():
        starts = {s for s, k, _ in derived if k == kind}
        if kind == "ADCSESC3" and agents:
            # The harness states EnrollOnBehalfOf and its test runs ESC3 alone over them (the
            # whole analysis also derives EnrollOnBehalfOf from the templates' EKUs).
            starts = env.run_in_transaction(lambda conn: esc3_alone(conn, agents))
        wanted = {graph_id(s) for s in expected["starts"]}
        if expected.get("exact", True):
            assert starts == wanted, kind
        else:
            assert wanted <= starts, kind
        assert not starts & {graph_id(s) for s in expected.get("absent_starts", [])}, kind
        if expected.get("ends"):
            ends = {e for _, k, e in derived if k == kind}
            assert ends <= {graph_id(e) for e in expected["ends"]}, kind


async def esc3_alone(conn, agents: list[tuple[str, str]]) -> set[str]:  # type: ignore[no-untyped-def]
    pki = await read_public_key_services(conn)
    by_target: dict[str, set[str]] = {}
    for start, end in agents:
        by_target.setdefault(end, set()).add(start)
    rules = Rules(conn, pki, by_target)
    found: set[str] = set()
    for ca in pki.chained:
        for template in pki.published.get(ca, []):
            found |= await rules.esc3(ca, template)
    return found


@pytest.mark.parametrize("signatures", [1, 2])
def test_an_agent_enrolls_on_behalf_of_a_schema_2_template_needing_exactly_one_signature(
    env: Env, tmp_path: Path, signatures: int
) -> None:
    """EnrollOnBehalfOfHarness2 with its target template needing one signature (the
    harness) or two: an agent's signature is one; with two needed it does not suffice."""
    harness = json.loads((HARNESSES / "enrollonbehalfof-2.json").read_text())
    for node in harness["nodes"]:
        if node["id"] == "CertTemplate23":
            node["properties"]["authorizedsignatures"] = signatures
    folder = tmp_path / "harness"
    folder.mkdir()
    (folder / "graph.json").write_text(json.dumps(opengraph(harness)))
    ingest(env, folder)
    found = {(s, e) for s, k, e in derived_edges(env) if k == "EnrollOnBehalfOf"}
    assert found == ({("CERTTEMPLATE21", "CERTTEMPLATE23")} if signatures == 1 else set())


def load_variant(env: Env, tmp_path: Path, harness: dict[str, Any]) -> set[tuple[str, str, str]]:
    folder = tmp_path / "variant"
    folder.mkdir()
    (folder / "graph.json").write_text(json.dumps(opengraph(harness)))
    ingest(env, folder)
    return derived_edges(env)


def node_of(harness: dict[str, Any], node_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(n for n in harness["nodes"] if n["id"] == node_id)
    return found


ESC16_VARIANTS = {
    "as is": ({}, {}, True),
    "the extension not disabled": ({"disabledextensions": []}, {}, False),
    "disabled extensions not collected": ({"disabledextensionscollected": False}, {}, False),
    "the SAN flag not collected": ({"isuserspecifiessanenabledcollected": False}, {}, False),
    "the SAN flag off": ({"isuserspecifiessanenabled": False}, {}, False),
    "schema 2, no signature": ({}, {"schemaversion": 2, "authorizedsignatures": 0}, True),
    "schema 2, a signature": ({}, {"schemaversion": 2, "authorizedsignatures": 1}, False),
    "manager approval": ({}, {"requiresmanagerapproval": True}, False),
}


@pytest.mark.parametrize("variant", ESC16_VARIANTS)
def test_esc16_as_the_references_integration_test_varies_its_harness(
    env: Env, tmp_path: Path, variant: str
) -> None:
    """ADCSESC16Harness and the changes the reference's esc16_integration_test.go makes to it
    (the CA's flags, the template's schema and signatures), each with the edge it expects."""
    harness = json.loads((HARNESSES / "ADCSESC16Harness.json").read_text())
    ca_changes, template_changes, expected = ESC16_VARIANTS[variant]
    node_of(harness, "EnterpriseCA1")["properties"].update(ca_changes)
    node_of(harness, "CertTemplate1")["properties"].update(template_changes)
    found = {(s, e) for s, k, e in load_variant(env, tmp_path, harness) if k == "ADCSESC16"}
    assert found == ({("GROUP1", "DOMAIN1")} if expected else set())


@pytest.mark.parametrize("account", ["plain", "gmsa", "msa"])
def test_esc16_to_a_template_requiring_a_dns_name_leaves_out_plain_users(
    env: Env, tmp_path: Path, account: str
) -> None:
    harness = json.loads((HARNESSES / "ADCSESC16Harness.json").read_text())
    node_of(harness, "CertTemplate1")["properties"]["subjectaltrequiredns"] = True
    attacker = node_of(harness, "Group1")
    attacker["kinds"] = ["User"]
    if account != "plain":
        attacker["properties"][account] = True
    found = {(s, e) for s, k, e in load_variant(env, tmp_path, harness) if k == "ADCSESC16"}
    assert found == (set() if account == "plain" else {("GROUP1", "DOMAIN1")})


def test_esc9a_victims_are_the_cas_enrollers_when_everyone_enrolls_on_the_template(
    env: Env, tmp_path: Path
) -> None:
    """ESC9aHarnessAuthUsers turned around: Authenticated Users enrolls on the template, and
    a group of two users (one of them no template enroller) on the CA: both users are
    victims, so whoever controls either escalates."""
    harness = json.loads((HARNESSES / "ESC9aHarnessAuthUsers.json").read_text())
    harness["edges"] = [e for e in harness["edges"] if e != ["Group0", "Enroll", "EnterpriseCA"]]
    harness["nodes"] += [
        {"id": "Group6", "kinds": ["Group"], "properties": {}},
        {"id": "User5", "kinds": ["User"], "properties": {}},
        {"id": "Group5", "kinds": ["Group"], "properties": {}},
    ]
    harness["edges"] += [
        ["Group0", "Enroll", "CertTemplate1"],
        ["Group6", "Enroll", "EnterpriseCA"],
        ["User4", "MemberOf", "Group6"],
        ["User5", "MemberOf", "Group6"],
        ["Group5", "GenericAll", "User5"],
    ]
    found = {s for s, k, _ in load_variant(env, tmp_path, harness) if k == "ADCSESC9a"}
    assert found == {"GROUP4", "GROUP5"}


def test_a_domains_escalations_and_a_cas_place_in_the_pki(env: Env, tmp_path: Path) -> None:
    """`domains/{id}/adcs-escalations` lists who reaches the domain through GoldenCert or
    an ESC edge; `enterprisecas/{id}/pki-hierarchy` the CA's hosts below it and its chain,
    stores and domain above it (ADCSESC1HarnessAuthUsers, hosted as above)."""
    harness = json.loads((HARNESSES / "adcsesc1-authusers.json").read_text())
    load_variant(env, tmp_path, harness)
    escalations = env.get("/api/v2/domains/DOMAIN/adcs-escalations?limit=100").json()
    assert [e["objectID"] for e in escalations["data"]] == ["ENTERPRISECAHOST", "GROUP1"]
    assert escalations["count"] == 2
    assert env.get("/api/v2/domains/DOMAIN").json()["data"]["adcs-escalations"] == 2
    hierarchy = env.get("/api/v2/enterprisecas/ENTERPRISECA/pki-hierarchy?limit=100").json()
    chain = {"ROOTCA", "AUTHSTORE", "DOMAIN", "ENTERPRISECAHOST"}
    assert {e["objectID"] for e in hierarchy["data"]} == chain
    below = env.get("/api/v2/rootcas/ROOTCA/pki-hierarchy?limit=100").json()
    assert {e["objectID"] for e in below["data"]} == {"ENTERPRISECA", "ENTERPRISECAHOST"}
