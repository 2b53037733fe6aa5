"""Owns and WriteOwner (analysis/owners.py) and what ingest keeps of owners (OwnsRaw,
WriteOwnerRaw, OwnsLimitedRights, WriteOwnerLimitedRights: ingest/sharphound.owner_edges), on
both stores, on the reference's OwnsWriteOwner and OwnsWriteOwnerPriorCollectorVersions
harnesses (cmd/api/src/test/integration/harnesses.go) with the expectations of its
TestOwnsWriteOwner and TestOwnsWriteOwnerPriorCollectorVersions
(packages/go/analysis/ad/ad_integration_test.go; SpecterOps/BloodHound, Apache-2.0).

Two domains: Domain1 blocks owners' implicit rights (its dSHeuristics' 29th character is
1), Domain2 does not. Each owned object is named for its case: who owns it (a low-privilege
user, a Domain Admin, an Enterprise Admin) and which ACEs the OWNER RIGHTS principal holds
on it (none; abusable ones, explicit or inherited; only non-abusable ones, which collectors
do not report but flag in `doesanyacegrantownerrights` and
`doesanyinheritedacegrantownerrights`). The prior-collector harness is the graph older
collectors give (no flags); the other is written here as the SharpHound records a current
collector writes for it, so that ingest's rules make its raw relationships."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Env, ingest
from tests.test_ad_relationships import stored_edges
from tests.test_analysis import Edge, Node, load, of_kind

D1, D2 = "S-1-5-21-1-1-1", "S-1-5-21-2-2-2"
BLOCKS = "0" * 28 + "1"  # BlockOwnerImplicitRights
ALLOWS = "0" * 29
CLASSES = ("Computer", "MSA", "GMSA", "User")
CASES = {
    1: "NoOwnerRights_OwnerIsLowPriv",
    2: "NoOwnerRights_OwnerIsDA",
    3: "NoOwnerRights_OwnerIsEA",
    4: "AbusableOwnerRightsNoneInherited",
    5: "AbusableOwnerRightsInherited",
    6: "AbusableOwnerRightsOnlyNonabusableInherited",
    7: "OnlyNonabusableOwnerRightsAndNoneInherited",
    8: "OnlyNonabusableOwnerRightsInherited",
}
DOMAIN2_CASES = {
    1: "NoOwnerRights",
    2: "AbusableOwnerRightsNoneInherited",
    3: "AbusableOwnerRightsInherited",
    4: "AbusableOwnerRightsOnlyNonabusableInherited",
    5: "OnlyNonabusableOwnerRightsAndNoneInherited",
    6: "OnlyNonabusableOwnerRightsInherited",
}
OWNER_OF_CASE = {1: "Domain1_User101_Owner", 2: "Domain1_User102_DomainAdmin",
                 3: "Domain1_User103_EnterpriseAdmin"}  # fmt: skip
PRIVILEGES = ["AddKeyCredentialLink", "WriteSPN"]

# TestOwnsWriteOwner: what current collectors give.
OWNS = {
    ("Domain1_User101_Owner", "Domain1_User1_NoOwnerRights_OwnerIsLowPriv"),
    *(("Domain1_User102_DomainAdmin", f"Domain1_{c}2_NoOwnerRights_OwnerIsDA") for c in CLASSES),
    *(
        ("Domain1_User103_EnterpriseAdmin", f"Domain1_{c}3_NoOwnerRights_OwnerIsEA")
        for c in CLASSES
    ),
    ("Domain2_User1_Owner", "Domain2_Computer1_NoOwnerRights"),
}
WRITE_OWNER = {
    ("Domain1_User104_WriteOwner", "Domain1_User1_NoOwnerRights_OwnerIsLowPriv"),
    ("Domain1_User104_WriteOwner", "Domain1_User2_NoOwnerRights_OwnerIsDA"),
    ("Domain1_User104_WriteOwner", "Domain1_User3_NoOwnerRights_OwnerIsEA"),
    ("Domain1_User104_WriteOwner", "Domain1_User4_AbusableOwnerRightsNoneInherited"),
    ("Domain1_User104_WriteOwner", "Domain1_User7_OnlyNonabusableOwnerRightsAndNoneInherited"),
    ("Domain2_User2_WriteOwner", "Domain2_Computer1_NoOwnerRights"),
    ("Domain2_User2_WriteOwner", "Domain2_Computer2_AbusableOwnerRightsNoneInherited"),
    ("Domain2_User2_WriteOwner", "Domain2_Computer5_OnlyNonabusableOwnerRightsAndNoneInherited"),
}
# TestOwnsWriteOwnerPriorCollectorVersions: the same and the false positives older
# collectors cannot avoid.
PRIOR_OWNS = OWNS | {
    ("Domain1_User101_Owner", "Domain1_User7_OnlyNonabusableOwnerRightsAndNoneInherited"),
    ("Domain1_User101_Owner", "Domain1_User8_OnlyNonabusableOwnerRightsInherited"),
    ("Domain2_User1_Owner", "Domain2_Computer5_OnlyNonabusableOwnerRightsAndNoneInherited"),
    ("Domain2_User1_Owner", "Domain2_Computer6_OnlyNonabusableOwnerRightsInherited"),
}
PRIOR_WRITE_OWNER = WRITE_OWNER | {
    ("Domain1_User104_WriteOwner", "Domain1_User6_AbusableOwnerRightsOnlyNonabusableInherited"),
    ("Domain1_User104_WriteOwner", "Domain1_User8_OnlyNonabusableOwnerRightsInherited"),
    ("Domain2_User2_WriteOwner", "Domain2_Computer4_AbusableOwnerRightsOnlyNonabusableInherited"),
    ("Domain2_User2_WriteOwner", "Domain2_Computer6_OnlyNonabusableOwnerRightsInherited"),
}


def owned_objects() -> list[tuple[str, str, str, int, dict[str, Any]]]:
    """(name, domain sid, SharpHound type, case number, properties) of every owned object."""
    found = []
    for number, case in CASES.items():
        for cls in CLASSES:
            props = {"gmsa": True} if cls == "GMSA" else {"msa": True} if cls == "MSA" else {}
            kind = "users" if cls == "User" else "computers"
            found.append((f"Domain1_{cls}{number}_{case}", D1, kind, number, props))
    for number, case in DOMAIN2_CASES.items():
        # Domain2's cases are Domain1's, less the owners' privileges (1 and 4 to 8).
        found.append(
            (
                f"Domain2_Computer{number}_{case}",
                D2,
                "computers",
                (1, 4, 5, 6, 7, 8)[number - 1],
                {},
            )
        )
    return found


def owners_of(name: str, case: int) -> tuple[str, str]:
    """The owner and the WriteOwner holder of an owned object."""
    if name.startswith("Domain2"):
        return "Domain2_User1_Owner", "Domain2_User2_WriteOwner"
    return OWNER_OF_CASE.get(case, "Domain1_User101_Owner"), "Domain1_User104_WriteOwner"


def prior_raw_edges(name: str, case: int) -> list[Edge]:
    """The harness's relationships into an owned object (older collectors)."""
    owner, writer = owners_of(name, case)
    if case in (4, 6):
        return [(owner, "OwnsLimitedRights", name), (writer, "WriteOwnerRaw", name)]
    if case == 5:
        return [(owner, "OwnsLimitedRights", name), (writer, "WriteOwnerLimitedRights", name)]
    return [(owner, "OwnsRaw", name), (writer, "WriteOwnerRaw", name)]


def prior_graph(domain1_heuristics: str = BLOCKS) -> tuple[list[Node], list[Edge]]:
    nodes: list[Node] = [
        ("Domain1_BlockImplicitOwnerRights", "Domain",
         {"domainsid": D1, "dsheuristics": domain1_heuristics}),
        ("Domain2_DoNotBlockImplicitOwnerRights", "Domain",
         {"domainsid": D2, "dsheuristics": ALLOWS}),
        (f"{D1}-512", "Group", {"domainsid": D1}),
        (f"{D1}-519", "Group", {"domainsid": D1}),
        *((user, "User", {"domainsid": D1}) for user in (
            "Domain1_User101_Owner", "Domain1_User102_DomainAdmin",
            "Domain1_User103_EnterpriseAdmin", "Domain1_User104_WriteOwner")),
        *((user, "User", {"domainsid": D2})
          for user in ("Domain2_User1_Owner", "Domain2_User2_WriteOwner")),
    ]  # fmt: skip
    edges: list[Edge] = [
        ("Domain1_User102_DomainAdmin", "MemberOf", f"{D1}-512"),
        ("Domain1_User103_EnterpriseAdmin", "MemberOf", f"{D1}-519"),
    ]
    for name, sid, kind, case, props in owned_objects():
        nodes.append((name, "User" if kind == "users" else "Computer", {"domainsid": sid, **props}))
        edges += prior_raw_edges(name, case)
    return nodes, edges


def test_prior_collector_versions(env: Env, tmp_path: Path) -> None:
    derived = load(env, tmp_path / "harness", *prior_graph())
    # OpenGraph ids are upper-cased.
    assert of_kind(derived, "Owns") == upper(PRIOR_OWNS)
    assert of_kind(derived, "WriteOwner") == upper(PRIOR_WRITE_OWNER)


def test_a_domain_that_starts_blocking_owner_rights_loses_the_copies(
    env: Env, tmp_path: Path
) -> None:
    """The analysis keeps the copies it made before and deletes those a domain now blocks
    (and makes them again when it stops)."""
    nodes, edges = prior_graph(ALLOWS)
    every_owns = {(s.upper(), e.upper()) for s, k, e in edges if k == "OwnsRaw"}
    assert of_kind(load(env, tmp_path / "allows", nodes, edges), "Owns") == every_owns
    derived = load(env, tmp_path / "blocks", *prior_graph(BLOCKS))
    assert of_kind(derived, "Owns") == upper(PRIOR_OWNS) != every_owns
    assert of_kind(derived, "WriteOwner") == upper(PRIOR_WRITE_OWNER)
    derived = load(env, tmp_path / "allows-again", nodes, edges)
    assert of_kind(derived, "Owns") == every_owns


def upper(pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    return {(start.upper(), end.upper()) for start, end in pairs}


def sharphound_aces(name: str, case: int, sids: dict[str, str]) -> list[dict[str, Any]]:
    """The ACEs a current collector reports on an owned object: the owner's, the WriteOwner
    holder's and the abusable ones OWNER RIGHTS holds."""
    owner, writer = owners_of(name, case)
    owner_rights = f"{'DOMAIN1' if name.startswith('Domain1') else 'DOMAIN2'}.LOCAL-S-1-3-4"

    def ace(sid: str, right: str, inherited: bool = False) -> dict[str, Any]:
        return {"PrincipalSID": sid, "PrincipalType": "User" if sid in sids.values() else "Group",
                "RightName": right, "IsInherited": inherited}  # fmt: skip

    aces = [ace(sids[owner], "Owns"), ace(sids[writer], "WriteOwner")]
    if case in (4, 6):
        aces += [ace(owner_rights, right) for right in PRIVILEGES]
    if case == 5:
        aces += [ace(owner_rights, right, inherited=True) for right in PRIVILEGES]
    return aces


def owner_flags(case: int) -> dict[str, bool]:
    """doesanyacegrantownerrights and doesanyinheritedacegrantownerrights of a case."""
    any_ace = case >= 4
    inherited = case in (5, 6, 8)
    return {"doesanyacegrantownerrights": any_ace, "doesanyinheritedacegrantownerrights": inherited}


def test_current_collectors(env: Env, tmp_path: Path) -> None:
    """The harness as a current collector's records: ingest keeps the raw and limited
    relationships the reference's ingest makes of them, and the analysis the edges
    TestOwnsWriteOwner expects (no false positive)."""
    users = ["Domain1_User101_Owner", "Domain1_User102_DomainAdmin",
             "Domain1_User103_EnterpriseAdmin", "Domain1_User104_WriteOwner",
             "Domain2_User1_Owner", "Domain2_User2_WriteOwner"]  # fmt: skip
    sids = {
        user: f"{D1 if user.startswith('Domain1') else D2}-{101 + i}"
        for i, user in enumerate(users)
    }
    owned = owned_objects()
    sids |= {name: f"{sid}-{1000 + i}" for i, (name, sid, _, _, _) in enumerate(owned)}
    names = {sid: name for name, sid in sids.items()}
    documents: dict[str, list[dict[str, Any]]] = {
        "users": [],
        "computers": [],
        "groups": [],
        "domains": [],
    }

    def add(kind: str, sid: str, properties: dict[str, Any], **blocks: Any) -> None:
        record = {"ObjectIdentifier": sid, "Aces": [], "Properties": properties}
        documents[kind].append({**record, **blocks})

    for name in users:
        add("users", sids[name], {"name": name, "domainsid": sids[name].rsplit("-", 1)[0]})
    for name, sid, kind, case, props in owned:
        properties = {"name": name, "domainsid": sid, **props, **owner_flags(case)}
        add(kind, sids[name], properties, Aces=sharphound_aces(name, case, sids))
    for rid, member in (("512", users[1]), ("519", users[2])):
        members = [{"ObjectIdentifier": sids[member], "ObjectType": "User"}]
        properties = {"name": f"GROUP{rid}@DOMAIN1.LOCAL", "domainsid": D1}
        add("groups", f"{D1}-{rid}", properties, Members=members)
    for sid, name, heuristics in ((D1, "DOMAIN1.LOCAL", BLOCKS), (D2, "DOMAIN2.LOCAL", ALLOWS)):
        properties = {"name": name, "domainsid": sid, "dsheuristics": heuristics}
        add("domains", sid, properties, Trusts=[])
    folder = tmp_path / "collection"
    folder.mkdir()
    for kind, records in documents.items():
        document = {"meta": {"type": kind, "version": 6, "methods": 46067}, "data": records}
        (folder / f"{kind}.json").write_text(json.dumps(document))
    ingest(env, folder)
    stored = {
        (names.get(s, s), k, names.get(e, e)): p for (s, k, e), p in stored_edges(env).items()
    }

    def kind_of(kind: str) -> set[tuple[str, str]]:
        return {(s, e) for s, k, e in stored if k == kind}

    assert kind_of("Owns") == OWNS
    assert kind_of("WriteOwner") == WRITE_OWNER
    # Ingest's relationships: the harness's, less what current collectors' flags rule out
    # (case 6: no WriteOwnerRaw; 7: no OwnsRaw; 8: nothing).
    expected_raw = set()
    for name, _, _, case, _ in owned:
        kept = prior_raw_edges(name, case)
        if case == 6:
            kept = [e for e in kept if e[1] != "WriteOwnerRaw"]
        if case == 7:
            kept = [e for e in kept if e[1] != "OwnsRaw"]
        if case == 8:
            kept = []
        expected_raw |= set(kept)
    raw_kinds = {"OwnsRaw", "WriteOwnerRaw", "OwnsLimitedRights", "WriteOwnerLimitedRights"}
    assert {t for t in stored if t[1] in raw_kinds} == expected_raw
    limited = stored[
        ("Domain1_User101_Owner", "OwnsLimitedRights", "Domain1_User5_AbusableOwnerRightsInherited")
    ]
    assert limited == {"isacl": True, "isinherited": False, "privileges": PRIVILEGES}
    write_limited = stored[
        (
            "Domain1_User104_WriteOwner",
            "WriteOwnerLimitedRights",
            "Domain1_User5_AbusableOwnerRightsInherited",
        )
    ]
    assert write_limited["privileges"] == PRIVILEGES
    # Derived from the raw relationships, with their properties.
    assert stored[("Domain2_User1_Owner", "Owns", "Domain2_Computer1_NoOwnerRights")] == {
        "isacl": True,
        "isinherited": False,
    }
