"""Tags (graphsvc/tags): Tier Zero with the reference's default selectors, Owned, and labels
an administrator adds, through the reference's `asset-group-tags` routes and the older
`asset-groups` routes its clients mark owned objects with. Marks are seen in Cypher, in
paths, on entity pages and in search, and survive a later ingest; a Cypher selector's
members follow the data. Both stores, answers validated against the OpenAPI document."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from graphsvc.errors import ApiError
from graphsvc.tags import tagging
from tests.conftest import Env, ingest
from tests.test_entities import closure, groups_of, members_of
from tests.test_sharphound import SAMPLES, TESTLAB, Expected, raw_documents
from tests.test_tokens import send

TAGS = "/api/v2/asset-group-tags"
GROUPS = "/api/v2/asset-groups"
CYPHER = "/api/v2/graphs/cypher"
V6 = SAMPLES["v6 folder"]
DFM = f"{TESTLAB}-1105"  # three steps from Domain Admins
DOMAIN_ADMINS = f"{TESTLAB}-512"


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def cypher_nodes(env: Env, query: str) -> dict[str, dict[str, Any]]:
    """Object id -> node of a Cypher answer (with properties); none: an empty dict."""
    answer = send(env, "POST", CYPHER, {"query": query, "include_properties": True})
    if answer.status_code == 404:
        return {}
    return {n["objectId"]: n for n in ok(answer)["data"]["nodes"].values()}


def owned_group(env: Env) -> dict[str, Any]:
    """The Owned asset group, found as a C2 integration finds it."""
    groups = ok(env.get(GROUPS))["data"]["asset_groups"]
    return next(g for g in groups if g["system_group"] and g["tag"] == "owned")


def mark(env: Env, group_id: int, object_id: str, action: str = "add") -> Any:
    change = [{"selector_name": object_id, "sid": object_id, "action": action}]
    return ok(send(env, "PUT", f"{GROUPS}/{group_id}/selectors", change), 201)["data"]


def is_owned_on_page(env: Env, object_id: str) -> bool:
    props = ok(env.get(f"/api/v2/users/{object_id}?counts=false"))["data"]["props"]
    return bool(props["isOwnedObject"])


def path_nodes(env: Env, start: str, end: str) -> dict[str, dict[str, Any]]:
    uri = "/api/v2/graphs/shortest-path?" + urlencode({"start_node": start, "end_node": end})
    return {n["objectId"]: n for n in ok(env.get(uri))["data"]["nodes"].values()}


def test_a_client_of_the_reference_marks_an_object_owned_and_lists_owned_objects(
    env: Env,
) -> None:
    """The older routes with the bodies a C2 integration and a command-line tool send."""
    ingest(env, V6)
    group = owned_group(env)
    assert (group["id"], group["name"], group["selectors"]) == (2, "Owned", [])
    by_tag = ok(env.get(f"{GROUPS}?tag=eq:owned"))["data"]["asset_groups"]
    assert [g["id"] for g in by_tag] == [2]
    changed = mark(env, group["id"], DFM)
    assert [(s["name"], s["selector"]) for s in changed["added_selectors"]] == [(DFM, DFM)]
    members = ok(env.get(f"{GROUPS}/2/members"))
    assert [(m["object_id"], m["custom_member"], m["environment_kind"]) for m in members["data"][
        "members"
    ]] == [(DFM, True, "Domain")]  # fmt: skip
    assert ok(env.get(f"{GROUPS}/2/members/counts"))["data"] == {
        "total_count": 1,
        "counts": {"User": 1},
    }
    found = ok(env.get(f"/api/v2/search?{urlencode({'q': 'DFM@', 'type': 'User'})}"))["data"]
    assert [(r["objectid"], r["system_tags"]) for r in found] == [(DFM, "owned")]
    assert found[0]["isOwnedObject"] is True and found[0]["isTierZero"] is False
    assert "Tag_Owned" in found[0]["kinds"] and "User" in found[0]["kinds"]
    admins = ok(env.get(f"/api/v2/search?{urlencode({'q': 'DOMAIN ADMINS@'})}"))["data"]
    assert [(r["system_tags"], r["isTierZero"], r["isOwnedObject"]) for r in admins] == [
        ("admin_tier_0", True, False)
    ]
    assert "Tag_Tier_Zero" in admins[0]["kinds"] and "Tag_Owned" not in admins[0]["kinds"]
    # Adding it again under the same name changes nothing; removing it unmarks it.
    again = mark(env, 2, DFM)
    assert again["added_selectors"][0]["id"] == changed["added_selectors"][0]["id"]
    assert ok(env.get(f"{GROUPS}/2/custom-selectors"))["data"] == {"custom_member_count": 1}
    removed = mark(env, 2, DFM, "remove")
    assert [s["selector"] for s in removed["removed_selectors"]] == [DFM]
    assert ok(env.get(f"{GROUPS}/2/members"))["data"]["members"] == []
    assert not is_owned_on_page(env, DFM)


def test_owned_is_seen_in_cypher_paths_pages_and_after_a_later_ingest(env: Env) -> None:
    ingest(env, V6)
    assert cypher_nodes(env, "MATCH (n:Tag_Owned) RETURN n") == {}
    mark(env, 2, DFM)
    owned = cypher_nodes(env, "MATCH (n:Tag_Owned) RETURN n")
    assert list(owned) == [DFM]
    assert owned[DFM]["isOwnedObject"] is True and owned[DFM]["isTierZero"] is False
    assert "Tag_Owned" in owned[DFM]["kinds"]
    assert owned[DFM]["properties"]["system_tags"] == "owned"
    tagged = cypher_nodes(env, "MATCH (n) WHERE n.system_tags CONTAINS 'owned' RETURN n")
    assert list(tagged) == [DFM]
    assert is_owned_on_page(env, DFM)
    props = ok(env.get(f"/api/v2/users/{DFM}?counts=false"))["data"]["props"]
    assert props["system_tags"] == "owned"
    # Lists and paths show the tag's label among the kinds.
    admins = ok(env.get(f"/api/v2/computers/{TESTLAB}-1104/admin-users"))["data"]
    assert {a["objectID"]: "Tag_Owned" in a["kinds"] for a in admins}[DFM] is True
    assert not any("Tag_Owned" in a["kinds"] for a in admins if a["objectID"] != DFM)
    on_path = path_nodes(env, DFM, DOMAIN_ADMINS)
    assert "Tag_Owned" in on_path[DFM]["kinds"]
    assert "Tag_Tier_Zero" in on_path[DOMAIN_ADMINS]["kinds"]
    assert on_path[DFM]["isOwnedObject"] is True
    assert on_path[DOMAIN_ADMINS]["isTierZero"] is True
    assert (on_path[DFM]["system_tags"], on_path[DOMAIN_ADMINS]["system_tags"]) == (
        "owned",
        "admin_tier_0",
    )
    for node in on_path.values():  # each node's older tags say what its marks say
        marks = (("admin_tier_0", node["isTierZero"]), ("owned", node["isOwnedObject"]))
        assert node["system_tags"].split() == [tag for tag, held in marks if held]
    assert not any(n["isOwnedObject"] for oid, n in on_path.items() if oid != DFM)
    # The owned-to-tier-zero question of the community's query library, as asked.
    shortest = cypher_nodes(
        env,
        "MATCH p=shortestPath((s:Tag_Owned)-[*1..]->(t:Tag_Tier_Zero)) WHERE s <> t RETURN p",
    )
    assert DFM in shortest and any(n["isTierZero"] for n in shortest.values())
    # A later collection of the same objects: the mark lives in its selector, not the node.
    ingest(env, V6)
    assert list(cypher_nodes(env, "MATCH (n:Tag_Owned) RETURN n")) == [DFM]
    assert is_owned_on_page(env, DFM)


def disabled_users(path: Path) -> set[str]:
    users = json.loads((path / "users.json").read_text("utf-8-sig"))
    return {
        u["ObjectIdentifier"]
        for u in users["data"]
        if u["Properties"].get("enabled") is False
    }  # fmt: skip


def test_a_cypher_selector_on_a_label_follows_the_data(env: Env, tmp_path: Path) -> None:
    ingest(env, V6)
    label = ok(send(env, "POST", TAGS, {"name": "Disabled accounts", "type": 2}), 201)["data"]
    assert (label["type"], label["name"]) == (2, "Disabled accounts")
    # A seed that does some work (pairs of nodes) before it answers the disabled users.
    query = "MATCH (u:User), (a), (b) WHERE u.enabled = false RETURN DISTINCT u"
    seed = {"type": 2, "value": query}
    made = send(env, "POST", f"{TAGS}/{label['id']}/selectors", {"name": "off", "seeds": [seed]})
    selector = ok(made, 201)["data"]

    def members() -> set[str]:
        page = ok(env.get(f"{TAGS}/{label['id']}/members?limit=1000"))
        return {m["object_id"] for m in page["data"]["members"]}

    assert members() == disabled_users(V6) and len(members()) == 2
    assert set(cypher_nodes(env, "MATCH (n:Tag_Disabled_accounts) RETURN n")) == members()
    # A later collection disables one more user: the selector's members follow.
    users = json.loads((V6 / "users.json").read_text("utf-8-sig"))
    esid = next(u for u in users["data"] if u["ObjectIdentifier"].endswith("-2106"))
    esid["Properties"]["enabled"] = False
    (tmp_path / "users.json").write_text(json.dumps({**users, "data": [esid]}))
    ingest(env, tmp_path / "users.json")
    assert members() == disabled_users(V6) | {esid["ObjectIdentifier"]}
    selected = ok(env.get(f"{TAGS}/{label['id']}/selectors/{selector['id']}/members"))
    assert {m["source"] for m in selected["data"]["members"]} == {1}
    counts = ok(env.get(f"{TAGS}/{label['id']}/selectors?counts=true"))["data"]["selectors"]
    assert [s["counts"]["members"] for s in counts] == [3]
    # Disabled, it selects nothing; deleted with its label, the label's kind is gone.
    patched = send(env, "PATCH", f"{TAGS}/{label['id']}/selectors/{selector['id']}",
                   {"disabled": True})  # fmt: skip
    assert ok(patched)["data"]["disabled_at"] is not None
    assert members() == set()
    ok(send(env, "DELETE", f"{TAGS}/{label['id']}"), 204)
    assert ok(env.get(f"{TAGS}/{label['id']}"), 404) is not None


def test_a_requested_analysis_tags_the_graph_again_and_changes_are_audited(env: Env) -> None:
    """Members are made again after every analysis, the one `PUT /api/v2/analysis` asks for
    as the one ending an ingest; each change of a tag is an audit event; a Read-Only user
    reads tags but changes none."""
    ingest(env, V6)
    mark(env, 2, DFM)
    label = ok(send(env, "POST", TAGS, {"name": "Disabled", "type": 2}), 201)["data"]
    seed = {"type": 2, "value": "MATCH (u:User) WHERE u.enabled = false RETURN u"}
    ok(send(env, "POST", f"{TAGS}/{label['id']}/selectors", {"name": "off", "seeds": [seed]}), 201)

    def members() -> set[str]:
        page = ok(env.get(f"{TAGS}/{label['id']}/members?limit=1000"))
        return {m["object_id"] for m in page["data"]["members"]}

    assert members() == disabled_users(V6) and is_owned_on_page(env, DFM)

    async def forget_members(conn: Any) -> None:
        await conn.execute("DELETE FROM tag_members")

    env.run_in_transaction(forget_members)
    assert members() == set() and not is_owned_on_page(env, DFM)
    headers = env.signed_headers("PUT", "/api/v2/analysis")
    assert env.request("PUT", "/api/v2/analysis", headers).status_code == 202
    assert members() == disabled_users(V6) and is_owned_on_page(env, DFM)

    events = ok(env.get("/api/v2/audit"))["data"]["logs"]
    assert [e["action"] for e in events if e["action"] != "LoginAttempt"][:4] == [
        "analysis.requested",
        "tags.CreateSelector",  # the label's Cypher selector
        "tags.CreateTag",  # the label
        "tags.CreateSelector",  # the owned mark, made through the older route
    ]
    marked = next(e for e in events if e["fields"].get("tag_id") == 2)
    assert marked["actor_name"] == "admin" and marked["status"] == "success"
    reader = env.user_with_token("reader", "Read-Only")
    assert ok(env.get(f"{TAGS}/{label['id']}/members", reader))["data"]["members"]
    refused = send(env, "PUT", f"{GROUPS}/2/selectors", [], reader)
    assert refused.status_code == 403 and "graphdb/Write" in refused.text
    refused = send(env, "POST", TAGS, {"name": "Mine", "type": 2}, reader)
    assert refused.status_code == 403


def expected_members_of_domain_admins(path: Path) -> set[str]:
    expected = Expected(raw_documents(path))
    members = members_of((s, e) for (s, k, e) in expected.edges if k == "MemberOf")
    return {DOMAIN_ADMINS} | closure(DOMAIN_ADMINS, members)


def test_preview_selects_nothing_and_expands_a_group_to_its_members(env: Env) -> None:
    ingest(env, V6)
    body = {"seeds": [{"type": 1, "value": DOMAIN_ADMINS}], "expansion": 2}
    preview = ok(send(env, "POST", f"{TAGS}/preview-selectors", body))["data"]["members"]
    assert {m["object_id"] for m in preview} == expected_members_of_domain_admins(V6)
    assert {m["source"] for m in preview if m["object_id"] == DOMAIN_ADMINS} == {1}
    assert {m["source"] for m in preview if m["object_id"] != DOMAIN_ADMINS} == {2}
    unexpanded = send(env, "POST", f"{TAGS}/preview-selectors", {**body, "expansion": 0})
    assert [m["object_id"] for m in ok(unexpanded)["data"]["members"]] == [DOMAIN_ADMINS]
    assert ok(env.get(f"{TAGS}?counts=true"))["data"]["tags"][1]["counts"]["members"] == 0


TESTLAB_ADMINISTRATORS = "TESTLAB.LOCAL-S-1-5-32-544"


def groups_of_v6() -> dict[str, set[str]]:
    expected = Expected(raw_documents(V6))
    return groups_of((s, e) for (s, k, e) in expected.edges if k == "MemberOf")


def test_tier_zero_has_the_references_default_selectors(env: Env) -> None:
    ingest(env, V6)
    tags = ok(env.get(f"{TAGS}?counts=true"))["data"]["tags"]
    assert [(t["id"], t["name"], t["type"], t["position"]) for t in tags] == [
        (1, "Tier Zero", 1, 1),
        (2, "Owned", 3, None),
    ]
    page = ok(env.get(f"{TAGS}/1/selectors?limit=100"))
    selectors = {s["name"]: s for s in page["data"]["selectors"]}
    assert page["count"] == len(selectors) == 42
    assert all(s["is_default"] for s in selectors.values())
    enabled = {n for n, s in selectors.items() if s["disabled_at"] is None}
    assert {"Domain Admins", "Administrator", "AdminSDHolder", "Global Administrator"} <= enabled
    assert "Account Operators" not in enabled
    assert tags[0]["counts"]["disabled_selectors"] == len(selectors) - len(enabled)
    domain_admins = selectors["Domain Admins"]
    assert domain_admins["seeds"] == [
        {"type": 2, "value": "MATCH (n:Group) WHERE n.objectid ENDS WITH '-512' RETURN n"}
    ]
    url = f"{TAGS}/1/selectors/{domain_admins['id']}"
    refused = send(env, "PATCH", url, {"disabled": True})
    assert refused.status_code == 403, refused.text
    assert send(env, "PATCH", url, {"name": "renamed"}).status_code == 403
    assert send(env, "DELETE", url).status_code == 403
    # Enabling a default that may be: its group joins Tier Zero at once.
    operators = selectors["Account Operators"]
    before = ok(env.get(f"{TAGS}/1/members/counts"))["data"]["total_count"]
    ok(send(env, "PATCH", f"{TAGS}/1/selectors/{operators['id']}", {"disabled": False}))
    after = ok(env.get(f"{TAGS}/1/members?limit=1000"))["data"]["members"]
    assert len(after) > before
    assert any(m["object_id"].endswith("S-1-5-32-548") for m in after)
    member = next(m for m in after if m["object_id"] == DOMAIN_ADMINS)
    info = ok(env.get(f"{TAGS}/1/members/{member['id']}"))["data"]["member"]
    # Its own selector's, and the Administrators group's, which it is a member of.
    assert TESTLAB_ADMINISTRATORS in closure(DOMAIN_ADMINS, groups_of_v6())
    assert [s["name"] for s in info["selectors"]] == ["Administrators", "Domain Admins"]
    assert info["properties"]["name"] == "DOMAIN ADMINS@TESTLAB.LOCAL"
    history = ok(env.get("/api/v2/asset-group-tags-history"))["data"]["records"]
    assert [(r["action"], r["target"]) for r in history] == [
        ("UpdateSelector", "Account Operators")
    ]
    found = send(env, "POST", "/api/v2/asset-group-tags-history", {"query": "account"})
    assert ok(found)["count"] == 1


def test_a_high_value_object_added_by_object_id_joins_tier_zero(env: Env) -> None:
    ingest(env, V6)
    workstation = f"{TESTLAB}-1104"
    assert not cypher_nodes(env, f"MATCH (c:Computer {{objectid: '{workstation}'}}) RETURN c")[
        workstation
    ]["isTierZero"]
    body = {"name": "WIN10", "seeds": [{"type": 1, "value": workstation}], "auto_certify": 2}
    ok(send(env, "POST", f"{TAGS}/1/selectors", body), 201)
    node = cypher_nodes(env, f"MATCH (c:Computer {{objectid: '{workstation}'}}) RETURN c")
    assert node[workstation]["isTierZero"] is True
    assert "admin_tier_0" in node[workstation]["properties"]["system_tags"]
    page = ok(env.get(f"/api/v2/computers/{workstation}?counts=false"))
    assert page["data"]["props"]["isTierZero"] is True


MIXED_SEEDS = [{"type": 1, "value": "A"}, {"type": 2, "value": "MATCH (n) RETURN n"}]


@pytest.mark.parametrize(
    ("method", "uri", "body", "status"),
    [
        ("POST", TAGS, {"name": "Tier 1", "type": 1}, 400),
        ("POST", TAGS, {"name": "bad/name"}, 400),
        ("POST", TAGS, {"name": "owned"}, 409),
        ("DELETE", f"{TAGS}/1", None, 403),
        ("PATCH", f"{TAGS}/2", {"name": "Pwned"}, 400),
        ("GET", f"{TAGS}/99", None, 404),
        ("POST", f"{TAGS}/2/selectors", {"name": "x", "seeds": []}, 400),
        ("POST", f"{TAGS}/2/selectors", {"name": "x", "seeds": [MIXED_SEEDS[0], MIXED_SEEDS[1]]},
         400),
        ("POST", f"{TAGS}/2/selectors",
         {"name": "x", "seeds": [{"type": 2, "value": "MATCH (n RETURN n"}]}, 400),
        ("POST", f"{TAGS}/2/selectors",
         {"name": "x", "seeds": [{"type": 1, "value": "A"}], "auto_certify": 1}, 400),
        ("POST", f"{TAGS}/1/selectors",
         {"name": "Domain Admins", "seeds": [{"type": 1, "value": "A"}]}, 409),
        ("DELETE", f"{GROUPS}/2", None, 409),
        ("PUT", f"{GROUPS}/2/selectors", [{"selector_name": "x", "sid": "A", "action": "own"}],
         400),
        ("GET", f"{TAGS}-history?action=eq:UpdateSelector&bogus=1", None, 400),
    ],
)  # fmt: skip
def test_bad_tag_requests_are_refused(
    env: Env, method: str, uri: str, body: Any, status: int
) -> None:
    answer = send(env, method, uri, body)
    assert answer.status_code == status, answer.text
    assert answer.json()["errors"][0]["message"]


def test_a_label_made_as_an_asset_group_is_a_tag(env: Env) -> None:
    ingest(env, V6)
    made = ok(send(env, "POST", GROUPS, {"name": "Crown Jewels", "tag": "crown_jewels"}), 201)
    group = made["data"]
    assert (group["tag"], group["system_group"], group["member_count"]) == (
        "crown_jewels", False, 0,
    )  # fmt: skip
    mark(env, group["id"], DOMAIN_ADMINS)
    tag = ok(env.get(f"{TAGS}/{group['id']}"))["data"]["tag"]
    assert (tag["name"], tag["type"]) == ("Crown Jewels", 2)
    # A label expands to children: the group's members are members too.
    members = ok(env.get(f"{GROUPS}/{group['id']}/members?limit=1000"))["data"]["members"]
    assert {m["object_id"] for m in members} == expected_members_of_domain_admins(V6)
    renamed = send(env, "PUT", f"{GROUPS}/{group['id']}", {"name": "Jewels"})
    assert ok(renamed)["data"]["name"] == "Jewels"
    assert set(cypher_nodes(env, "MATCH (n:Tag_Jewels) RETURN n")) == {
        m["object_id"] for m in members
    }
    selector = ok(env.get(f"{GROUPS}/{group['id']}"))["data"]["selectors"][0]
    ok(send(env, "DELETE", f"{GROUPS}/{group['id']}/selectors/{selector['id']}"), 204)
    assert ok(env.get(f"{GROUPS}/{group['id']}"))["data"]["member_count"] == 0
    ok(send(env, "DELETE", f"{GROUPS}/{group['id']}"), 204)
    found = ok(env.get(GROUPS))["data"]["asset_groups"]
    assert [g["tag"] for g in found] == ["admin_tier_0", "owned"]


def test_tags_are_searched_by_name(env: Env) -> None:
    ingest(env, V6)
    mark(env, 2, DFM)
    body = {"query": "dfm", "tag_type": 2}
    found = ok(send(env, "POST", f"{TAGS}/search", body))["data"]
    assert [m["object_id"] for m in found["members"]] == [DFM]
    zone = ok(send(env, "POST", f"{TAGS}/search", {"query": "tier", "tag_type": 1}))["data"]
    assert [t["name"] for t in zone["tags"]] == ["Tier Zero"]


def test_clearing_asset_group_selectors_removes_the_marks_people_added(env: Env) -> None:
    ingest(env, V6)
    mark(env, 2, DFM)
    body = {"name": "WIN10", "seeds": [{"type": 1, "value": f"{TESTLAB}-1104"}]}
    ok(send(env, "POST", f"{TAGS}/1/selectors", body), 201)
    defaults = ok(env.get(f"{TAGS}/1/selectors?limit=100"))["count"] - 1
    cleared = send(env, "POST", "/api/v2/clear-database", {"deleteAssetGroupSelectors": [1, 2]})
    assert cleared.status_code == 204, cleared.text
    assert ok(env.get(f"{GROUPS}/2/members"))["data"]["members"] == []
    left = ok(env.get(f"{TAGS}/1/selectors?limit=100"))["data"]["selectors"]
    assert len(left) == defaults and all(s["is_default"] for s in left)
    assert cypher_nodes(env, "MATCH (n:Tag_Owned) RETURN n") == {}


def test_changes_at_once_are_one_at_a_time(env: Env) -> None:
    """Two labels of one name created at once: one is kept, the other refused (the tags are
    held by each change: on PostgreSQL both passed the name check before). Selectors added
    at once each rebuild the members without colliding."""
    from graphsvc.accounts.permissions import Caller
    from graphsvc.store.accounts import Principal
    from graphsvc.store.db import run_in_transaction
    from graphsvc.tags import service

    assert env.token.user_id is not None
    caller = Caller(Principal(env.token.user_id, 1, False), None, frozenset())

    async def create(name: str) -> str:
        async def work(conn: Any) -> str:
            made = await service.add_label(conn, caller, name, "", name.lower())
            await asyncio.sleep(0.2)  # the other is under way meanwhile
            return made.data.name

        try:
            return await run_in_transaction(env.url, work)
        except ApiError as exc:
            return f"{exc.status}"

    async def both() -> list[str]:
        return list(await asyncio.gather(create("Twin"), create("twin")))

    assert sorted(asyncio.run(both())) in (["409", "Twin"], ["409", "twin"])
    env.wait_until_the_app_knows()
    ingest(env, V6)
    label = next(t for t in ok(env.get(TAGS))["data"]["tags"] if t["name"].lower() == "twin")

    def add(n: int) -> int:
        body = {"name": f"s{n}", "seeds": [{"type": 1, "value": DFM}]}
        return int(send(env, "POST", f"{TAGS}/{label['id']}/selectors", body).status_code)

    with ThreadPoolExecutor(6) as pool:  # the app's loop runs them at once
        assert list(pool.map(add, range(6))) == [201] * 6
    env.wait_until_the_app_knows()
    members = ok(env.get(f"{TAGS}/{label['id']}/members"))["data"]["members"]
    assert [m["object_id"] for m in members] == [DFM]


@pytest.mark.parametrize(
    ("method", "uri", "body", "status"),
    [
        ("POST", TAGS, {"name": "Tier_Zero"}, 409),  # would share Tier Zero's Cypher label
        ("POST", TAGS, {"name": "admin tier 0"}, 409),  # Tier Zero's older tag
        ("POST", TAGS, {"name": "Tag\n"}, 400),
        ("POST", TAGS, {"name": "Notes", "description": "a\u0000b"}, 400),
        ("POST", GROUPS, {"name": "Legacy", "tag": "legacy\n"}, 400),
        ("PUT", f"{GROUPS}/2/selectors", [{"selector_name": "x", "sid": DFM, "action": "add\n"}],
         400),
        ("PUT", f"{GROUPS}/2/selectors", [{"selector_name": "   ", "sid": DFM, "action": "add"}],
         400),
        ("PUT", f"{GROUPS}/2/selectors", [{"selector_name": "x", "sid": "a b", "action": "add"}],
         400),
        ("PUT", f"{GROUPS}/2/selectors", [{"selector_name": "x\u0000", "sid": DFM,
                                           "action": "add"}], 400),
        ("POST", f"{TAGS}/2/selectors", {"name": "x", "seeds": [{"type": 1, "value": "A\u0000"}]},
         400),
        ("POST", f"{TAGS}/2/selectors",
         {"name": "x", "seeds": [{"type": 2, "value": "MATCH (n) WHERE n.name = $x RETURN n"}]},
         400),  # fails on the graph: refused, not kept selecting nothing
        ("POST", f"{TAGS}/2/selectors",
         {"name": "x", "seeds": [{"type": 2, "value": "MATCH (a), (b), (c) RETURN a"}]}, 413),
        ("POST", f"{TAGS}/preview-selectors?limit=-1", {"seeds": [{"type": 1, "value": DFM}]},
         400),
        ("POST", f"{TAGS}/search", {"query": "     ", "tag_type": 1}, 400),
        ("POST", f"{TAGS}-history", {"query": "    "}, 400),
        ("GET", "/api/v2/graphs/paths-between?start_tag=owned&end_tag=1&skip=5", None, 400),
        ("GET", f"{GROUPS}?sort_by=bogus", None, 400),
        ("GET", f"{GROUPS}/99", None, 404),
    ],
)  # fmt: skip
def test_what_an_attack_found_is_refused(
    env: Env, method: str, uri: str, body: Any, status: int
) -> None:
    ingest(env, V6)
    answer = send(env, method, uri, body)
    assert answer.status_code == status, answer.text
    assert answer.json()["errors"][0]["message"]
    if uri == f"{GROUPS}/99":
        assert answer.json()["errors"][0]["context"] == "asset_group_id"


def test_a_rename_may_not_take_a_label_another_tag_has(env: Env) -> None:
    first = ok(send(env, "POST", TAGS, {"name": "A_B"}), 201)["data"]
    second = ok(send(env, "POST", TAGS, {"name": "C"}), 201)["data"]
    refused = send(env, "PATCH", f"{TAGS}/{second['id']}", {"name": "A B"})
    assert refused.status_code == 409, refused.text
    assert "A_B" in refused.json()["errors"][0]["message"]
    assert ok(send(env, "PATCH", f"{TAGS}/{first['id']}", {"name": "A B"}))["data"]["name"] == "A B"


def test_many_marks_in_one_request_and_the_groups_sorted(env: Env) -> None:
    ingest(env, SAMPLES["sample zip (3 domains, 3 collections)"])
    users = sorted(
        oid
        for oid, (label, _) in Expected(
            raw_documents(SAMPLES["sample zip (3 domains, 3 collections)"])
        ).nodes.items()
        if label == "User"
    )
    marks = [{"selector_name": u, "sid": u, "action": "add"} for u in users]
    assert len(mark_many(env, marks)["added_selectors"]) == len(users) > 50
    assert ok(env.get(f"{GROUPS}/2/members/counts"))["data"]["total_count"] == len(users)
    unmarks = [{**m, "action": "remove"} for m in marks[1:]]
    assert len(mark_many(env, unmarks)["removed_selectors"]) == len(users) - 1
    members = ok(env.get(f"{GROUPS}/2/members"))["data"]["members"]
    assert [m["object_id"] for m in members] == [users[0]]
    send(env, "POST", GROUPS, {"name": "Zeta", "tag": "aaa"})
    by_tag = ok(env.get(f"{GROUPS}?sort_by=tag"))["data"]["asset_groups"]
    assert [g["tag"] for g in by_tag] == ["aaa", "admin_tier_0", "owned"]
    by_name = ok(env.get(f"{GROUPS}?sort_by=-name"))["data"]["asset_groups"]
    assert [g["name"] for g in by_name] == ["Zeta", "Tier Zero", "Owned"]


def mark_many(env: Env, changes: list[dict[str, str]]) -> Any:
    return ok(send(env, "PUT", f"{GROUPS}/2/selectors", changes), 201)["data"]


def test_a_seed_past_its_time_at_ingest_keeps_its_earlier_members(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the end of an ingest no request can cancel a slow seed: it stops at its time, and
    its selector keeps what it selected before (a seed accepted on a small graph once held
    a larger ingest for hours)."""
    ingest(env, V6)
    label = ok(send(env, "POST", TAGS, {"name": "Off"}), 201)["data"]
    # A seed that does some work (pairs of nodes) before it answers the disabled users.
    query = "MATCH (u:User), (a), (b) WHERE u.enabled = false RETURN DISTINCT u"
    seed = {"type": 2, "value": query}
    ok(send(env, "POST", f"{TAGS}/{label['id']}/selectors", {"name": "off", "seeds": [seed]}), 201)
    before = {
        m["object_id"] for m in ok(env.get(f"{TAGS}/{label['id']}/members"))["data"]["members"]
    }
    users = json.loads((V6 / "users.json").read_text("utf-8-sig"))
    esid = next(u for u in users["data"] if u["ObjectIdentifier"].endswith("-2106"))
    esid["Properties"]["enabled"] = False
    (tmp_path / "users.json").write_text(json.dumps({**users, "data": [esid]}))
    monkeypatch.setattr(tagging, "TAGGING_SECONDS", 0.0)
    ingest(env, tmp_path / "users.json")
    after = {
        m["object_id"] for m in ok(env.get(f"{TAGS}/{label['id']}/members"))["data"]["members"]
    }
    assert after == before == disabled_users(V6)
