"""NTLM relay (analysis/relay.py), on both stores, on the reference's NTLM integration
harnesses (the Go setups of cmd/api/src/test/integration/harnesses.go and the expectations
of packages/go/analysis/ad/ntlm_integration_test.go; SpecterOps/BloodHound, Apache-2.0),
extracted into tests/fixtures/bloodhound-ce/harnesses/ntlm/, loaded as in
tests/test_escalations.py.

One adjustment: the reference's LDAP and LDAPS tests pick the coercible computers
themselves, taking a computer whose `restrictoutboundntlm` was never set as unrestricted,
where its analysis (and graphsvc's) counts only a computer collected as unrestricted; the
harnesses' computers without the value are given `false`, which is what those tests mean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Env
from tests.test_ad_relationships import derived_edges
from tests.test_escalations import HARNESSES, graph_ids, load_variant

NTLM = HARNESSES / "ntlm"


@pytest.mark.parametrize("path", sorted(NTLM.glob("*.json")), ids=lambda p: p.stem)
def test_a_reference_ntlm_harness_gets_the_edges_its_test_expects(
    env: Env, tmp_path: Path, path: Path
) -> None:
    harness = json.loads(path.read_text())
    if "LDAP" in path.stem:
        for node in harness["nodes"]:
            if "Computer" in node["kinds"]:
                node["properties"].setdefault("restrictoutboundntlm", False)
    load_variant(env, tmp_path, harness)
    ids = graph_ids(harness)
    derived = derived_edges(env)
    for kind, expected in harness["expected"].items():
        found = {(s, e) for s, k, e in derived if k == kind}
        assert found == {(ids[s].upper(), ids[e].upper()) for s, e in expected["pairs"]}, kind


@pytest.mark.parametrize(
    ("node", "changes", "relayed"),
    [
        ("EnterpriseCA1", {}, True),
        ("EnterpriseCA1", {"hasvulnerableendpoint": False}, False),
        ("Computer", {"restrictoutboundntlm": True}, False),
        ("CertTemplate1", {"requiresmanagerapproval": True}, False),
        ("CertTemplate1", {"authenticationenabled": False}, False),
        ("CAHost", {"enabled": False}, False),
    ],
)
def test_relay_to_web_enrollment_needs_an_open_endpoint_and_a_coercible_enroller(
    env: Env, tmp_path: Path, node: str, changes: dict[str, bool], relayed: bool
) -> None:
    """NTLMCoerceAndRelayNTLMToADCS with one fact changed at a time."""
    harness = json.loads((NTLM / "NTLMCoerceAndRelayNTLMToADCS.json").read_text())
    next(n for n in harness["nodes"] if n["id"] == node)["properties"].update(changes)
    load_variant(env, tmp_path, harness)
    found = {(s, e) for s, k, e in derived_edges(env) if k == "CoerceAndRelayNTLMToADCS"}
    assert found == ({("AUTHENTICATED-USERS-S-1-5-11", "COMPUTER")} if relayed else set())
