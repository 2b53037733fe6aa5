"""Tier zero: worked out here from the raw files of both real collections and compared with
each domain's `tier-zero` list and each entity's `isTierZero`, on both stores; and computed
again when a later run adds a member.

The oracle is the reference's Tier Zero with its default selectors (those enabled from the
start): the domain, its well-known admin users and groups, its AdminSDHolder; expanded to
the members of those groups and the contents of OUs and containers at any depth; then to
the OUs above them, the GPOs linked to those OUs or to the node, and the containers above
a node whose access list is not protected."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import Env, ingest
from tests.test_entities import listed, members_of
from tests.test_sharphound import SAMPLES, TESTLAB, Expected, low, raw_documents

SUFFIXES = ("-1-5-9", "-500", "-512", "-516", "-518", "-519", "-526", "-527", "-544", "-551")
COLLECTIONS = ["v6 folder", "sample zip (3 domains, 3 collections)"]


def expected_tier_zero(path: Path) -> dict[str, set[str]]:
    """Domain object id -> its tier zero, from the raw files."""
    expected = Expected(raw_documents(path))
    admin_sd_holders = {
        record["objectidentifier"].upper()
        for document in raw_documents(path)
        if document["meta"]["type"] == "containers"
        for record in map(low, document["data"])
        if str((record.get("properties") or {}).get("distinguishedname", ""))
        .upper()
        .startswith("CN=ADMINSDHOLDER,CN=SYSTEM,")
    }
    members = members_of((s, e) for (s, k, e) in expected.edges if k == "MemberOf")
    contents: dict[str, set[str]] = defaultdict(set)
    containers: dict[str, set[str]] = defaultdict(set)  # what contains a node
    links: dict[str, set[str]] = defaultdict(set)  # the GPOs linked to a node
    for start, kind, end in expected.edges:
        if kind == "Contains":
            contents[start].add(end)
            containers[end].add(start)
        elif kind == "GPLink":
            links[end].add(start)

    def label(oid: str) -> str:
        return expected.nodes[oid][0] if oid in expected.nodes else ""

    def above(node: str, through: str) -> set[str]:
        found, todo = set(), [node]
        while todo:
            for parent in containers[todo.pop()]:
                if label(parent) == through and parent not in found:
                    found.add(parent)
                    todo.append(parent)
        return found

    by_domain: dict[str, set[str]] = {}
    for domain in expected.domains:
        selected = {domain} | {
            oid
            for oid, (kind, node_domain) in expected.nodes.items()
            if node_domain == domain
            and (
                (kind in ("User", "Group") and oid.endswith(SUFFIXES))
                or (kind == "Container" and oid in admin_sd_holders)
            )
        }
        todo = list(selected)
        while todo:
            node = todo.pop()
            children = members[node] if label(node) == "Group" else set()
            if label(node) in ("OU", "Container"):
                children = contents[node]
            for child in children:  # a member only named (a stub) too
                if child not in selected:
                    selected.add(child)
                    todo.append(child)
        parents: set[str] = set()
        for node in selected:
            units = above(node, "OU")
            parents |= units
            parents |= {g for t in (node, *units) for g in links[t] if label(g) == "GPO"}
            if expected.props.get(node, {}).get("isaclprotected") is False:
                parents |= above(node, "Container")
        by_domain[domain] = selected | parents
    return by_domain


@pytest.mark.parametrize("name", COLLECTIONS)
def test_each_domains_tier_zero_is_worked_out_from_the_raw_files(env: Env, name: str) -> None:
    path = SAMPLES[name]
    ingest(env, path)
    expected = expected_tier_zero(path)
    for domain, nodes in expected.items():
        assert listed(env, f"/api/v2/domains/{domain}/tier-zero") == nodes, domain
    assert sum(map(len, expected.values())) > 10, "the collections have admins and members"


def test_entities_say_whether_they_are_tier_zero(env: Env) -> None:
    ingest(env, SAMPLES["v6 folder"])
    tier_zero = expected_tier_zero(SAMPLES["v6 folder"])[TESTLAB]
    for segment, object_id in (
        ("groups", f"{TESTLAB}-512"),  # Domain Admins
        ("users", f"{TESTLAB}-2116"),  # a member of Domain Admins
        ("users", f"{TESTLAB}-1105"),  # local admin of WIN10 only
        ("domains", TESTLAB),
        ("computers", f"{TESTLAB}-1001"),  # the DC, in Domain Controllers
        ("computers", f"{TESTLAB}-1104"),
    ):
        props = env.get(f"/api/v2/{segment}/{object_id}?counts=false").json()["data"]["props"]
        assert props["isTierZero"] is (object_id in tier_zero), object_id
    body = env.get(f"/api/v2/domains/{TESTLAB}").json()["data"]
    assert body["tierzero"] == len(tier_zero)


def test_a_later_run_that_adds_a_member_makes_it_tier_zero(env: Env, tmp_path: Path) -> None:
    ingest(env, SAMPLES["v6 folder"])
    newcomer = f"{TESTLAB}-1105"
    assert newcomer not in listed(env, f"/api/v2/domains/{TESTLAB}/tier-zero")
    groups = json.loads((SAMPLES["v6 folder"] / "groups.json").read_text("utf-8-sig"))
    admins = next(g for g in groups["data"] if g["ObjectIdentifier"].endswith("-512"))
    admins["Members"].append({"ObjectIdentifier": newcomer, "ObjectType": "User"})
    (tmp_path / "groups.json").write_text(json.dumps({**groups, "data": [admins]}))
    ingest(env, tmp_path / "groups.json")
    assert newcomer in listed(env, f"/api/v2/domains/{TESTLAB}/tier-zero")
    props = env.get(f"/api/v2/users/{newcomer}?counts=false").json()["data"]["props"]
    assert props["isTierZero"] is True
