"""The analysis's certificate-services chain and domain relationships (graphsvc.analysis), on
both stores, on the reference's own integration harnesses: the graphs and expectations of its
TrustedForNTAuthHarness, IssuedSignedByHarness, EnterpriseCAForHarness and
ADCSGoldenCertHarness (cmd/api/src/test/integration/harnesses.go, with the node defaults of
its test helpers), its HasTrustKeysHarness.json and ProtectAdminGroupsHarness.json
(cmd/api/src/test/integration/harnesses/) and the newest GoldenCert scenarios of
packages/go/analysis/ad/adcs_forest_integration_test.go (SpecterOps/BloodHound, Apache-2.0).
The facts (nodes, their properties, the edges and the edges expected) are the reference's;
the files are written here as OpenGraph documents, each node a kind and Base."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import FIXTURES, Env, ingest
from tests.test_ad_relationships import derived_edges

Node = tuple[str, str, dict[str, Any]]  # id, kind, properties
Edge = tuple[str, str, str]  # start, kind, end


def load(env: Env, folder: Path, nodes: list[Node], edges: list[Edge]) -> set[Edge]:
    """Ingest the graph as one run and answer the relationships its analysis derived."""
    folder.mkdir(parents=True, exist_ok=True)
    document = {
        "graph": {
            "nodes": [
                {"id": node_id, "kinds": [kind, "Base"], "properties": {"name": node_id, **props}}
                for node_id, kind, props in nodes
            ],
            "edges": [{"start": {"value": s}, "end": {"value": e}, "kind": k} for s, k, e in edges],
        }
    }
    (folder / "graph.json").write_text(json.dumps(document))
    ingest(env, folder)
    return derived_edges(env)


def of_kind(edges: set[Edge], kind: str) -> set[tuple[str, str]]:
    return {(s, e) for s, k, e in edges if k == kind}


def test_trusted_for_ntauth_issued_signed_by_and_enterprise_ca_for(
    env: Env, tmp_path: Path
) -> None:
    """The reference's three harnesses in one graph: their expectations are by kind, and no
    node of one feeds another's."""
    store = {"certthumbprints": ["a", "b", "c"], "domainsid": "S-1"}
    nodes: list[Node] = [
        ("DOMAIN", "Domain", {"domainsid": "S-1"}),
        ("NTAUTHSTORE", "NTAuthStore", store),
        ("ECA1", "EnterpriseCA", {"certthumbprint": "a"}),
        ("ECA2", "EnterpriseCA", {"certthumbprint": "b"}),
        ("ECA3", "EnterpriseCA", {}),
    ]
    found = load(env, tmp_path / "ntauth", nodes, [])
    assert of_kind(found, "TrustedForNTAuth") == {("ECA1", "NTAUTHSTORE"), ("ECA2", "NTAUTHSTORE")}

    chain = {
        "ROOTCA1": ("RootCA", "a", ["a"]),
        "ROOTCA2": ("RootCA", "b", ["b", "a"]),
        "ECA1": ("EnterpriseCA", "c", ["c", "b", "a"]),
        "ECA2": ("EnterpriseCA", "d", ["d", "c", "b", "a"]),
        "ECA3": ("EnterpriseCA", "e", ["e"]),
        "AIACA1_1": ("AIACA", "a", ["a"]),
        "AIACA1_2": ("AIACA", "b", ["b", "a"]),
        "AIACA2_1": ("AIACA", "c", ["c", "b", "a"]),
        "AIACA2_2": ("AIACA", "d", ["d", "c", "b", "a"]),
        "AIACA2_3": ("AIACA", "e", ["e"]),
    }
    nodes = [(n, k, {"certthumbprint": t, "certchain": c}) for n, (k, t, c) in chain.items()]
    found = load(env, tmp_path / "issued", nodes, [])
    assert of_kind(found, "IssuedSignedBy") == {
        ("ECA2", "ECA1"), ("ECA2", "AIACA2_1"), ("ECA1", "ROOTCA2"), ("ECA1", "AIACA1_2"),
        ("ROOTCA2", "ROOTCA1"), ("ROOTCA2", "AIACA1_1"), ("AIACA2_2", "ECA1"),
        ("AIACA2_2", "AIACA2_1"), ("AIACA2_1", "ROOTCA2"), ("AIACA2_1", "AIACA1_2"),
        ("AIACA1_2", "ROOTCA1"), ("AIACA1_2", "AIACA1_1"),
    }  # fmt: skip


def test_enterprise_ca_for(env: Env, tmp_path: Path) -> None:
    chain = {
        "ROOTCA1": ("RootCA", "a", ["a"]),
        "ROOTCA2": ("RootCA", "b", ["b"]),
        "ECA1": ("EnterpriseCA", "a", ["a"]),
        "ECA2": ("EnterpriseCA", "c", ["c", "a"]),
        "AIACA1_1": ("AIACA", "a", ["a"]),
        "AIACA1_2": ("AIACA", "b", ["b"]),
        "AIACA2_1": ("AIACA", "c", ["c", "a"]),
    }
    nodes = [(n, k, {"certthumbprint": t, "certchain": c}) for n, (k, t, c) in chain.items()]
    found = load(env, tmp_path / "for", nodes, [])
    assert of_kind(found, "EnterpriseCAFor") == {
        ("ECA1", "ROOTCA1"),
        ("ECA1", "AIACA1_1"),
        ("ECA2", "AIACA2_1"),
    }


def golden_cert_graph() -> tuple[list[Node], list[Edge]]:
    """ADCSGoldenCertHarness: Domain1 and Domain3 chained (an EnterpriseCAFor and an
    IssuedSignedBy to their root), Domain2's three CAs each missing half of the chain. The
    hosts are enabled: the reference's old test skipped its hosting check."""
    nodes: list[Node] = []
    edges: list[Edge] = []
    host = {"enabled": True}
    for n in (1, 2, 3):
        nodes += [
            (f"DOMAIN{n}", "Domain", {"domainsid": f"S-{n}"}),
            (f"NTAUTHSTORE{n}", "NTAuthStore", {"domainsid": f"S-{n}"}),
            (f"ROOTCA{n}", "RootCA", {"domainsid": f"S-{n}"}),
        ]
        edges += [
            (f"NTAUTHSTORE{n}", "NTAuthStoreFor", f"DOMAIN{n}"),
            (f"ROOTCA{n}", "RootCAFor", f"DOMAIN{n}"),
        ]
    for ca, computer in (("ECA1", "COMPUTER1"), ("ECA3", "COMPUTER3"), ("ECA21", "COMPUTER21"),
                         ("ECA22", "COMPUTER22"), ("ECA23", "COMPUTER23")):  # fmt: skip
        nodes += [(ca, "EnterpriseCA", {}), (computer, "Computer", host)]
        edges.append((computer, "HostsCAService", ca))
    edges += [
        ("ECA1", "TrustedForNTAuth", "NTAUTHSTORE1"),
        ("ECA1", "EnterpriseCAFor", "ROOTCA1"),
        ("ECA3", "TrustedForNTAuth", "NTAUTHSTORE3"),
        ("ECA3", "IssuedSignedBy", "ROOTCA3"),
        ("ECA23", "TrustedForNTAuth", "NTAUTHSTORE2"),
        ("ECA21", "EnterpriseCAFor", "ROOTCA2"),
        ("ECA22", "IssuedSignedBy", "ROOTCA2"),
    ]
    return nodes, edges


def chain_from_properties(nodes: list[Node], edges: list[Edge]) -> list[Node]:
    """The harness's chain edges as the properties the analysis derives them from: each
    CA's own thumbprint, an NTAuth store's trusted thumbprints, a CA's issuer."""
    props = {node_id: dict(p) for node_id, _, p in nodes}
    for node_id in props:
        props[node_id].setdefault("certthumbprint", f"T-{node_id}")
    for start, kind, end in edges:  # first the thumbprints a CA shares with its root
        if kind == "EnterpriseCAFor":
            props[start]["certthumbprint"] = props[end]["certthumbprint"]
    for start, kind, end in edges:
        thumbprint, issuer = props[start]["certthumbprint"], props[end]["certthumbprint"]
        if kind == "TrustedForNTAuth":
            props[end].setdefault("certthumbprints", []).append(thumbprint)
        elif kind == "IssuedSignedBy":
            props[start]["certchain"] = [thumbprint, issuer]
    return [(node_id, kind, props[node_id]) for node_id, kind, _ in nodes]


CHAIN_EDGES = ("TrustedForNTAuth", "IssuedSignedBy", "EnterpriseCAFor")


def test_golden_cert_from_the_hosts_of_chained_cas(env: Env, tmp_path: Path) -> None:
    nodes, edges = golden_cert_graph()
    collected = [e for e in edges if e[1] not in CHAIN_EDGES]
    found = load(env, tmp_path / "golden", chain_from_properties(nodes, edges), collected)
    # The chain the properties give holds the harness's (and more: a CA that shares its
    # root's certificate, ECA21, is an issuer of what the root issued, as in the reference).
    for kind in CHAIN_EDGES:
        assert of_kind(found, kind) >= {(s, e) for s, k, e in edges if k == kind}, kind
    assert of_kind(found, "GoldenCert") == {("COMPUTER1", "DOMAIN1"), ("COMPUTER3", "DOMAIN3")}


def test_golden_cert_needs_an_enabled_host_an_exact_ntauth_path_and_a_rooted_chain(
    env: Env, tmp_path: Path
) -> None:
    """The reference's newest scenarios: a disabled host neither qualifies its CA nor gets
    the edge; the NTAuth path is CA -> NTAuthStore -> domain exactly (not the CA's own
    NTAuthStoreFor, not through a user); the chain ends at a root CA for the domain
    through CAs (not a CA's own RootCAFor, not through a user)."""
    nodes: list[Node] = [
        ("DOMAIN", "Domain", {"domainsid": "S-1"}),
        ("NTAUTH", "NTAuthStore", {}),
        ("ROOT", "RootCA", {}),
        ("USER", "User", {}),
        ("VALIDHOST", "Computer", {"enabled": True}),
        ("DISABLEDHOST", "Computer", {"enabled": False}),
        ("NOFLAGHOST", "Computer", {}),
    ]
    edges: list[Edge] = [
        ("NTAUTH", "NTAuthStoreFor", "DOMAIN"),
        ("ROOT", "RootCAFor", "DOMAIN"),
        ("VALIDHOST", "HostsCAService", "VALID"),
        ("DISABLEDHOST", "HostsCAService", "VALID"),
        ("NOFLAGHOST", "HostsCAService", "VALID"),
        ("VALID", "TrustedForNTAuth", "NTAUTH"),
        ("VALID", "IssuedSignedBy", "ROOT"),
    ]
    nodes.append(("VALID", "EnterpriseCA", {}))
    # Each CA below is hosted by an enabled computer and lacks one part of the pattern.
    cases = {
        "OWNNTAUTH": [
            ("OWNNTAUTH", "NTAuthStoreFor", "DOMAIN"),
            ("OWNNTAUTH", "IssuedSignedBy", "ROOT"),
        ],
        "OWNROOT": [("OWNROOT", "TrustedForNTAuth", "NTAUTH"), ("OWNROOT", "RootCAFor", "DOMAIN")],
        "VIAUSER": [
            ("VIAUSER", "TrustedForNTAuth", "NTAUTH"),
            ("VIAUSER", "IssuedSignedBy", "USER"),
            ("USER", "EnterpriseCAFor", "ROOT"),
        ],
        "UNHOSTED": [
            ("UNHOSTED", "TrustedForNTAuth", "NTAUTH"),
            ("UNHOSTED", "IssuedSignedBy", "ROOT"),
        ],
        "OFFHOST": [
            ("OFFHOST", "TrustedForNTAuth", "NTAUTH"),
            ("OFFHOST", "IssuedSignedBy", "ROOT"),
        ],
    }
    for ca, parts in cases.items():
        nodes.append((ca, "EnterpriseCA", {}))
        edges += parts
        if ca not in ("UNHOSTED", "OFFHOST"):
            nodes.append((f"{ca}HOST", "Computer", {"enabled": True}))
            edges.append((f"{ca}HOST", "HostsCAService", ca))
    nodes.append(("OFFHOSTHOST", "Computer", {"enabled": False}))
    edges.append(("OFFHOSTHOST", "HostsCAService", "OFFHOST"))
    collected = [e for e in edges if e[1] not in CHAIN_EDGES or "USER" in (e[0], e[2])]
    chained = [e for e in edges if e[1] in CHAIN_EDGES and "USER" not in (e[0], e[2])]
    found = load(env, tmp_path / "newest", chain_from_properties(nodes, chained), collected)
    assert of_kind(found, "GoldenCert") == {("VALIDHOST", "DOMAIN")}


def test_extended_by_policy_links_a_template_to_its_domains_policies(
    env: Env, tmp_path: Path
) -> None:
    """No harness in the reference: the rule's cases, written from it."""
    nodes: list[Node] = [
        ("T1", "CertTemplate", {"certificatepolicy": ["1.2.3"], "domainsid": "S-1"}),
        ("T2", "CertTemplate", {"domainsid": "S-1"}),
        ("T3", "CertTemplate", {"certificatepolicy": ["1.2.3"]}),
        ("P1", "IssuancePolicy", {"certtemplateoid": "1.2.3", "domainsid": "S-1"}),
        ("P2", "IssuancePolicy", {"certtemplateoid": "1.2.3", "domainsid": "S-2"}),
        ("P3", "IssuancePolicy", {"domainsid": "S-1"}),
    ]
    found = load(env, tmp_path / "policy", nodes, [])
    assert of_kind(found, "ExtendedByPolicy") == {("T1", "P1")}


def test_has_trust_keys_and_protect_admin_groups(env: Env, tmp_path: Path) -> None:
    """HasTrustKeysHarness.json and ProtectAdminGroupsHarness.json."""
    nodes: list[Node] = [
        ("DOMAIN1", "Domain", {"netbios": "DOMAIN1", "domainsid": "S1"}),
        ("DOMAIN2", "Domain", {"domainsid": "S2"}),
        ("USER1", "User", {"samaccountname": "DOMAIN1$", "domainsid": "S2"}),
        ("DOMAIN3", "Domain", {"netbios": "DOMAIN3", "domainsid": "S3"}),
        ("DOMAIN4", "Domain", {"domainsid": "S4"}),
        ("USER2", "User", {"samaccountname": "DOMAIN3$", "domainsid": "S4"}),
        ("ADMINSDHOLDER1", "Container",
         {"distinguishedname": "CN=ADMINSDHOLDER,CN=SYSTEM,DC=CONTOSO,DC=COM", "domainsid": "S1"}),
        ("ADMINSDHOLDER3", "Container",
         {"distinguishedname": "CN=ADMINSDHOLDER,CN=SYSTEM,DC=PLATAPUS,DC=COM", "domainsid": "S3"}),
        ("PUSER1", "User", {"domainsid": "S1", "adminsdholderprotected": True}),
        ("PGROUP1", "Group", {"domainsid": "S1", "adminsdholderprotected": True}),
        ("PCOMPUTER1", "Computer", {"domainsid": "S1", "adminsdholderprotected": True}),
        ("PUSER2", "User", {"domainsid": "S1", "adminsdholderprotected": False}),
        ("PUSER4", "User", {"domainsid": "S1"}),
        ("PGPO1", "GPO", {"domainsid": "S1", "adminsdholderprotected": True}),
        ("PUSER3", "User", {"domainsid": "S3", "adminsdholderprotected": True}),
    ]  # fmt: skip
    edges: list[Edge] = [
        ("DOMAIN1", "CrossForestTrust", "DOMAIN2"),
        ("DOMAIN3", "SameForestTrust", "DOMAIN4"),
    ]
    found = load(env, tmp_path / "domains", nodes, edges)
    assert of_kind(found, "HasTrustKeys") == {("DOMAIN1", "USER1"), ("DOMAIN3", "USER2")}
    assert of_kind(found, "ProtectAdminGroups") == {
        ("ADMINSDHOLDER1", "PUSER1"),
        ("ADMINSDHOLDER1", "PGROUP1"),
        ("ADMINSDHOLDER1", "PCOMPUTER1"),
        ("ADMINSDHOLDER3", "PUSER3"),
    }


ANALYSED = (
    FIXTURES / "bloodhound-ce" / "graphify" / "Version6ADCSJSON" / "analysis" / "derived-edges.json"
)
# The kinds graphsvc derives today; the reference's analysed graph of the collection has
# others too (EnrollOnBehalfOf, AdminTo, ADCSESC1), not derived yet.
DERIVED_KINDS = {
    "DCSync", "SyncLAPSPassword", "TrustedForNTAuth", "IssuedSignedBy", "EnterpriseCAFor",
    "ExtendedByPolicy", "GoldenCert", "HasTrustKeys", "ProtectAdminGroups", "Owns",
    "WriteOwner", "EnrollOnBehalfOf", "ADCSESC1", "ADCSESC3", "ADCSESC4", "ADCSESC6a",
    "ADCSESC6b", "ADCSESC9a", "ADCSESC9b", "ADCSESC10a", "ADCSESC10b", "ADCSESC13",
    "ADCSESC16", "CoerceAndRelayNTLMToSMB", "CoerceAndRelayNTLMToLDAP",
    "CoerceAndRelayNTLMToLDAPS", "CoerceAndRelayNTLMToADCS", "AdminTo", "CanRDP",
    "CanPSRemote", "ExecuteDCOM",
}  # fmt: skip


def test_the_adcs_collection_gets_the_references_analysed_edges(env: Env) -> None:
    """The reference's own analysis of its ADCS collection (its graphify golden file,
    extracted: tests/fixtures/bloodhound-ce/README.md): every relationship of the kinds
    graphsvc derives, and no other of those kinds."""
    expected = json.loads(ANALYSED.read_text())
    wanted = {tuple(e) for e in expected["derived"] if e[1] in DERIVED_KINDS}
    assert {k for _, k, _ in wanted} == {
        "DCSync", "EnterpriseCAFor", "GoldenCert", "TrustedForNTAuth", "Owns", "WriteOwner",
        "EnrollOnBehalfOf", "ADCSESC1", "AdminTo",
    }  # fmt: skip
    assert len([e for e in wanted if e[1] == "Owns"]) == 315
    ingest(env, FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "all" / "adcs.zip")
    assert derived_edges(env) == wanted
