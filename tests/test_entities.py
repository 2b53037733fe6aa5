"""The entity routes (GET /api/v2/computers/{object_id} and the lists around an entity) on the
SharpHound v6 collection of the reference's tests. Every expected list is worked out here
from the raw JSON files, not read from graphsvc's store."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from graphsvc.api.routes import OPERATIONS
from graphsvc.demo.collectors import Domain, write_sharphound
from graphsvc.graph.entities import CERTIFICATE_SERVICES, ENTITY_KINDS, ENTITY_LISTS
from graphsvc.store.graph import ACL_KINDS
from tests.conftest import Env, ingest
from tests.test_sharphound import SAMPLES, Expected, raw_documents

V6 = Path(__file__).parent / "fixtures" / "bloodhound-ce" / "fixtures" / "v6" / "ingest"
FILES = ["computers", "containers", "domains", "gpos", "groups", "ous", "sessions", "users"]


def records(name: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((V6 / f"{name}.json").read_text("utf-8-sig"))["data"]
    return data


def ids_of(name: str) -> list[str]:
    return [r["ObjectIdentifier"].upper() for r in records(name)]


DOMAIN = records("domains")[0]["ObjectIdentifier"].upper()
DOMAIN_NAME = records("domains")[0]["Properties"]["name"].upper()


def member_edges() -> set[tuple[str, str]]:
    """(member, group) from the files: group members and primary groups, and the links of
    well-known groups graphsvc adds for every domain (as the reference does)."""
    edges = {
        (m["ObjectIdentifier"].upper(), g["ObjectIdentifier"].upper())
        for g in records("groups")
        for m in g.get("Members") or []
    }
    for name in ("users", "computers"):
        for r in records(name):
            if r.get("PrimaryGroupSID"):
                edges.add((r["ObjectIdentifier"].upper(), r["PrimaryGroupSID"].upper()))
    authenticated, everyone = f"{DOMAIN_NAME}-S-1-5-11", f"{DOMAIN_NAME}-S-1-1-0"
    edges |= {
        (f"{DOMAIN}-513", authenticated),
        (f"{DOMAIN}-515", authenticated),
        (authenticated, everyone),
        (f"{DOMAIN}-501", everyone),
    }
    return edges


def closure(start: str, step: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for following in step.get(todo.pop(), set()):
            if following not in seen:
                seen.add(following)
                todo.append(following)
    seen.discard(start)
    return seen


def groups_of(edges: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for member, group in edges:
        out[member].add(group)
    return out


def members_of(edges: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    inward: dict[str, set[str]] = defaultdict(set)
    for member, group in edges:
        inward[group].add(member)
    return inward


def session_pairs() -> set[tuple[str, str]]:
    pairs = set()
    for computer in records("computers"):
        for block in ("Sessions", "PrivilegedSessions", "RegistrySessions"):
            for s in (computer.get(block) or {}).get("Results") or []:
                pairs.add((s["ComputerSID"].upper(), s["UserSID"].upper()))
    for s in records("sessions"):
        pairs.add((s["ComputerSID"].upper(), s["UserSID"].upper()))
    return pairs


def listed(env: Env, path: str) -> set[str]:
    response = env.get(f"{path}?limit=10000")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["count"] == len(body["data"])
    found = {entry["objectID"] for entry in body["data"]}
    assert len(found) == len(body["data"]), "each node once"
    return found


@pytest.fixture
def v6(env: Env) -> Env:
    ingest(env, *(V6 / f"{name}.json" for name in FILES))
    return env


def test_memberships_and_members_follow_nesting_to_any_depth(v6: Env) -> None:
    edges = member_edges()
    up, down = groups_of(edges), members_of(edges)
    for user in ids_of("users"):
        assert listed(v6, f"/api/v2/users/{user}/memberships") == closure(user, up), user
    for group in ids_of("groups"):
        assert listed(v6, f"/api/v2/groups/{group}/members") == closure(group, down), group
        assert listed(v6, f"/api/v2/groups/{group}/memberships") == closure(group, up), group
    for computer in ids_of("computers"):
        assert listed(v6, f"/api/v2/computers/{computer}/group-membership") == closure(computer, up)


def test_sessions_from_each_side(v6: Env) -> None:
    pairs = session_pairs()
    assert pairs, "the fixture has sessions"
    for computer in ids_of("computers"):
        expected = {u for c, u in pairs if c == computer}
        assert listed(v6, f"/api/v2/computers/{computer}/sessions") == expected
    for user in {u for _, u in pairs}:
        expected = {c for c, u in pairs if u == user}
        assert listed(v6, f"/api/v2/users/{user}/sessions") == expected
    down = members_of(member_edges())
    for group in ids_of("groups"):
        members = closure(group, down) | {group}
        expected = {c for c, u in pairs if u in members}
        assert listed(v6, f"/api/v2/groups/{group}/sessions") == expected, group


def test_a_domains_objects_are_those_collected_in_it(v6: Env) -> None:
    for segment, name in (
        ("users", "users"),
        ("groups", "groups"),
        ("computers", "computers"),
        ("ous", "ous"),
        ("gpos", "gpos"),
    ):
        expected = {
            r["ObjectIdentifier"].upper()
            for r in records(name)
            if (r.get("Properties") or {}).get("domainsid", "").upper() == DOMAIN
        }
        assert expected, name
        assert listed(v6, f"/api/v2/domains/{DOMAIN}/{segment}") >= expected, segment


def test_linked_gpos_are_the_domains_and_ous_links(v6: Env) -> None:
    links = {
        r["ObjectIdentifier"].upper(): {link["GUID"].upper() for link in r.get("Links") or []}
        for r in [*records("domains"), *records("ous")]
    }
    assert listed(v6, f"/api/v2/domains/{DOMAIN}/linked-gpos") == links[DOMAIN]
    for ou in ids_of("ous"):
        assert listed(v6, f"/api/v2/ous/{ou}/gpos") == links[ou]
    for gpo in ids_of("gpos"):
        expected = {target for target, gpos in links.items() if gpo in gpos}
        assert listed(v6, f"/api/v2/gpos/{gpo}/ous") == expected


def test_dcom_users_is_the_seeds_dcom_rights(v6: Env) -> None:
    for computer in ids_of("computers"):
        seed = listed(v6, f"/api/v2/computers/{computer}/dcom-rights")
        assert listed(v6, f"/api/v2/computers/{computer}/dcom-users") == seed


# The entity kinds the v6 folder collects (certificate services: the ADCS zip's, below).
V6_SEGMENTS = [segment for segment in ENTITY_KINDS if (V6 / f"{segment}.json").exists()]


def check_entity_answer(env: Env, segment: str, object_id: str) -> dict[str, Any]:
    """The entity's properties and the size of each of its lists, each equal to its list's
    count; and with counts=false, its properties alone."""
    body: dict[str, Any] = env.get(f"/api/v2/{segment}/{object_id}").json()["data"]
    assert body["props"]["objectid"] == object_id
    lists = [e for e in ENTITY_LISTS if e.segment == segment]
    assert set(body) == {"props", *(e.count_key for e in lists)}, segment
    for entry in lists:
        size = env.get(f"/api/v2/{segment}/{object_id}/{entry.path}").json()["count"]
        assert body[entry.count_key] == size, (segment, entry.path)
    bare = env.get(f"/api/v2/{segment}/{object_id}?counts=false").json()["data"]
    assert set(bare) == {"props"}
    return body


def test_an_entity_answers_its_properties_and_the_size_of_each_list(v6: Env) -> None:
    for segment in V6_SEGMENTS:
        check_entity_answer(v6, segment, ids_of(segment)[0])


def test_base_answers_any_ad_object_with_its_controllers_and_controllables(v6: Env) -> None:
    """`/api/v2/base/{id}`, the reference's route for an object of any AD kind: the same
    object, and the same lists, as its own kind's route."""
    for segment in ("users", "computers", "groups", "gpos"):
        object_id = ids_of(segment)[0]
        body = check_entity_answer(v6, "base", object_id)
        own = v6.get(f"/api/v2/{segment}/{object_id}?counts=false").json()["data"]["props"]
        assert body["props"] == own
        for path in ("controllers", "controllables"):
            base = listed(v6, f"/api/v2/base/{object_id}/{path}")
            if segment in ("users", "computers", "groups") or path == "controllers":
                assert base == listed(v6, f"/api/v2/{segment}/{object_id}/{path}"), path
    assert v6.get("/api/v2/base/NO-SUCH-ID").status_code == 404


def test_certificate_services_entities_and_their_published_templates(env: Env) -> None:
    """The reference's certificate-services routes on its ADCS collection: each object and
    the size of its lists; a CA's published templates and a template's CAs are the CA
    records' EnabledCertTemplates, from either side; an unknown id is a 404."""
    path = SAMPLES["adcs zip"]
    ingest(env, path)
    documents = raw_documents(path)
    by_type = {d["meta"]["type"]: d["data"] for d in documents}
    published = {
        (t["ObjectIdentifier"].upper(), ca["ObjectIdentifier"].upper())
        for ca in by_type["enterprisecas"]
        for t in ca["EnabledCertTemplates"]
    }
    assert published
    for segment in CERTIFICATE_SERVICES:
        label = ENTITY_KINDS[segment]
        ids = [r["ObjectIdentifier"].upper() for r in by_type.get(segment, [])]
        for object_id in ids:
            check_entity_answer(env, segment, object_id)
        missing = env.get(f"/api/v2/{segment}/NO-SUCH-ID/controllers")
        assert missing.status_code == 404 and label in missing.json()["errors"][0]["message"]
        assert ids or segment == "issuancepolicies", segment
    for ca in {c for _, c in published}:
        found = listed(env, f"/api/v2/enterprisecas/{ca}/published-templates")
        assert found == {t for t, c in published if c == ca}
    for template in {t for t, _ in published}:
        found = listed(env, f"/api/v2/certtemplates/{template}/published-to-cas")
        assert found == {c for t, c in published if t == template}


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_every_entity_route_refuses_what_it_must(v6: Env) -> None:
    """Each route of the table: an unknown id (or one of another kind) is a 404 naming the
    kind; a bad flag, a bad page and type=graph are 400s; each answer is documented."""
    user = ids_of("users")[0]
    for op in OPERATIONS:
        segments = op.path.split("/")
        if len(segments) < 5 or segments[3] not in V6_SEGMENTS:
            continue
        if op.operation_id in ("ListComputerDCOMRights", "ListDomainExposure"):
            continue  # not of the table: the seed's own (test_dcom_rights), and exposure
            # (test_shortest_path)
        segment, label = segments[3], ENTITY_KINDS[segments[3]]
        other = user if segment != "users" else ids_of("computers")[0]
        response = v6.get(op.path.replace("{object_id}", other))
        assert response.status_code == 404, op.path
        assert f"no {label} with object id" in response.json()["errors"][0]["message"]
        own = op.path.replace("{object_id}", ids_of(segment)[0].lower())
        assert v6.get(own).status_code == 200, own  # ids match in any case
        if len(segments) == 5:
            assert v6.get(f"{own}?counts=maybe").status_code == 400
        else:
            assert v6.get(f"{own}?limit=-1").status_code == 400
            assert v6.get(f"{own}?type=graph").status_code == 400
            assert v6.get(f"{own}?sort_by=-name").status_code == 200


def test_an_encoded_slash_stays_in_its_object_id(env: Env, tmp_path: Path) -> None:
    """%2F in a path is part of its segment: an id holding a slash is reachable, and cannot
    be read as another route (/groups/A%2Fmembers is no list of A's members)."""
    domain = Domain("SLASH.LOCAL", "S-1-5-21-1/2")
    domain.users = {1100: "ALICE"}
    domain.groups = {1200: "OPERATORS"}
    domain.members = {1200: [1100]}
    ingest(env, *write_sharphound(tmp_path / "slash", domain))
    group = quote("S-1-5-21-1/2-1200", safe="")
    found = env.get(f"/api/v2/groups/{group}")
    assert found.status_code == 200, found.text
    assert found.json()["data"]["props"]["name"] == "OPERATORS@SLASH.LOCAL"
    members = env.get(f"/api/v2/groups/{group}/members").json()["data"]
    assert [m["name"] for m in members] == ["ALICE@SLASH.LOCAL"]
    # An id that looks like a group's id and a list's name is that id, and there is none.
    smuggled = env.get(f"/api/v2/groups/{quote('S-1-5-21-1/2-1200/members', safe='')}")
    assert smuggled.status_code == 404
    assert "no Group with object id" in smuggled.json()["errors"][0]["message"]


def test_unknown_kinds_answer_empty_lists(env: Env) -> None:
    """Before any ingest produced a list's relationship kind, its list is empty, not an
    error (a graph of OpenGraph data only, say)."""
    ingest(env, V6 / "users.json")  # users hold ACEs, but AdminTo comes from computers
    user = ids_of("users")[0]
    body = env.get(f"/api/v2/users/{user}/admin-rights").json()
    assert body == {"count": 0, "skip": 0, "limit": 10, "data": []}


# --- the attack graph's lists, on every relationship the files report ----------------------
#
# tests/test_sharphound.Expected works out every edge from the raw files (test_ad_relationships
# checks the store holds exactly those); each list below is then worked out from those edges
# by following nesting here, for every object of both real collections.

LOCAL_LISTS = {
    "AdminTo": ("admin-users", "admin-rights"),
    "CanRDP": ("rdp-users", "rdp-rights"),
    "ExecuteDCOM": ("dcom-users", "dcom-rights"),
    "CanPSRemote": ("ps-remote-users", "ps-remote-rights"),
}
TRUST_KINDS = {"SameForestTrust", "CrossForestTrust"}


class Collection:
    def __init__(self, env: Env, expected: Expected) -> None:
        self.env = env
        self.expected = expected
        self.members = members_of((s, e) for (s, k, e) in expected.edges if k == "MemberOf")

    def collected(self, *labels: str) -> list[str]:
        return sorted(oid for oid, (label, _) in self.expected.nodes.items() if label in labels)

    def holders(self, kinds: Iterable[str], target: str) -> set[str]:
        """Who holds one of `kinds` on `target`: the edges' starts and all their members."""
        kinds = set(kinds)
        direct = {s for (s, k, e) in self.expected.edges if k in kinds and e == target}
        return direct.union(*(closure(d, self.members) for d in direct))

    def held(self, kinds: Iterable[str]) -> dict[str, set[str]]:
        """Principal -> the targets it holds one of `kinds` on, itself or through groups; never
        itself (a user whose group holds GenericAll on it does not list itself)."""
        kinds = set(kinds)
        targets = {e for (_, k, e) in self.expected.edges if k in kinds}
        found: dict[str, set[str]] = defaultdict(set)
        for target in targets:
            for holder in self.holders(kinds, target) - {target}:
                found[holder].add(target)
        return found


@pytest.fixture(params=["v6 folder", "sample zip (3 domains, 3 collections)"])
def collection(env: Env, request: pytest.FixtureRequest) -> Collection:
    path = SAMPLES[request.param]
    ingest(env, path)
    return Collection(env, Expected(raw_documents(path)))


def test_local_group_lists_are_the_holders_and_their_members(collection: Collection) -> None:
    seen = 0
    for computer in collection.collected("Computer"):
        for kind, (users_list, _) in LOCAL_LISTS.items():
            expected = collection.holders({kind}, computer)
            listed_now = listed(collection.env, f"/api/v2/computers/{computer}/{users_list}")
            assert listed_now == expected, (computer, users_list)
            seen += len(expected)
    assert seen > 0


def test_rights_lists_are_what_a_principal_holds_itself_or_through_its_groups(
    collection: Collection,
) -> None:
    for kind, (_, rights_list) in LOCAL_LISTS.items():
        held = collection.held({kind})
        for principal in collection.collected("User", "Group"):
            segment = "users" if collection.expected.nodes[principal][0] == "User" else "groups"
            found = listed(collection.env, f"/api/v2/{segment}/{principal}/{rights_list}")
            assert found == held.get(principal, set()), (principal, rights_list)
    assert collection.held({"AdminTo"}), "the collections give local administrators"


def test_controllers_and_controllables_follow_every_acl_kind(collection: Collection) -> None:
    controlled = collection.held(ACL_KINDS)
    for segment, label in ENTITY_KINDS.items():
        for oid in collection.collected(label):
            expected = collection.holders(ACL_KINDS, oid)
            assert listed(collection.env, f"/api/v2/{segment}/{oid}/controllers") == expected, oid
            if segment in ("users", "groups", "computers"):
                found = listed(collection.env, f"/api/v2/{segment}/{oid}/controllables")
                assert found == controlled.get(oid, set()), oid
    assert sum(map(len, controlled.values())) > 100


def test_dc_syncers_and_trusts_of_each_domain(collection: Collection) -> None:
    edges = collection.expected.edges
    outward: dict[str, set[str]] = defaultdict(set)
    inward: dict[str, set[str]] = defaultdict(set)
    for s, k, e in edges:
        if k in TRUST_KINDS:
            outward[s].add(e)
            inward[e].add(s)
    for domain in collection.collected("Domain"):
        syncers = {s for (s, k, e) in edges if k == "DCSync" and e == domain}
        assert syncers, domain  # every collection's domain grants replication rights
        assert listed(collection.env, f"/api/v2/domains/{domain}/dc-syncers") == syncers
        base = f"/api/v2/domains/{domain}"
        assert listed(collection.env, f"{base}/inbound-trusts") == closure(domain, inward)
        assert listed(collection.env, f"{base}/outbound-trusts") == closure(domain, outward)
    assert any(outward.values()), "the collections have trusts"


def test_constrained_delegation_and_sql_admins_at_the_ends_of_their_chains(
    env: Env, tmp_path: Path
) -> None:
    """AllowedToDelegate and SQLAdmin lists, as the reference walks them: each chain
    followed to its end, and only its ends listed (a computer that delegates on is a step,
    not an end); group membership plays no part. Here A -> B -> C and D -> B delegate, and
    the service account S is a SQL administrator on C."""
    from tests.test_ad_relationships import document, write_documents

    sid = "S-1-5-21-7-7-7"
    a, b, c, d, s = (f"{sid}-{n}" for n in (1001, 1002, 1003, 1004, 1105))

    def computer(oid: str, *targets: str) -> dict[str, Any]:
        delegates = [{"ObjectIdentifier": t, "ObjectType": "Computer"} for t in targets]
        return {"ObjectIdentifier": oid, "Properties": {"name": f"{oid}.LAB"},
                "AllowedToDelegate": delegates}  # fmt: skip

    user = {
        "ObjectIdentifier": s,
        "Properties": {"name": "SQLSVC@LAB"},
        "AllowedToDelegate": [],
        "SPNTargets": [{"ComputerSID": c, "Port": 1433, "Service": "SQLAdmin"}],
    }
    folder = write_documents(
        tmp_path / "lab",
        {
            "computers": document(
                "computers", [computer(a, b), computer(b, c), computer(c), computer(d, b)]
            ),
            "users": document("users", [user]),
        },
    )
    ingest(env, folder)
    assert listed(env, f"/api/v2/computers/{a}/constrained-delegation-rights") == {c}
    assert listed(env, f"/api/v2/computers/{b}/constrained-delegation-rights") == {c}
    assert listed(env, f"/api/v2/computers/{c}/constrained-delegation-rights") == set()
    assert listed(env, f"/api/v2/computers/{c}/constrained-users") == {a, d}
    assert listed(env, f"/api/v2/computers/{b}/constrained-users") == {a, d}
    assert listed(env, f"/api/v2/computers/{c}/sql-admins") == {s}
    assert listed(env, f"/api/v2/users/{s}/sql-admin-rights") == {c}
    assert listed(env, f"/api/v2/users/{s}/constrained-delegation-rights") == set()
    counts = env.get(f"/api/v2/computers/{c}").json()["data"]
    assert (counts["constrainedUsers"], counts["sqlAdminUsers"], counts["constrainedPrivs"]) == (
        2,
        1,
        0,
    )
    user_counts = env.get(f"/api/v2/users/{s}").json()["data"]
    assert (user_counts["sqlAdmin"], user_counts["constrainedDelegation"]) == (1, 0)


def test_a_domains_foreign_users_groups_admins_and_gpo_controllers(
    env: Env, tmp_path: Path
) -> None:
    """Principals of another domain, as the reference lists them: members at any depth of
    the domain's groups (users, groups), administrators of its computers directly or
    through a group (the group and its members), holders of an ACE on its GPOs. Domain A's
    group GA2 holds GA1, which holds A's user UA, B's user UB and B's group GB (holding B's
    UB2); GB and UA administer A's computer; UB holds GenericAll on A's GPO."""
    from tests.test_ad_relationships import document, write_documents

    a, b = "S-1-5-21-1-1-1", "S-1-5-21-2-2-2"
    ua, ub, ub2 = f"{a}-1101", f"{b}-1101", f"{b}-1102"
    ga1, ga2, gb, computer, gpo = f"{a}-1001", f"{a}-1002", f"{b}-1201", f"{a}-2001", "GPO-A1"

    def ref(oid: str, kind: str) -> dict[str, str]:
        return {"ObjectIdentifier": oid, "ObjectType": kind}

    def node(oid: str, sid: str, name: str, **blocks: Any) -> dict[str, Any]:
        return {"ObjectIdentifier": oid, "Properties": {"name": name, "domainsid": sid}, **blocks}

    administrators = {"ObjectIdentifier": f"{computer}-544", "Collected": True,
                      "Results": [ref(gb, "Group"), ref(ua, "User")]}  # fmt: skip
    ace = {"PrincipalSID": ub, "PrincipalType": "User", "RightName": "GenericAll",
           "IsInherited": False}  # fmt: skip
    folder = write_documents(
        tmp_path / "two-domains",
        {
            "domains": document("domains", [node(a, a, "A.LOCAL"), node(b, b, "B.LOCAL")]),
            "users": document(
                "users",
                [
                    node(ua, a, "UA@A.LOCAL"),
                    node(ub, b, "UB@B.LOCAL"),
                    node(ub2, b, "UB2@B.LOCAL"),
                ],
            ),
            "groups": document(
                "groups",
                [
                    node(
                        ga1,
                        a,
                        "GA1@A.LOCAL",
                        Members=[ref(ua, "User"), ref(ub, "User"), ref(gb, "Group")],
                    ),
                    node(ga2, a, "GA2@A.LOCAL", Members=[ref(ga1, "Group")]),
                    node(gb, b, "GB@B.LOCAL", Members=[ref(ub2, "User")]),
                ],
            ),
            "computers": document(
                "computers", [node(computer, a, "HOST.A.LOCAL", LocalGroups=[administrators])]
            ),
            "gpos": document("gpos", [node(gpo, a, "POLICY@A.LOCAL", Aces=[ace])]),
        },
    )
    ingest(env, folder)
    assert listed(env, f"/api/v2/domains/{a}/foreign-users") == {ub, ub2}
    assert listed(env, f"/api/v2/domains/{a}/foreign-groups") == {gb}
    assert listed(env, f"/api/v2/domains/{a}/foreign-admins") == {gb, ub2}
    assert listed(env, f"/api/v2/domains/{a}/foreign-gpo-controllers") == {ub}
    assert listed(env, f"/api/v2/domains/{b}/foreign-users") == set()
    counts = env.get(f"/api/v2/domains/{a}").json()["data"]
    assert [counts[k] for k in ("foreignUsers", "foreignGroups", "foreignAdmins",
                                "foreignGPOControllers")] == [2, 1, 2, 1]  # fmt: skip


# --- how each listed principal holds its right (`holds`) -------------------------------------


def holds_of(env: Env, path: str) -> dict[str, set[tuple[str, str | None]]]:
    """A list's nodes, each with its holdings as (kind, the object id it comes through)."""
    body = env.get(f"{path}?limit=10000").json()
    return {
        row["objectID"]: {
            (held["kind"], held["through"]["objectID"] if held["through"] else None)
            for held in row["holds"]
        }
        for row in body["data"]
    }


def test_each_listed_principal_says_which_right_it_holds_and_through_which_group(
    collection: Collection,
) -> None:
    edges = collection.expected.edges
    groups = groups_of((s, e) for (s, k, e) in edges if k == "MemberOf")

    def holdings(principal: str, kinds: set[str], target: str) -> set[tuple[str, str | None]]:
        """The edges of `kinds` into `target` from the principal (through None) or from any
        group it is in at any depth (through that group)."""
        found: set[tuple[str, str | None]] = set()
        for via in {principal} | closure(principal, groups):
            for s, k, e in edges:
                if s == via and e == target and k in kinds:
                    found.add((k, None if via == principal else via))
        return found

    through_groups = 0
    for computer in collection.collected("Computer"):
        for kinds, path in (({"AdminTo"}, "admin-users"), (set(ACL_KINDS), "controllers")):
            listed_holds = holds_of(collection.env, f"/api/v2/computers/{computer}/{path}")
            for principal, found in listed_holds.items():
                assert found == holdings(principal, kinds, computer), (computer, principal)
                through_groups += sum(1 for _, via in found if via)
    admin_rights = collection.held({"AdminTo"})
    for principal in collection.collected("User", "Group"):
        segment = "users" if collection.expected.nodes[principal][0] == "User" else "groups"
        listed_holds = holds_of(collection.env, f"/api/v2/{segment}/{principal}/admin-rights")
        assert set(listed_holds) == admin_rights.get(principal, set())
        for computer, found in listed_holds.items():
            assert found == holdings(principal, {"AdminTo"}, computer), (principal, computer)
    assert through_groups > 10, "the collections' admins and controllers come through groups"


def test_a_list_of_one_hop_names_the_kinds(env: Env) -> None:
    """A domain's escalations list each principal with the escalations it holds (no group)."""
    ingest(env, SAMPLES["sample zip (3 domains, 3 collections)"])
    domains = env.get("/api/v2/available-domains").json()["data"]
    found: dict[str, set[tuple[str, str | None]]] = {}
    for domain in domains:
        if domain["type"] == "active-directory":
            found |= holds_of(env, f"/api/v2/domains/{domain['id']}/adcs-escalations")
    kinds = {kind for held in found.values() for kind, _ in held}
    assert {"ADCSESC1", "GoldenCert"} <= kinds
    assert all(via is None for held in found.values() for _, via in held)
    assert all(held for held in found.values()), "every listed principal holds one"
