"""Every relationship SharpHound reports, as edges: on the real fixtures the store's edges
equal those worked out here from the raw files (tests/test_sharphound.py's Expected), the
reference server's post-processed edges of the TESTLAB collection are checked one by one,
and hand-made records cover what the fixtures lack (legacy blocks with members, trusts of
every kind, numbers for trust enums, unknown rights, lower-case ACE keys)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from graphsvc.store import graph, uploads
from tests.conftest import Env, ingest
from tests.test_sharphound import (
    SAMPLES,
    TESTLAB,
    WIN10,
    Expected,
    analysed_edges,
    raw_documents,
)

Triple = tuple[str, str, str]
SAMPLE_ZIP = SAMPLES["sample zip (3 domains, 3 collections)"]


def stored_edges(env: Env) -> dict[Triple, dict[str, Any]]:
    """(start, kind, end) -> properties of every edge in the store."""

    async def read(conn):  # type: ignore[no-untyped-def]
        return await conn.fetch(
            "SELECT s.object_id, k.name, e.object_id, x.properties FROM edges x "
            "JOIN kinds k ON k.id = x.kind_id JOIN nodes s ON s.id = x.start_id "
            "JOIN nodes e ON e.id = x.end_id"
        )

    return {(r[0], r[1], r[2]): json.loads(r[3]) for r in env.run_in_transaction(read)}


def pairs(edges: dict[Triple, Any] | set[Triple], kind: str) -> set[tuple[str, str]]:
    return {(s, e) for s, k, e in edges if k == kind}


def write_documents(folder: Path, documents: dict[str, dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, document in documents.items():
        (folder / f"{name}.json").write_text(json.dumps(document))
    return folder


def document(meta_type: str, records: list[dict[str, Any]], version: int = 6) -> dict[str, Any]:
    return {"meta": {"type": meta_type, "version": version}, "data": records}


# --- the real fixtures ----------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in SAMPLES if n != "utf-8 bom"])
def test_stored_edges_equal_the_edges_worked_out_from_the_raw_files(env: Env, name: str) -> None:
    path = SAMPLES[name]
    ingest(env, path)
    expected = set(Expected(raw_documents(path), analysed_edges(env)).edges)
    stored = stored_edges(env)
    assert set(stored) == expected
    counts = Counter(k for _, k, _ in stored)
    assert counts == Counter(k for _, k, _ in expected)
    # ACE edges (and SQLAdmin) are the ones marked isacl.
    assert {t for t, p in stored.items() if p.get("isacl") is True} == expected_aces(path)


def expected_aces(path: Path) -> set[Triple]:
    expected = Expected(raw_documents(path))
    return {t for t in expected.acl if t in expected.edges}


def test_testlab_gives_the_reference_edges(env: Env) -> None:
    """brief: the reference's rules applied by hand to fixtures/v6/ingest."""
    ingest(env, SAMPLES["v6 folder"])
    edges = stored_edges(env)
    user, group = f"{TESTLAB}-1105", f"{TESTLAB}-512"
    assert pairs(edges, "AdminTo") == {(group, WIN10), (user, WIN10)}
    assert pairs(edges, "CanPSRemote") == {(user, WIN10)}
    assert pairs(edges, "ExecuteDCOM") == {("TESTLAB.LOCAL-S-1-1-0", WIN10)}
    assert pairs(edges, "CanRDP") == {(f"{TESTLAB}-513", WIN10)}
    assert pairs(edges, "RemoteInteractiveLogonRight") == {(f"{TESTLAB}-513", WIN10)}
    assert pairs(edges, "DCSync") == {
        ("TESTLAB.LOCAL-S-1-5-32-544", TESTLAB),
        (f"{TESTLAB}-2122", TESTLAB),
        (f"{TESTLAB}-2112", TESTLAB),  # in both -2110 (GetChanges) and -2111 (GetChangesAll)
    }
    assert pairs(edges, "SyncLAPSPassword") == set()  # no computer has LAPS
    assert pairs(edges, "DCFor") == {(f"{TESTLAB}-1001", TESTLAB)}
    assert pairs(edges, "CoerceToTGT") == {
        (f"{TESTLAB}-2120", TESTLAB),
        (f"{TESTLAB}-2125", TESTLAB),
    }
    external, test = (
        "S-1-5-21-3084884204-958224920-2707782874",
        "S-1-5-21-3084884204-958224920-2707782873",
    )
    assert pairs(edges, "CrossForestTrust") == {
        (external, TESTLAB),
        (TESTLAB, external),
        (TESTLAB, test),
    }
    assert pairs(edges, "SameForestTrust") | pairs(edges, "SpoofSIDHistory") == set()
    assert edges[(external, "CrossForestTrust", TESTLAB)] == {
        "trusttype": "Unknown",
        "transitive": True,
        "trustattributesinbound": None,
    }
    assert edges[(TESTLAB, "CrossForestTrust", test)] == {
        "trusttype": "Unknown",
        "transitive": True,
        "spoofsidhistoryblocked": True,
        "trustattributesoutbound": None,
    }
    assert edges[(user, "SQLAdmin", f"{TESTLAB}-12345")] == {"isacl": True, "port": 1433}
    assert pairs(edges, "HasSession") == {
        (WIN10, f"{TESTLAB}-{rid}") for rid in (1105, 500, 1107, 1108, 2117)
    }
    assert edges[(group, "Owns", WIN10)] == {"isacl": True, "isinherited": False}
    assert edges[(f"{TESTLAB}-519", "GenericAll", f"{TESTLAB}-1001")] == {
        "isacl": True,
        "isinherited": True,
    }
    assert pairs(edges, "AddAllowedToAct") == {(f"{TESTLAB}-2121", f"{TESTLAB}-1001")}

    async def domains(conn):  # type: ignore[no-untyped-def]
        found = await graph.find_nodes(conn, [TESTLAB, external, test])
        return {oid: (n.name, n.kinds) for oid, n in found.items()}

    # The trusted domains no file collected are named by their trusts, and stay stubs.
    assert env.run_in_transaction(domains) == {
        TESTLAB: ("TESTLAB.LOCAL", ["Domain", "Base"]),
        external: ("EXTERNAL.LOCAL", ["Domain"]),
        test: ("TEST.LOCAL", ["Domain"]),
    }


def test_sample_domain_controllers_share_their_builtin_groups(env: Env) -> None:
    """A DC reports BUILTIN\\Administrators (IGNOREME) as its local administrators; like the
    reference, every computer reporting that group gets the members any of them reports
    (PAYMENT01 oddly reports PHANTOM's too)."""
    ingest(env, SAMPLE_ZIP)
    documents = raw_documents(SAMPLE_ZIP)
    by_name = {
        r["Properties"]["name"]: r["ObjectIdentifier"]
        for d in documents
        if d["meta"]["type"] == "computers"
        for r in d["data"]
    }
    phantom = "S-1-5-21-2697957641-2271029196-387917394"
    dc01, payment01 = by_name["DC01.PHANTOM.CORP"], by_name["PAYMENT01.PHANTOM.CORP"]
    edges = stored_edges(env)
    phantom_admins = {(m, c) for m, c in pairs(edges, "AdminTo") if c in (dc01, payment01)}
    assert phantom_admins == {
        (f"{phantom}-500", dc01),
        (f"{phantom}-1138", dc01),
        (f"{phantom}-500", payment01),
        (f"{phantom}-1138", payment01),
    }
    # The one member of BUILTIN\Remote Desktop Users holds no logon right of its own, nor
    # does the group: the reference's user-rights rule gives no CanRDP.
    assert pairs(edges, "CanRDP") == set()
    assert (f"{phantom}-2155", "MemberOfLocalGroup", "PHANTOM.CORP-S-1-5-32-555") in edges
    extdc01 = by_name["EXTDC01.WRAITH.CORP"]
    assert len({m for m, c in pairs(edges, "AdminTo") if c == extdc01}) == 7
    # GPO-set local administrators: a group named by the computer and the RID.
    gpo_set = {
        e
        for s, k, e in edges
        if k == "MemberOfLocalGroup" and s == f"{phantom}-513" and e.startswith(phantom)
    }
    assert len(gpo_set) > 3 and all(group.endswith("-544") for group in gpo_set)
    assert {(f"{phantom}-513", group.removesuffix("-544")) for group in gpo_set} <= pairs(
        edges, "AdminTo"
    )
    assert ("PHANTOM.CORP-S-1-5-32-544", "DCSync", phantom) in edges
    wraith = "S-1-5-21-3702535222-3822678775-2090119576"
    assert pairs(edges, "SyncLAPSPassword") == {
        ("WRAITH.CORP-S-1-5-9", f"{wraith}-1117"),
        ("WRAITH.CORP-S-1-5-32-544", f"{wraith}-1117"),
    }


# --- hand-made records: what the fixtures lack ------------------------------------------

SID = "S-1-5-21-7-8-9"


def computer(rid: int, **blocks: Any) -> dict[str, Any]:
    return {
        "ObjectIdentifier": f"{SID}-{rid}",
        "Properties": {"name": f"C{rid}.X.LOCAL", "domainsid": SID},
        **blocks,
    }


def member(rid: int, kind: str = "User") -> dict[str, str]:
    return {"ObjectIdentifier": f"{SID}-{rid}", "ObjectType": kind}


def test_legacy_v3_and_v4_blocks_give_all_four_kinds(env: Env, tmp_path: Path) -> None:
    v4 = {
        key: {"Collected": True, "FailureReason": None, "Results": [member(rid)]}
        for key, rid in (
            ("LocalAdmins", 1100),
            ("RemoteDesktopUsers", 1101),
            ("DcomUsers", 1102),
            ("PSRemoteUsers", 1103),
        )
    }
    v3 = {
        key: [{"MemberId": f"{SID}-{rid}", "MemberType": "group"}]
        for key, rid in (
            ("LocalAdmins", 1200),
            ("RemoteDesktopUsers", 1201),
            ("DcomUsers", 1202),
            ("PSRemoteUsers", 1203),
        )
    }
    uncollected = {"LocalAdmins": {"Collected": False, "Results": [member(1300)]}}
    self_rdp = {"RemoteDesktopUsers": {"Collected": True, "Results": [member(1003, "Computer")]}}
    folder = write_documents(
        tmp_path,
        {
            "computers": document(
                "computers",
                [
                    computer(1000, **v4),
                    computer(1001, **v3),
                    computer(1002, **uncollected),
                    computer(1003, **self_rdp),
                ],
                version=4,
            )
        },
    )
    ingest(env, folder)
    edges = stored_edges(env)
    found = {
        kind: pairs(edges, kind) for kind in ("AdminTo", "CanRDP", "ExecuteDCOM", "CanPSRemote")
    }
    c1000, c1001 = f"{SID}-1000", f"{SID}-1001"
    # Remote Desktop Users give no CanRDP: no user rights were collected (the reference's
    # rule); each block is a group named by the computer and its RID.
    assert found == {
        "AdminTo": {(f"{SID}-1100", c1000), (f"{SID}-1200", c1001)},
        "CanRDP": set(),
        "ExecuteDCOM": {(f"{SID}-1102", c1000), (f"{SID}-1202", c1001)},
        "CanPSRemote": {(f"{SID}-1103", c1000), (f"{SID}-1203", c1001)},
    }
    assert (f"{SID}-1101", "MemberOfLocalGroup", f"{c1000}-555") in edges
    assert (f"{c1000}-555", "LocalToComputer", c1000) in edges
    assert (f"{SID}-1300", "MemberOfLocalGroup", f"{SID}-1002-544") not in edges


def test_gpo_changes_give_all_four_kinds_from_gpo(env: Env, tmp_path: Path) -> None:
    changes = {
        "LocalAdmins": [member(1100, "Group")],
        "RemoteDesktopUsers": [member(1101)],
        "DcomUsers": [member(1102)],
        "PSRemoteUsers": [member(1103)],
        "AffectedComputers": [member(1000, "Computer"), member(1001, "Computer")],
    }
    ou = {"ObjectIdentifier": "OU-1", "Properties": {"name": "OU@X"}, "GPOChanges": changes}
    ingest(env, write_documents(tmp_path, {"ous": document("ous", [ou])}))
    edges = stored_edges(env)
    for rid, kind, group in (
        (1100, "AdminTo", 544),
        (1101, None, 555),  # no CanRDP: no user rights collected
        (1102, "ExecuteDCOM", 562),
        (1103, "CanPSRemote", 580),
    ):
        for c in (1000, 1001):
            assert (f"{SID}-{rid}", "MemberOfLocalGroup", f"{SID}-{c}-{group}") in edges
            assert (f"{SID}-{c}-{group}", "LocalToComputer", f"{SID}-{c}") in edges
        if kind is not None:
            assert pairs(edges, kind) == {(f"{SID}-{rid}", f"{SID}-{c}") for c in (1000, 1001)}
    assert pairs(edges, "CanRDP") == set()


def trust(target: str, direction: Any, trust_type: Any, **more: Any) -> dict[str, Any]:
    return {
        "TargetDomainSid": target,
        "TargetDomainName": f"{target[-4:]}.REMOTE",
        "IsTransitive": False,
        "SidFilteringEnabled": True,
        "TrustDirection": direction,
        "TrustType": trust_type,
        **more,
    }


def test_trusts_of_every_direction_type_and_encoding(env: Env, tmp_path: Path) -> None:
    domain = "S-1-5-21-1-1-1"
    a, b, c, d, e, f = (f"S-1-5-21-2-2-{n}" for n in range(1001, 1007))
    record = {
        "ObjectIdentifier": domain,
        "Properties": {"name": "HOME.LOCAL", "domainsid": domain},
        "Trusts": [
            # Outbound across forests without SID filtering: SpoofSIDHistory, target -> domain.
            trust(a, "Outbound", "Forest", SidFilteringEnabled=False),
            # The same as numbers (2 Outbound, 3 External), older producers' encoding.
            trust(b, 2, 3, SidFilteringEnabled=False),
            # Inbound across forests with TGT delegation: AbuseTGTDelegation.
            trust(c, 1, "External", TGTDelegationEnabled=True, TrustAttributes=8),
            # Bidirectional within the forest (0 ParentChild): both ways, never Spoof.
            trust(d, 3, 0, SidFilteringEnabled=False, TrustAttributes="32"),
            trust(e, "Disabled", "Forest"),
            trust(f, 0, 2),
        ],
    }
    ingest(env, write_documents(tmp_path, {"domains": document("domains", [record])}))
    edges = stored_edges(env)
    assert pairs(edges, "CrossForestTrust") == {(domain, a), (domain, b), (c, domain)}
    assert pairs(edges, "SameForestTrust") == {(domain, d), (d, domain)}
    assert pairs(edges, "SpoofSIDHistory") == {(a, domain), (b, domain)}
    assert pairs(edges, "AbuseTGTDelegation") == {(c, domain)}
    assert edges[(domain, "CrossForestTrust", b)] == {
        "trusttype": "External",
        "transitive": False,
        "spoofsidhistoryblocked": False,
        "trustattributesoutbound": None,
    }
    assert edges[(c, "CrossForestTrust", domain)] == {
        "trusttype": "External",
        "transitive": False,
        "trustattributesinbound": 8,
        "tgtdelegation": True,
    }
    assert edges[(d, "SameForestTrust", domain)]["trustattributesinbound"] == 32
    assert edges[(a, "SpoofSIDHistory", domain)] == {"trusttype": "Forest"}


def test_aces_unknown_rights_self_rights_and_key_case(env: Env, tmp_path: Path) -> None:
    group = f"{SID}-2000"
    aces = [
        {
            "PrincipalSID": f"{SID}-512",
            "PrincipalType": "Group",
            "RightName": "GenericAll",
            "IsInherited": True,
        },
        # A right this version does not know keeps its own name.
        {
            "PrincipalSID": f"{SID}-1100",
            "PrincipalType": "User",
            "RightName": "WriteAltSecurityIdentities",
            "IsInherited": False,
        },
        # OwnsRaw (newer collectors' name of the owner) is kept as OwnsRaw; the analysis
        # makes it Owns (the domain blocks no owner rights).
        {
            "PrincipalSID": f"{SID}-1101",
            "PrincipalType": "User",
            "RightName": "OwnsRaw",
            "IsInherited": False,
        },
        # The object's rights over itself make no edge.
        {
            "PrincipalSID": group,
            "PrincipalType": "Group",
            "RightName": "AddSelf",
            "IsInherited": False,
        },
        # Another producer's key case.
        {
            "principalsid": f"{SID}-1102",
            "principaltype": "computer",
            "rightname": "AddMember",
            "isinherited": False,
        },
        # An unknown principal type: the stub is a Base node.
        {
            "PrincipalSID": f"{SID}-1103",
            "PrincipalType": "LocalUser",
            "RightName": "WriteDacl",
            "IsInherited": False,
        },
    ]
    record = {
        "ObjectIdentifier": group,
        "Properties": {"name": "G@X", "domainsid": SID},
        "Aces": aces,
    }
    ingest(env, write_documents(tmp_path, {"groups": document("groups", [record])}))
    edges = stored_edges(env)
    assert {(s, k) for s, k, e in edges if e == group} == {
        (f"{SID}-512", "GenericAll"),
        (f"{SID}-1100", "WriteAltSecurityIdentities"),
        (f"{SID}-1101", "OwnsRaw"),
        (f"{SID}-1101", "Owns"),
        (f"{SID}-1102", "AddMember"),
        (f"{SID}-1103", "WriteDacl"),
    }
    assert edges[(f"{SID}-512", "GenericAll", group)] == {"isacl": True, "isinherited": True}

    async def kinds(conn):  # type: ignore[no-untyped-def]
        found = await graph.find_nodes(conn, [f"{SID}-1102", f"{SID}-1103", f"{SID}-1100"])
        return {oid: n.kinds for oid, n in found.items()}

    assert env.run_in_transaction(kinds) == {
        f"{SID}-1100": ["User"],
        f"{SID}-1102": ["Computer"],
        f"{SID}-1103": ["Base"],
    }


def test_v3_aces_are_read_as_bloodhound_3_read_them(env: Env, tmp_path: Path) -> None:
    """JSON v3 ACEs pair a right with an AceType."""
    user = f"{SID}-1100"

    def v3(rid: int, right: str, ace_type: str) -> dict[str, Any]:
        return {
            "PrincipalSID": f"{SID}-{rid}",
            "PrincipalType": "Group",
            "RightName": right,
            "AceType": ace_type,
            "IsInherited": False,
        }

    aces = [
        v3(1, "ExtendedRight", "All"),
        v3(2, "ExtendedRight", "User-Force-Change-Password"),
        v3(3, "WriteProperty", "AddMember"),
        v3(4, "WriteProperty", "AllowedToAct"),
        v3(5, "ExtendedRight", "GetChangesAll"),
        v3(6, "GenericAll", ""),
        v3(7, "Owner", ""),
        v3(8, "WriteProperty", "SomethingElse"),  # read by nobody: kept under its right
    ]
    record = {"ObjectIdentifier": user, "Properties": {"name": "U@X"}, "Aces": aces}
    ingest(env, write_documents(tmp_path, {"users": document("users", [record], version=3)}))
    assert {(s, k) for s, k, e in stored_edges(env) if e == user} == {
        (f"{SID}-1", "AllExtendedRights"),
        (f"{SID}-2", "ForceChangePassword"),
        (f"{SID}-3", "AddMember"),
        (f"{SID}-4", "AddAllowedToAct"),
        (f"{SID}-5", "GetChangesAll"),
        (f"{SID}-6", "GenericAll"),
        (f"{SID}-7", "OwnsRaw"),
        (f"{SID}-7", "Owns"),
        (f"{SID}-8", "WriteProperty"),
    }


def test_dcsync_combines_holders_over_membership(env: Env, tmp_path: Path) -> None:
    """GetChanges and GetChangesAll held apart: a user in both holder groups gets DCSync,
    a group nested in both stands for its members, and a right held by Authenticated Users
    counts as everyone's (its set is dropped)."""
    domain = "S-1-5-21-3-3-3"

    def sid(rid: int) -> str:
        return f"{domain}-{rid}"

    def ace(principal: str, right: str) -> dict[str, Any]:
        return {
            "PrincipalSID": principal,
            "PrincipalType": "Group",
            "RightName": right,
            "IsInherited": False,
        }

    def group(rid: int, users: list[int], groups: list[int]) -> dict[str, Any]:
        members = [{"ObjectIdentifier": sid(u), "ObjectType": "User"} for u in users]
        members += [{"ObjectIdentifier": sid(g), "ObjectType": "Group"} for g in groups]
        return {
            "ObjectIdentifier": sid(rid),
            "Properties": {"name": f"G{rid}@LAB", "domainsid": domain},
            "Members": members,
        }

    # 100 holds GetChanges, 200 GetChangesAll: user 3001 is in both, group 300 (user 3002)
    # is in both, user 3003 only in 100.
    groups = [group(100, [3001, 3003], [300]), group(200, [3001], [300]), group(300, [3002], [])]
    aces = [ace(sid(100), "GetChanges"), ace(sid(200), "GetChangesAll")]
    domains = [
        {
            "ObjectIdentifier": domain,
            "Properties": {"name": "LAB.LOCAL", "domainsid": domain},
            "Aces": aces,
        }
    ]
    computers = [
        {
            "ObjectIdentifier": sid(4000 + n),
            "Properties": {"name": f"PC{n}.LAB.LOCAL", "domainsid": domain, "haslaps": n == 0},
        }
        for n in range(2)
    ]
    ingest(
        env,
        write_documents(
            tmp_path / "a",
            {
                "groups": document("groups", groups),
                "domains": document("domains", domains),
                "computers": document("computers", computers),
            },
        ),
    )
    assert pairs(stored_edges(env), "DCSync") == {(sid(3001), domain), (sid(300), domain)}

    # GetChangesInFilteredSet held by Authenticated Users: that set is dropped, the other
    # set's direct holders sync LAPS passwords of the computer with LAPS.
    aces.append(ace("LAB.LOCAL-S-1-5-11", "GetChangesInFilteredSet"))
    ingest(
        env,
        write_documents(
            tmp_path / "b",
            {
                "groups": document("groups", groups),
                "domains": document("domains", domains),
                "computers": document("computers", computers),
            },
        ),
    )
    assert pairs(stored_edges(env), "SyncLAPSPassword") == {(sid(100), sid(4000))}


def test_delegation_sid_history_msa_and_adcs_links(env: Env, tmp_path: Path) -> None:
    user = {
        "ObjectIdentifier": f"{SID}-1100",
        "Properties": {"name": "U@X", "domainsid": SID, "unconstraineddelegation": True},
        "AllowedToDelegate": [member(1000, "Computer")],
        "HasSIDHistory": [member(1500)],
        "SPNTargets": [{"ComputerSID": f"{SID}-1000", "Port": 1433, "Service": "SQLAdmin"}],
    }
    dc = computer(1000, IsDC=True, DomainSID=SID, UnconstrainedDelegation=True)
    host = computer(
        1001,
        AllowedToAct=[member(1100)],
        DumpSMSAPassword=[member(1600)],
        UnconstrainedDelegation=True,
        DomainSID=SID,
        UserRights=[
            {
                "Privilege": "SeRemoteInteractiveLogonRight",
                "Collected": True,
                "Results": [member(1100)],
            },
            {"Privilege": "SeBackupPrivilege", "Collected": True, "Results": [member(1101)]},
            {"Privilege": "SeRestorePrivilege", "Collected": False, "Results": [member(1102)]},
        ],
    )
    group = {
        "ObjectIdentifier": f"{SID}-1700",
        "Properties": {"name": "G@X"},
        "HasSIDHistory": [member(1701, "Group")],
    }
    ca = {
        "ObjectIdentifier": "CA-1",
        "Properties": {"name": "CA@X", "domainsid": SID},
        "HostingComputer": f"{SID}-1001",
        "EnabledCertTemplates": [{"ObjectIdentifier": "T-1", "ObjectType": "CertTemplate"}],
        "CARegistryData": {
            "CASecurity": {
                "Collected": True,
                "Data": [
                    {
                        "PrincipalSID": f"{SID}-512",
                        "PrincipalType": "Group",
                        "RightName": "ManageCA",
                        "IsInherited": False,
                    },
                    {
                        "PrincipalSID": f"{SID}-513",
                        "PrincipalType": "Group",
                        "RightName": "Owns",
                        "IsInherited": False,
                    },
                    {
                        "PrincipalSID": f"{SID}-1001-544",
                        "PrincipalType": "LocalGroup",
                        "RightName": "ManageCertificates",
                        "IsInherited": False,
                    },
                ],
            }
        },
    }
    root = {"ObjectIdentifier": "ROOT-1", "Properties": {"name": "R@X"}, "DomainSID": SID}
    store = {"ObjectIdentifier": "NTAUTH-1", "Properties": {"name": "N@X"}, "DomainSID": SID}
    policy = {
        "ObjectIdentifier": "OID-1",
        "Properties": {"name": "P@X"},
        "GroupLink": member(1700, "Group"),
    }
    folder = write_documents(
        tmp_path,
        {
            "users": document("users", [user]),
            "computers": document("computers", [dc, host]),
            "groups": document("groups", [group]),
            "enterprisecas": document("enterprisecas", [ca]),
            "rootcas": document("rootcas", [root]),
            "ntauthstores": document("ntauthstores", [store]),
            "issuancepolicies": document("issuancepolicies", [policy]),
        },
    )
    ingest(env, folder)
    edges = stored_edges(env)
    u, c0, c1 = f"{SID}-1100", f"{SID}-1000", f"{SID}-1001"
    assert pairs(edges, "AllowedToDelegate") == {(u, c0)}
    assert pairs(edges, "AllowedToAct") == {(u, c1)}
    assert pairs(edges, "HasSIDHistory") == {(u, f"{SID}-1500"), (f"{SID}-1700", f"{SID}-1701")}
    assert pairs(edges, "DumpSMSAPassword") == {(c1, f"{SID}-1600")}
    assert pairs(edges, "SQLAdmin") == {(u, c0)}
    assert pairs(edges, "DCFor") == {(c0, SID)}
    assert pairs(edges, "CoerceToTGT") == {(u, SID), (c1, SID)}  # never from the DC
    assert pairs(edges, "RemoteInteractiveLogonRight") == {(u, c1)}
    assert pairs(edges, "BackupPrivilege") == {(f"{SID}-1101", c1)}
    assert pairs(edges, "RestorePrivilege") == set()  # not collected
    assert pairs(edges, "PublishedTo") == {("T-1", "CA-1")}
    assert pairs(edges, "HostsCAService") == {(c1, "CA-1")}
    assert pairs(edges, "ManageCA") == {(f"{SID}-512", "CA-1")}
    assert pairs(edges, "Owns") | pairs(edges, "ManageCertificates") == set()
    assert pairs(edges, "RootCAFor") == {("ROOT-1", SID)}
    assert pairs(edges, "NTAuthStoreFor") == {("NTAUTH-1", SID)}
    assert pairs(edges, "OIDGroupLink") == {("OID-1", f"{SID}-1700")}


def test_local_groups_in_any_key_case(env: Env, tmp_path: Path) -> None:
    """Local groups give the same edges in any key case: SharpHound's, all lower-case or
    upper-case; entries that are not groups, or whose results are not a list, give none."""
    computer = f"{SID}-3000"

    def local_group(rid: int, member: int, case: str) -> dict[str, Any]:
        keys = {"id": "ObjectIdentifier", "collected": "Collected", "results": "Results"}
        keys = {k: getattr(v, case)() if case != "title" else v for k, v in keys.items()}
        return {
            keys["id"]: f"{computer}-{rid}",
            keys["collected"]: True,
            keys["results"]: [{"ObjectIdentifier": f"{SID}-{member}", "ObjectType": "User"}],
        }

    record = {
        "objectidentifier": computer,
        "properties": {"name": "C3000@X", "domainsid": SID},
        "LOCALGROUPS": [
            local_group(544, 1200, "title"),
            local_group(555, 1201, "lower"),
            local_group(580, 1202, "upper"),
            {"ObjectIdentifier": f"{computer}-545", "Collected": True, "Results": "not a list"},
            "not a group",
        ],
    }
    ingest(env, write_documents(tmp_path, {"computers": document("computers", [record])}))
    edges = stored_edges(env)
    assert {(s, k) for s, k, e in edges if e == computer} == {
        (f"{SID}-1200", "AdminTo"),
        (f"{SID}-1202", "CanPSRemote"),
        *((f"{computer}-{rid}", "LocalToComputer") for rid in (544, 555, 580)),
    }
    assert (f"{SID}-1201", "MemberOfLocalGroup", f"{computer}-555") in edges


def derived_edges(env: Env) -> set[Triple]:
    """The relationships the analysis made (marked derived in the store)."""

    async def read(conn):  # type: ignore[no-untyped-def]
        return await conn.fetch(
            """SELECT s.object_id, k.name, e.object_id FROM edges x
            JOIN nodes s ON s.id = x.start_id JOIN nodes e ON e.id = x.end_id
            JOIN kinds k ON k.id = x.kind_id WHERE x.derived"""
        )

    return {(r[0], r[1], r[2]) for r in env.run_in_transaction(read)}


def test_a_collection_uploaded_in_parts_gets_the_derived_edges_of_one_upload(
    env: Env, tmp_path: Path
) -> None:
    """The analysis runs over the whole graph after each run: the domain's rights in one run
    and the groups that combine them in another give the DCSync edges one run gives."""
    folder = SAMPLES["v6 folder"]
    ingest(env, folder)
    whole = derived_edges(env)
    assert pairs(whole, "DCSync") and pairs(whole, "DCSync") == pairs(stored_edges(env), "DCSync")
    env.run_in_transaction(graph_cleared)
    assert derived_edges(env) == set()
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    for path in folder.glob("*.json"):
        target = first if path.name in ("domains.json", "computers.json") else second
        (target / path.name).write_bytes(path.read_bytes())
    ingest(env, first)
    # The rights alone: only their direct holders that hold both (none here) sync.
    partial = derived_edges(env)
    ingest(env, second)
    assert derived_edges(env) == whole
    assert partial != whole


def test_the_next_analysis_replaces_what_the_last_derived(env: Env, tmp_path: Path) -> None:
    """Derived edges follow the graph: gone when what they came from is gone (here the
    GetChangesAll rights, cleared), made again by the next run's analysis; never doubled."""
    ingest(env, SAMPLES["v6 folder"])
    syncers = pairs(derived_edges(env), "DCSync")
    assert syncers
    ingest(env, SAMPLES["v6 folder"])
    assert pairs(derived_edges(env), "DCSync") == syncers
    assert Counter(k for _, k, _ in stored_edges(env))["DCSync"] == len(syncers)

    async def drop_get_changes_all(conn):  # type: ignore[no-untyped-def]
        await conn.execute(
            "DELETE FROM edges WHERE kind_id = (SELECT id FROM kinds WHERE name = 'GetChangesAll')"
        )

    env.run_in_transaction(drop_get_changes_all)
    other = write_documents(
        tmp_path / "other",
        {"users": document("users", [{"ObjectIdentifier": "S-1-5-21-9-9-9-1000",
                                        "Properties": {"name": "OTHER@ELSEWHERE"}}])},
    )  # fmt: skip
    ingest(env, other)  # a run about something else: the analysis still sees the whole graph
    assert pairs(derived_edges(env), "DCSync") == set()


async def graph_cleared(conn):  # type: ignore[no-untyped-def]
    for table in ("edges", "node_kinds", "tag_members", "asset_group_tag_selector_nodes", "nodes"):
        await conn.execute(f"DELETE FROM {table}")


def put_analysis(env: Env, token: Any = None) -> Any:
    headers = env.signed_headers("PUT", "/api/v2/analysis", token)
    return env.request("PUT", "/api/v2/analysis", headers)


def test_an_analysis_asked_for_and_the_pipelines_status(env: Env) -> None:
    """`PUT /api/v2/analysis` analyses the graph as it is now (202, no content), and
    `GET /api/v2/datapipe/status` says when analyses ran and whether an ingest is under
    way; a Read-Only user may read the status but not start one, and none starts while an
    ingest holds the lease."""
    status = env.get("/api/v2/datapipe/status")
    assert status.status_code == 200, status.text
    never = "0001-01-01T00:00:00Z"
    assert status.json()["data"] == {
        "status": "idle",
        "updated_at": never,
        "last_complete_analysis_at": never,
        "last_analysis_run_at": never,
    }
    ingest(env, SAMPLES["v6 folder"])
    after_ingest = env.get("/api/v2/datapipe/status").json()["data"]
    assert after_ingest["last_complete_analysis_at"] != never
    assert after_ingest["last_analysis_run_at"] <= after_ingest["last_complete_analysis_at"]
    assert pairs(derived_edges(env), "DCSync")

    async def drop_get_changes_all(conn):  # type: ignore[no-untyped-def]
        await conn.execute(
            "DELETE FROM edges WHERE kind_id = (SELECT id FROM kinds WHERE name = 'GetChangesAll')"
        )

    env.run_in_transaction(drop_get_changes_all)
    assert pairs(derived_edges(env), "DCSync")  # until the next analysis
    answer = put_analysis(env)
    assert answer.status_code == 202, answer.text
    assert answer.content == b""
    assert pairs(derived_edges(env), "DCSync") == set()
    again = env.get("/api/v2/datapipe/status").json()["data"]
    assert again["last_complete_analysis_at"] > after_ingest["last_complete_analysis_at"]

    reader = env.user_with_token("reader", "Read-Only")
    assert env.get("/api/v2/datapipe/status", reader).status_code == 200
    refused = put_analysis(env, reader)
    assert refused.status_code == 403 and "graphdb/Write" in refused.json()["errors"][0]["message"]

    async def hold_the_lease(conn):  # type: ignore[no-untyped-def]
        now = datetime.now(UTC)
        assert await uploads.take_lease(conn, "an ingester", now, now + timedelta(minutes=5))

    env.run_in_transaction(hold_the_lease)
    assert env.get("/api/v2/datapipe/status").json()["data"]["status"] == "ingesting"
    busy = put_analysis(env)
    assert busy.status_code == 409, busy.text
