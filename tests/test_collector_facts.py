"""What SharpHound reports outside an object's Properties, kept as the reference's properties
(ingest/facts.py): on records written here block by block, on a newer collection of the same
objects, and on the real ADCS fixture, on both stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from graphsvc.store import graph
from tests.conftest import FIXTURES, Env, ingest
from tests.test_cypher import post

SID = "S-1-5-21-7-7-7"
RELAY = f"{SID}-1001"  # a computer every block was collected on
SILENT = f"{SID}-1002"  # a computer whose blocks failed or are missing
CA = "0A1B2C3D-0000-0000-0000-00000000CA01"
REFERENCE_FACTS = (
    FIXTURES / "bloodhound-ce" / "graphify" / "Version6ADCSJSON" / "ingest" / "node-facts.json"
)
FACT_KEYS = {
    "smbsigning", "webclientrunning", "restrictoutboundntlm", "restrictreceivingntmltraffic",
    "requiresecuritysignature", "enablesecuritysignature", "ntlmminclientsec",
    "ntlmminserversec", "lmcompatibilitylevel", "usemachineid", "clientallowedntlmservers",
    "ldapavailable", "ldapsavailable", "ldapenabled", "ldapsenabled",
    "certificatemappingmethodsraw", "certificatemappingmethods",
    "strongcertificatebindingenforcementraw", "strongcertificatebindingenforcement",
    "vulnerablenetlogonsecuritydescriptor", "vulnerablenetlogonsecuritydescriptorcollected",
    "hasenrollmentagentrestrictions", "isuserspecifiessanenabled", "roleseparationenabled",
    "hasvulnerableendpoint", "httpenrollmentendpoints", "httpsenrollmentendpoints", "hasura",
    "ownersid",
}  # fmt: skip


def block(result: Any, collected: bool = True) -> dict[str, Any]:
    return {"Collected": collected, "FailureReason": None if collected else "timeout", **result}


def computers(ntlm: dict[str, Any], smb: dict[str, Any]) -> dict[str, Any]:
    relay = {
        "ObjectIdentifier": RELAY,
        "Properties": {"name": "RELAY.LAB.LOCAL", "domainsid": SID, "ldapenabled": True,
                       "ldapsenabled": False, "description": None},
        "Aces": [
            {"PrincipalSID": f"{SID}-512", "PrincipalType": "Group", "RightName": "GenericAll",
             "IsInherited": False},
            {"PrincipalSID": f"{SID}-1100", "PrincipalType": "User", "RightName": "OwnsRaw",
             "IsInherited": False},
            {"PrincipalSID": f"{SID}-519", "PrincipalType": "Group", "RightName": "Owns",
             "IsInherited": False},
        ],
        "SmbInfo": smb,
        "IsWebClientRunning": block({"Result": True}),
        "NTLMRegistryData": ntlm,
        "DCRegistryData": {
            "CertificateMappingMethods": block({"Value": 0x1C}),
            "StrongCertificateBindingEnforcement": block({"Value": 1}),
            "VulnerableNetlogonSecurityDescriptor": block({"Value": "O:BAG:BA"}),
        },
        "UserRights": [
            {**block({"Results": [{"ObjectIdentifier": f"{SID}-513", "ObjectType": "Group"}]}),
             "Privilege": "SeRemoteInteractiveLogonRight", "LocalNames": []},
        ],
    }  # fmt: skip
    silent = {
        "ObjectIdentifier": SILENT,
        "Properties": {"name": "SILENT.LAB.LOCAL", "domainsid": SID},
        "SmbInfo": block({"Result": {"SigningEnabled": True}}, collected=False),
        "IsWebClientRunning": block({"Result": False}, collected=False),
        "NTLMRegistryData": block({"Result": {"RestrictSendingNtlmTraffic": 2}}, collected=False),
        "DCRegistryData": {"CertificateMappingMethods": None},
        "UserRights": [
            {**block({"Results": []}), "Privilege": "SeRemoteInteractiveLogonRight"},
            {
                **block({"Results": [{"ObjectIdentifier": "X", "ObjectType": "User"}]}, False),
                "Privilege": "SeBackupPrivilege",
            },
        ],
    }
    return {"meta": {"type": "computers", "version": 6, "count": 2}, "data": [relay, silent]}


FULL_NTLM = block(
    {
        "Result": {
            "RestrictSendingNtlmTraffic": 2,
            "RestrictReceivingNTLMTraffic": 1,
            "RequireSecuritySignature": 0,
            "EnableSecuritySignature": 1,
            "NtlmMinClientSec": 536870912,
            "NtlmMinServerSec": 0,
            "LmCompatibilityLevel": 3,
            "UseMachineId": 1,
            "ClientAllowedNTLMServers": ["files.lab.local"],
        }
    }
)


def enterprise_cas() -> dict[str, Any]:
    endpoint = "http://ca.lab.local/certsrv/"
    secure = "https://ca.lab.local/certsrv/"
    record = {
        "ObjectIdentifier": CA,
        "Properties": {"name": "LAB-CA@LAB.LOCAL", "domainsid": SID},
        "CARegistryData": {
            "CASecurity": block({"Data": []}),
            "EnrollmentAgentRestrictions": block({"Restrictions": [{"AccessType": "x"}]}),
            "IsUserSpecifiesSanEnabled": block({"Value": True}),
            "RoleSeparationEnabled": block({"Value": True}, collected=False),
        },
        "HttpEnrollmentEndpoints": [
            block({"Result": {"Url": endpoint, "ADCSWebEnrollmentHTTP": True,
                              "ADCSWebEnrollmentHTTPS": False, "ADCSWebEnrollmentEPA": False}}),
            block({"Result": {"Url": secure, "ADCSWebEnrollmentHTTP": False,
                              "ADCSWebEnrollmentHTTPS": True, "ADCSWebEnrollmentEPA": False}}),
            block({"Result": {"Url": secure + "epa", "ADCSWebEnrollmentHTTP": False,
                              "ADCSWebEnrollmentHTTPS": True, "ADCSWebEnrollmentEPA": True}}),
            block({"Result": {"Url": "http://other/", "ADCSWebEnrollmentHTTP": True}}, False),
        ],
    }  # fmt: skip
    return {"meta": {"type": "enterprisecas", "version": 6, "count": 1}, "data": [record]}


def write(folder: Path, documents: dict[str, dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, document in documents.items():
        (folder / name).write_text(json.dumps(document))
    return folder


def stored_facts(env: Env, *object_ids: str) -> dict[str, dict[str, Any]]:
    found = env.run_in_transaction(lambda conn: graph.find_nodes(conn, list(object_ids)))
    return {
        oid: {k: v for k, v in node.properties.items() if k in FACT_KEYS}
        for oid, node in found.items()
    }


RELAY_FACTS = {
    "ownersid": f"{SID}-1100",  # the first ACE that names the owner
    "smbsigning": False,
    "webclientrunning": True,
    "restrictoutboundntlm": True,  # 2: deny all
    "restrictreceivingntmltraffic": False,  # 1: audit
    "requiresecuritysignature": False,
    "enablesecuritysignature": True,
    "ntlmminclientsec": 536870912,
    "ntlmminserversec": 0,
    "lmcompatibilitylevel": 3,
    "usemachineid": True,
    "clientallowedntlmservers": ["files.lab.local"],
    "ldapavailable": True,
    "ldapsavailable": False,
    "certificatemappingmethodsraw": 0x1C,
    "certificatemappingmethods": [
        "0x04: User principal name (UPN/SAN)",
        "0x08: Kerberos service-for-user (S4U) certificate",
        "0x10: Kerberos service-for-user (S4U) explicit certificate",
    ],
    "strongcertificatebindingenforcementraw": 1,
    "strongcertificatebindingenforcement": "Compatibility mode",
    "vulnerablenetlogonsecuritydescriptorcollected": True,
    "vulnerablenetlogonsecuritydescriptor": "O:BAG:BA",
    "hasura": True,
}


def test_each_collected_block_becomes_the_references_properties(env: Env, tmp_path: Path) -> None:
    smb = block({"Result": {"SigningEnabled": False}})
    folder = write(
        tmp_path / "first",
        {"computers.json": computers(FULL_NTLM, smb), "enterprisecas.json": enterprise_cas()},
    )
    ingest(env, folder)
    facts = stored_facts(env, RELAY, SILENT, CA)
    assert facts[RELAY] == RELAY_FACTS
    # Blocks that failed, are missing or hold nothing state nothing; a DC registry block
    # says only that the Netlogon descriptor was not read.
    assert facts[SILENT] == {"vulnerablenetlogonsecuritydescriptorcollected": False}
    assert facts[CA] == {
        "hasenrollmentagentrestrictions": True,
        "isuserspecifiessanenabled": True,
        "httpenrollmentendpoints": ["http://ca.lab.local/certsrv/"],
        # HTTPS with extended protection (EPA) cannot be relayed to: not listed.
        "httpsenrollmentendpoints": ["https://ca.lab.local/certsrv/"],
        "hasvulnerableendpoint": True,
    }
    relay = env.run_in_transaction(lambda conn: graph.find_nodes(conn, [RELAY]))[RELAY]
    assert "description" not in relay.properties  # a null property is not kept

    answer = post(
        env,
        {
            "query": "MATCH (c:Computer) WHERE c.smbsigning = false AND c.webclientrunning "
            "AND c.restrictoutboundntlm RETURN c.name"
        },
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"]["literals"] == [{"key": "c.name", "value": "RELAY.LAB.LOCAL"}]


def test_a_newer_collection_states_its_blocks_and_keeps_what_it_did_not_collect(
    env: Env, tmp_path: Path
) -> None:
    ingest(
        env,
        write(
            tmp_path / "first",
            {"computers.json": computers(FULL_NTLM, block({"Result": {"SigningEnabled": False}}))},
        ),
    )
    # The newer run read the NTLM registry without two of its values, and failed on SMB.
    fewer = json.loads(json.dumps(FULL_NTLM))
    del fewer["Result"]["RestrictSendingNtlmTraffic"]
    fewer["Result"]["ClientAllowedNTLMServers"] = None
    failed = block({"Result": {"SigningEnabled": True}}, collected=False)
    ingest(env, write(tmp_path / "second", {"computers.json": computers(fewer, failed)}))
    facts = stored_facts(env, RELAY)[RELAY]
    expected = {
        k: v
        for k, v in RELAY_FACTS.items()
        if k not in ("restrictoutboundntlm", "clientallowedntlmservers")
    }
    assert facts == expected  # smbsigning: still the first run's False


def test_the_adcs_fixture_gets_the_facts_the_references_ingest_expects(env: Env) -> None:
    """The reference's own expectations for this collection (its graphify golden file,
    extracted: tests/fixtures/bloodhound-ce/README.md): every node's owner, the domain
    controller's registry values and user rights, the CA's registry flags; and no node
    keeps a null property."""
    expected = json.loads(REFERENCE_FACTS.read_text())
    assert expected["null_properties"] == 0
    ingest(env, FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "all" / "adcs.zip")

    async def every_node(conn):  # type: ignore[no-untyped-def]
        rows = await conn.fetch("SELECT object_id FROM nodes")
        return await graph.find_nodes(conn, [r[0] for r in rows])

    found = env.run_in_transaction(every_node)
    keys = set(expected["keys"])
    # The golden file predates the Netlogon descriptor's flag, which the reference now sets
    # on every computer: compared apart.
    ours = {
        oid: {k: v for k, v in node.properties.items() if k in keys} for oid, node in found.items()
    }
    # Every node of the golden file, the objects only referred to included (stubs).
    shared = ours.keys() & expected["nodes"].keys()
    assert len(shared) == len(expected["nodes"]) == 330
    assert {oid: ours[oid] for oid in shared} == {oid: expected["nodes"][oid] for oid in shared}
    assert sum(1 for facts in ours.values() if "ownersid" in facts) >= 310
    assert not [oid for oid, node in found.items() if None in node.properties.values()]
    flags = {
        oid: node.properties.get("vulnerablenetlogonsecuritydescriptorcollected")
        for oid, node in found.items()
        if "Computer" in node.kinds
    }
    assert set(flags.values()) == {False}  # the fixture's collector did not read it
