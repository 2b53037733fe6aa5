"""The Azure graph: every AzureHound record kind the reference reads, and the edges its Azure
and hybrid post-processing derive (analysis/azure.py, analysis/hybrid.py), on both stores.

The tenant (tests/fixtures/azure/contoso) was written for these tests record by record in
AzureHound's shapes (its newer output: role-assignment records per role definition, resource
roles split per role, key vault access policies one per entry), with one AD user
synchronized to Entra: no public AzureHound output holds role assignments. Each expectation
names the rule it checks; the reference's own harnesses follow."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from graphsvc.analysis import azure as rules
from tests.conftest import FIXTURES, Env, ingest
from tests.test_ad_relationships import derived_edges, stored_edges
from tests.test_escalations import HARNESSES
from tests.test_sharphound import SAMPLES, TESTLAB
from tests.test_shortest_path import answered_edges, ask
from tests.test_tokens import send

AZURE_HARNESSES = HARNESSES / "azure"
# A tenant written for these tests, record by record in AzureHound's shapes (docs/azure.md
# says what is in it), and the AD user one of its users is synchronized from.
CONTOSO = FIXTURES / "azure" / "contoso"

TENANT = "6C12B0B0-B2CC-4A73-8252-0B94BFCA2145"
SUBSCRIPTION = "/SUBSCRIPTIONS/A1B2C3D4-0000-4000-8000-000000000001"
GROUP_RG = f"{SUBSCRIPTION}/RESOURCEGROUPS/PROD"
VM = f"{GROUP_RG}/PROVIDERS/MICROSOFT.COMPUTE/VIRTUALMACHINES/WEB01"
VAULT = f"{GROUP_RG}/PROVIDERS/MICROSOFT.KEYVAULT/VAULTS/SECRETS01"
MANAGEMENT_GROUP = "/PROVIDERS/MICROSOFT.MANAGEMENT/MANAGEMENTGROUPS/ROOT"
AD_SID = "S-1-5-21-1000000001-1000000002-1000000003-1105"


def uid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


ALICE, BOB, CAROL, DAVE, ERIN, FRANK = (uid(n) for n in (1, 2, 3, 4, 5, 6))
ORDINARY, ASSIGNABLE, UNUSED_ASSIGNABLE = uid(10), uid(11), uid(12)
APP, APP_SP, GRAPH_SP, RUNNER_SP = uid(20), uid(21), uid(22), uid(23)
WIN_DEVICE, IOS_DEVICE = uid(30), uid(31)
VM_IDENTITY = uid(40)
ROLES = {
    "global": rules.GLOBAL_ADMINISTRATOR,
    "helpdesk": rules.HELPDESK_ADMINISTRATOR,
    "intune": rules.INTUNE_ADMINISTRATOR,
    "appadmin": rules.APPLICATION_ADMINISTRATOR,
    "hybrid": rules.HYBRID_IDENTITY_ADMINISTRATOR,
    "reader": rules.DIRECTORY_READERS,
    "groups": rules.GROUPS_ADMINISTRATOR,
    "pra": rules.PRIVILEGED_ROLE_ADMINISTRATOR,
}


def role_node(name: str) -> str:
    return f"{ROLES[name].upper()}@{TENANT}"


def rbac(principal: str, scope: str, role: str) -> dict[str, Any]:
    return {
        "properties": {
            "principalId": principal,
            "scope": scope.lower(),
            "roleDefinitionId": f"/providers/roleDefinitions/{role}",
        }
    }


def tenant_records() -> list[dict[str, Any]]:
    """The Contoso tenant's records (a fresh copy each time: tests edit them)."""
    records: list[dict[str, Any]] = json.loads((CONTOSO / "azurehound.json").read_text())["data"]
    return records


def write_collection(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    """A folder of the tenant's records as AzureHound writes them, and the AD user one of
    its users is synchronized from."""
    folder = tmp_path / "azure"
    folder.mkdir(parents=True, exist_ok=True)
    document = {"meta": {"type": "azure", "version": 5, "count": len(records)}, "data": records}
    (folder / "azurehound.json").write_text(json.dumps(document))
    shutil.copy(CONTOSO / "ad-user.json", folder / "ad-user.json")
    return folder


def test_every_record_kind_becomes_the_reference_nodes_and_edges(env: Env, tmp_path: Path) -> None:
    result = ingest(env, write_collection(tmp_path, tenant_records()))
    assert result.skipped == {"AzureHound AZStorageAccount": 1}
    edges = set(stored_edges(env))
    expected_ingest = {
        (TENANT, "AZContains", ALICE),
        (TENANT, "AZContains", role_node("global")),
        (TENANT, "AZContains", MANAGEMENT_GROUP),
        (DAVE, "AZMemberOf", ASSIGNABLE),
        (APP, "AZRunsAs", APP_SP),
        (BOB, "AZOwns", APP),
        (ALICE, "AZHasRole", role_node("global")),
        (ASSIGNABLE, "AZHasRole", role_node("intune")),
        (ERIN, "AZAppAdmin", APP_SP),
        (DAVE, "AZRoleEligible", role_node("global")),
        (RUNNER_SP, "AZMGGroup_ReadWrite_All", GRAPH_SP),
        (SUBSCRIPTION, "AZContains", GROUP_RG),
        (MANAGEMENT_GROUP, "AZContains", SUBSCRIPTION),
        (ALICE, "AZOwner", SUBSCRIPTION),
        (GROUP_RG, "AZContains", VM),
        (GROUP_RG, "AZContains", VAULT),
        (VM, "AZManagedIdentity", VM_IDENTITY),
        (ORDINARY, "AZVMAdminLogin", VM),
        (ORDINARY, "AZOwns", WIN_DEVICE),
        (ERIN, "AZGetKeys", VAULT),
    }
    assert expected_ingest <= edges, expected_ingest - edges
    # Not the subscription's own assignment; "get" is not "Get"; secrets only listed.
    assert (BOB, "AZOwner", SUBSCRIPTION) not in edges
    assert {(ERIN, "AZGetCertificates", VAULT), (ERIN, "AZGetSecrets", VAULT)}.isdisjoint(edges)
    assert (ERIN, "AZHasRole", role_node("appadmin")) not in edges
    names = node_names(env, [ALICE, ORDINARY, APP, role_node("global"), MANAGEMENT_GROUP, VM])
    assert names == {
        ALICE: "ALICE@CONTOSO.EXAMPLE",
        ORDINARY: "SALES@CONTOSO",
        APP: "PAYROLL@CONTOSO.EXAMPLE",
        role_node("global"): "GLOBAL@CONTOSO",
        MANAGEMENT_GROUP: "ROOT@CONTOSO",
        VM: "WEB01",
    }
    carol = node_properties(env, CAROL)
    assert (carol["onpremid"], carol["onpremsyncenabled"], carol["enabled"]) == (AD_SID, True, True)
    assert node_properties(env, WIN_DEVICE)["operatingsystem"] == "WINDOWS"
    assert node_properties(env, VM)["operatingsystem"] == "LINUX"


def test_the_analysis_derives_the_reference_azure_and_hybrid_edges(
    env: Env, tmp_path: Path
) -> None:
    ingest(env, write_collection(tmp_path, tenant_records()))
    derived = {e for e in derived_edges(env) if e[1].startswith(("AZ", "Synced"))}
    users = {ALICE, BOB, CAROL, DAVE, ERIN, FRANK}
    groups = {ORDINARY, ASSIGNABLE, UNUSED_ASSIGNABLE}
    principals_and_apps = {APP, APP_SP, GRAPH_SP, RUNNER_SP}
    expected = {
        (ALICE, "AZGlobalAdmin", TENANT),
        # Global Administrator resets every password; Helpdesk Administrator those of users
        # with no role or only "lower" ones (Carol: Directory Readers), but not Dave's,
        # who is in a role-assignable group, nor Alice's and Bob's, whose roles are higher.
        *((role_node("global"), "AZResetPassword", u) for u in users),
        (role_node("helpdesk"), "AZResetPassword", CAROL),
        (role_node("helpdesk"), "AZResetPassword", ERIN),
        (role_node("helpdesk"), "AZResetPassword", BOB),  # his own role is in the list
        *((ALICE, "AZAddMembers", g) for g in groups),
        # Intune Administrator, held by a role-assignable group: the group and its direct
        # members run commands on Windows devices.
        (ASSIGNABLE, "AZExecuteCommand", WIN_DEVICE),
        (DAVE, "AZExecuteCommand", WIN_DEVICE),
        (DAVE, "AZAddMembers", ORDINARY),
        *((role_node("appadmin"), "AZAddSecret", x) for x in principals_and_apps),
        *((role_node("hybrid"), "AZAddOwner", x) for x in principals_and_apps),
        # Group.ReadWrite.All on the tenant's Microsoft Graph: members and owners of the
        # groups that are not role-assignable.
        (RUNNER_SP, "AZMGAddMember", ORDINARY),
        (RUNNER_SP, "AZMGAddOwner", ORDINARY),
        # PIM: Global Administrator's activation approved by Bob; Helpdesk Administrator's,
        # with no approver listed, by the Global and Privileged Role Administrator roles.
        (BOB, "AZRoleApprover", role_node("global")),
        (role_node("global"), "AZRoleApprover", role_node("helpdesk")),
        (role_node("pra"), "AZRoleApprover", role_node("helpdesk")),
        (AD_SID, "SyncedToEntraUser", CAROL),
        (CAROL, "SyncedToADUser", AD_SID),
    }
    assert derived == expected, (sorted(derived - expected), sorted(expected - derived))


def test_a_newer_collection_replaces_what_an_older_stated(env: Env, tmp_path: Path) -> None:
    """Stale Azure facts go: Erin left the group, the subscription changed owner, the vault's
    policy was withdrawn; the role analysis follows."""
    ingest(env, write_collection(tmp_path, tenant_records()))
    later = []
    for r in tenant_records():
        kind, data = r["kind"], r["data"]
        if kind == "AZGroupMember" and data["groupId"] == ORDINARY:
            data["members"] = []
        elif kind == "AZSubscriptionOwner":
            data["owners"] = [
                {"owner": rbac(BOB, SUBSCRIPTION, "8e3af657-a8ff-443c-a75c-2fe8c4bcb635")}
            ]
        elif kind == "AZKeyVaultAccessPolicy":
            continue
        elif kind == "AZRoleAssignment" and data["roleDefinitionId"] == ROLES["global"]:
            data["roleAssignments"] = []
        later.append(r)
    ingest(env, write_collection(tmp_path / "later", later))
    edges = set(stored_edges(env))
    assert (ERIN, "AZMemberOf", ORDINARY) not in edges
    assert (ALICE, "AZOwner", SUBSCRIPTION) not in edges
    assert (BOB, "AZOwner", SUBSCRIPTION) in edges
    assert (ERIN, "AZGetKeys", VAULT) not in edges
    assert (ALICE, "AZHasRole", role_node("global")) not in edges
    assert (ALICE, "AZGlobalAdmin", TENANT) not in edges
    assert (DAVE, "AZMemberOf", ASSIGNABLE) in edges  # stated again


def test_shortest_paths_run_through_azure_roles_and_from_ad_to_entra(
    env: Env, tmp_path: Path
) -> None:
    """Alice owns the subscription (an Azure role assignment); Bob resets Carol's password
    through his Helpdesk Administrator role; the AD user synchronized to Carol reaches the
    application Carol owns and the service principal it runs as."""
    ingest(env, write_collection(tmp_path, tenant_records()))
    paths = {
        (ALICE, SUBSCRIPTION): {(ALICE, "AZOwner", SUBSCRIPTION)},
        (BOB, CAROL): {
            (BOB, "AZHasRole", role_node("helpdesk")),
            (role_node("helpdesk"), "AZResetPassword", CAROL),
        },
        (AD_SID, APP_SP): {
            (AD_SID, "SyncedToEntraUser", CAROL),
            (CAROL, "AZOwns", APP),
            (APP, "AZRunsAs", APP_SP),
        },
    }
    for (start, end), expected in paths.items():
        response = ask(env, start, end)
        assert response.status_code == 200, response.text
        assert answered_edges(response.json()) == expected


def harness_ids(harness: dict[str, Any]) -> dict[str, str]:
    """Each harness node's object id in the graph (PIM policies name approvers by it)."""
    return {
        n["id"]: str(n["properties"].get("objectid") or n["id"]).upper() for n in harness["nodes"]
    }


def load_harness(env: Env, tmp_path: Path, harness: dict[str, Any]) -> dict[str, str]:
    ids = harness_ids(harness)
    nodes = [
        {
            "id": ids[n["id"]],
            "kinds": n["kinds"],
            "properties": {k: v for k, v in n["properties"].items() if k != "objectid"},
        }
        for n in harness["nodes"]
    ]
    edges = [
        {"start": {"value": ids[s]}, "end": {"value": ids[e]}, "kind": k}
        for s, k, e in harness["edges"]
    ]
    folder = tmp_path / "harness"
    folder.mkdir()
    (folder / "graph.json").write_text(json.dumps({"graph": {"nodes": nodes, "edges": edges}}))
    ingest(env, folder)
    return ids


@pytest.mark.parametrize("path", sorted(AZURE_HARNESSES.glob("*.json")), ids=lambda p: p.stem)
def test_a_reference_azure_harness_gets_the_edges_its_test_expects(
    env: Env, tmp_path: Path, path: Path
) -> None:
    harness = json.loads(path.read_text())
    ids = load_harness(env, tmp_path, harness)
    derived = derived_edges(env)
    for kind, pairs in harness["expected"].items():
        found = {(s, e) for s, k, e in derived if k == kind}
        assert found == {(ids[s], ids[e]) for s, e in pairs}, kind
    for start, kind, end in harness["absent"]:
        assert (ids[start], kind, ids[end]) not in derived


def node_names(env: Env, object_ids: list[str]) -> dict[str, str]:
    async def read(conn):  # type: ignore[no-untyped-def]
        return await conn.fetch("SELECT object_id, name FROM nodes")

    return {r[0]: r[1] for r in env.run_in_transaction(read) if r[0] in object_ids}


def node_properties(env: Env, object_id: str) -> dict[str, Any]:
    async def read(conn):  # type: ignore[no-untyped-def]
        return await conn.fetchval("SELECT properties FROM nodes WHERE object_id = $1", object_id)

    value = env.run_in_transaction(read)
    properties: dict[str, Any] = json.loads(value) if isinstance(value, str) else dict(value)
    return properties


def test_a_tenant_id_that_is_not_a_uuid_is_refused_by_name(env: Env, tmp_path: Path) -> None:
    records = [{"kind": "AZTenant", "data": {"tenantId": "contoso", "displayName": "Contoso"}}]
    folder = write_collection(tmp_path, records)
    done = env.cli("ingest", str(folder))
    assert done.exit_code != 0
    assert "azurehound.json: data[0]: an AZTenant needs 'tenantId', a UUID" in done.output


def azure(env: Env, entity_type: str, object_id: str, **query: str) -> Any:
    params = {"object_id": object_id, **query}
    return env.get(f"/api/v2/azure/{entity_type}?" + urlencode(params))


def listed(env: Env, entity_type: str, object_id: str, related: str, **query: str) -> set[str]:
    response = azure(env, entity_type, object_id, related_entity_type=related, **query)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["count"] == len(body["data"]) or "limit" in query
    return {node["props"]["objectid"] for node in body["data"]}


def test_the_azure_entity_route_answers_each_kind_with_its_counts_and_lists(
    env: Env, tmp_path: Path
) -> None:
    ingest(env, write_collection(tmp_path, tenant_records()))
    bob = azure(env, "users", BOB).json()["data"]
    assert (bob["kind"], bob["props"]["name"], bob["isTierZero"]) == (
        "AZUser",
        "BOB@CONTOSO.EXAMPLE",
        False,
    )
    assert "AZBase" in bob["kinds"]
    # Tier Zero's Azure selectors: the Global Administrator role and its holder.
    alice = azure(env, "users", ALICE).json()["data"]
    assert alice["isTierZero"] and "Tag_Tier_Zero" in alice["kinds"]
    assert alice["props"]["system_tags"] == "admin_tier_0" and not alice["isOwnedObject"]
    # Bob marked owned as the reference's clients mark him, through the older route.
    change = [{"selector_name": BOB, "sid": BOB, "action": "add"}]
    marked = send(env, "PUT", "/api/v2/asset-groups/2/selectors", change)
    assert marked.status_code == 201, marked.text
    owned = azure(env, "users", BOB).json()["data"]
    assert owned["isOwnedObject"] and not owned["isTierZero"] and "Tag_Owned" in owned["kinds"]
    assert owned["props"]["system_tags"] == "owned"
    assert azure(env, "roles", role_node("global")).json()["data"]["isTierZero"]
    counts = {k: bob[k] for k in ("group_membership", "roles", "execution_privileges")}
    assert counts == {"group_membership": 0, "roles": 1, "execution_privileges": 0}
    # Bob owns the application; the Global and Helpdesk Administrator roles reset his password.
    assert (bob["outbound_object_control"], bob["inbound_object_control"]) == (1, 2)
    assert listed(env, "users", BOB, "outbound-control") == {APP}
    assert listed(env, "users", BOB, "inbound-control") == {
        role_node("global"),
        role_node("helpdesk"),
    }
    # Dave holds Intune Administrator through his role-assignable group.
    assert listed(env, "users", DAVE, "roles") == {role_node("intune")}
    assert listed(env, "users", DAVE, "group-membership") == {ASSIGNABLE}
    assert listed(env, "groups", ASSIGNABLE, "group-members") == {DAVE}
    assert listed(env, "users", DAVE, "outbound-execution-privileges") == {WIN_DEVICE}
    # Erin logs in to the VM as a member of Sales.
    assert listed(env, "users", ERIN, "outbound-execution-privileges") == {VM}
    assert azure(env, "users", BOB, counts="false").json()["data"].keys().isdisjoint({"roles"})

    tenant = azure(env, "tenants", TENANT).json()["data"]
    assert tenant["descendents"]["descendent_counts"] == {
        "AZUser": 6, "AZGroup": 3, "AZManagementGroup": 1, "AZSubscription": 1,
        "AZResourceGroup": 1, "AZVM": 1, "AZManagedCluster": 0, "AZVMScaleSet": 0,
        "AZContainerRegistry": 0, "AZWebApp": 0, "AZLogicApp": 0, "AZAutomationAccount": 0,
        "AZKeyVault": 1, "AZApp": 1, "AZServicePrincipal": 3, "AZDevice": 2,
        "AZFunctionApp": 0,
    }  # fmt: skip
    assert listed(env, "tenants", TENANT, "descendent-virtual-machines") == {VM}
    assert listed(env, "subscriptions", SUBSCRIPTION, "descendent-key-vaults") == {VAULT}
    vault = azure(env, "key-vaults", VAULT).json()["data"]
    assert vault["Readers"] == {
        "KeyReaders": 1,
        "CertificateReaders": 0,
        "SecretReaders": 0,
        "AllReaders": 1,
    }
    assert azure(env, "vms", VM).json()["data"]["inboundExecutionPrivileges"] == 2
    assert listed(env, "vms", VM, "inbound-execution-privileges") == {ORDINARY, ERIN}
    # Sales owns the device and its member Erin with it; Intune Administrator runs commands.
    assert listed(env, "devices", WIN_DEVICE, "inbound-control") == {
        ORDINARY,
        ERIN,
        ASSIGNABLE,
        DAVE,
    }
    intune = azure(env, "roles", role_node("intune")).json()["data"]
    assert (intune["active_assignments"], intune["approvers"]) == (2, 0)
    assert listed(env, "roles", role_node("helpdesk"), "role-approvers") == {
        role_node("global"),
        role_node("pra"),
    }
    runner = azure(env, "service-principals", RUNNER_SP).json()["data"]
    assert runner["outbound-abusable-app-role-assignments"] == 1
    assert listed(
        env, "service-principals", RUNNER_SP, "outbound-abusable-app-role-assignments"
    ) == {GRAPH_SP}
    assert azure(env, "service-principals", APP_SP).json()["data"]["props"]["appid"] == APP
    payroll = azure(env, "applications", APP).json()["data"]
    assert payroll["props"]["service_principal_id"] == APP_SP
    page = azure(env, "tenants", TENANT, related_entity_type="descendent-users", limit="2")
    assert (page.json()["count"], len(page.json()["data"])) == (6, 2)


@pytest.mark.parametrize(
    ("path", "status", "names"),
    [
        (f"widgets?object_id={ALICE}", 400, "unknown Azure entity type 'widgets'"),
        ("users", 400, "object_id"),
        (f"users?object_id={ALICE}&related_entity_type=friends", 400, "group-membership"),
        (f"users?object_id={ALICE}&related_entity_type=roles&type=graph", 400, "type=graph"),
        (f"users?object_id={uid(404)}", 404, "no AZUser"),
        (f"users?object_id={ORDINARY}", 404, "no AZUser"),  # a group is not a user
        (f"users?object_id={ALICE}&counts=maybe", 400, "counts"),
    ],
)
def test_the_azure_entity_route_refuses_what_it_cannot_answer(
    env: Env, tmp_path: Path, path: str, status: int, names: str
) -> None:
    ingest(env, write_collection(tmp_path, tenant_records()))
    response = env.get(f"/api/v2/azure/{path}")
    assert response.status_code == status
    assert names in response.json()["errors"][0]["message"]


def edit(records: list[dict[str, Any]], kind: str, **changes: Any) -> list[dict[str, Any]]:
    """The records with the first of `kind` given `changes` in its data."""
    found = next(r for r in records if r["kind"] == kind)
    found["data"].update(changes)
    return records


@pytest.mark.parametrize(
    ("kind", "changes", "message"),
    [
        ("AZGroupMember", {"members": 5}, "'members' must be a list"),
        ("AZAppOwner", {"owners": {"owner": {}}}, "'owners' must be a list"),
        ("AZRoleAssignment", {"roleAssignments": "all"}, "'roleassignments' must be a list"),
        ("AZSubscriptionOwner", {"owners": True}, "'owners' must be a list"),
        (
            "AZKeyVaultAccessPolicy",
            {"permissions": {"secrets": "NoGetOrList"}},
            ".permissions: 'secrets' must be a list",
        ),
        (
            "AZRoleManagementPolicyAssignment",
            {"endUserAssignmentUserApprovers": "BOB"},
            "'enduserassignmentuserapprovers' must be a list",
        ),
        ("AZUser", {"tenantId": "contoso"}, "'tenantId' must be a UUID"),
        ("AZUser", {"displayName": {"first": "a"}}, "'displayname' must be text"),
        ("AZUser", {"id": "a\x00b"}, "must not contain a NUL character"),
        ("AZGroup", {"id": "G" * 600}, "is longer than 512 characters"),
        (
            "AZRoleAssignment",
            {"roleAssignments": [{"principalId": "x", "directoryScopeId": 21}]},
            "'directoryScopeId' must be text",
        ),
    ],
)
def test_a_malformed_record_is_refused_by_file_and_element(
    env: Env, tmp_path: Path, kind: str, changes: dict[str, Any], message: str
) -> None:
    """Nothing is stored: the run is refused whole, naming the file and the record."""
    folder = write_collection(tmp_path, edit(tenant_records(), kind, **changes))
    done = env.cli("ingest", str(folder))
    assert done.exit_code != 0
    assert "azurehound.json" in done.output and message in done.output, done.output
    assert "Traceback" not in done.output
    assert node_names(env, [ALICE]) == {}


def test_every_fact_a_record_states_whole_is_replaced_by_a_newer_one(
    env: Env, tmp_path: Path
) -> None:
    """Besides members, owners and role holders: a Graph permission withdrawn, an
    eligibility ended, a subscription moved, a managed identity removed, a property
    cleared, all go with the newer collection."""
    ingest(env, write_collection(tmp_path, tenant_records()))
    later = [
        r
        for r in tenant_records()
        if r["kind"]
        not in (
            "AZAppRoleAssignment",
            "AZRoleEligibilityScheduleInstance",
            "AZManagementGroupDescendant",
        )
    ]
    edit(later, "AZVM", identity=None)
    carol = next(r for r in later if r["kind"] == "AZUser" and r["data"]["id"] == CAROL)
    carol["data"].update(onPremisesSecurityIdentifier=None, onPremisesSyncEnabled=None)
    ingest(env, write_collection(tmp_path / "later", later))
    edges = set(stored_edges(env))
    gone = {
        (RUNNER_SP, "AZMGGroup_ReadWrite_All", GRAPH_SP),
        (RUNNER_SP, "AZMGAddMember", ORDINARY),
        (DAVE, "AZRoleEligible", role_node("global")),
        (MANAGEMENT_GROUP, "AZContains", SUBSCRIPTION),
        (VM, "AZManagedIdentity", VM_IDENTITY),
        (AD_SID, "SyncedToEntraUser", CAROL),
    }
    assert gone.isdisjoint(edges), gone & edges
    assert {(TENANT, "AZContains", SUBSCRIPTION), (GROUP_RG, "AZContains", VM)} <= edges
    assert "onpremid" not in node_properties(env, CAROL)


def test_an_unknown_kind_is_reported_without_its_control_characters(
    env: Env, tmp_path: Path
) -> None:
    records = [*tenant_records(), {"kind": "AZNew\r\nrun fake: 0 nodes", "data": {}}]
    result = ingest(env, write_collection(tmp_path, records))
    assert result.skipped == {
        "AzureHound AZStorageAccount": 1,
        "AzureHound AZNew??run?fake??0?nodes": 1,
    }


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"id": "N1", "kinds": ["Thing"], "properties": {"note": "a\x00b"}}, "holds a NUL"),
        ({"id": "N\x002", "kinds": ["Thing"]}, "holds a NUL character"),
        ({"id": "N3", "kinds": ["Thing"], "properties": {"name": "n" * 2000}}, "longer than 1024"),
    ],
)
def test_what_the_store_cannot_hold_is_refused_for_every_format(
    env: Env, tmp_path: Path, node: dict[str, Any], message: str
) -> None:
    """An OpenGraph node (any collector's, the writer checks) with a NUL character or a name
    the store's column cannot hold: a clear refusal, never a database error or traceback."""
    path = tmp_path / "graph.json"
    other = {"id": "N0", "kinds": ["Thing"]}
    path.write_text(json.dumps({"graph": {"nodes": [other, node]}}))
    done = env.cli("ingest", str(path))
    assert done.exit_code != 0
    assert "graph.json" in done.output and message in done.output, done.output
    assert "Traceback" not in done.output


@pytest.mark.parametrize(
    "path", sorted((AZURE_HARNESSES / "queries").glob("*.json")), ids=lambda p: p.stem
)
def test_a_reference_azure_query_harness_gets_the_lists_its_test_expects(
    env: Env, tmp_path: Path, path: Path
) -> None:
    """The reference's entity-panel and controller tests, asked of the Azure entity route."""
    harness = json.loads(path.read_text())
    ids = load_harness(env, tmp_path, harness)
    for asked in harness["route"]:
        object_id = ids[asked["object"]]
        if "list" in asked:
            found = listed(env, asked["entity_type"], object_id, asked["list"])
            assert found == {ids[name] for name in asked["exactly"]}, asked
            continue
        data = azure(env, asked["entity_type"], object_id).json()["data"]
        for key, count in asked.get("counts", {}).items():
            assert data[key] == count, asked
        if "nonzero" in asked:
            assert data[asked["nonzero"]] > 0, asked
            plain = azure(env, asked["entity_type"], object_id, counts="false").json()["data"]
            assert asked["nonzero"] not in plain and plain["props"]["objectid"] == object_id


def test_the_tenant_s_ad_user_is_nobody_of_the_readme_s_lab(env: Env) -> None:
    """The README's tour loads the tenant into the store that holds TESTLAB: its AD user
    had DFM's object id, and renamed DFM to CAROL@LAB.LOCAL for every later step."""
    ingest(env, SAMPLES["v6 folder"])
    ingest(env, CONTOSO)
    dfm = env.get(f"/api/v2/users/{TESTLAB}-1105?counts=false")
    assert dfm.status_code == 200, dfm.text
    assert dfm.json()["data"]["props"]["name"] == "DFM@TESTLAB.LOCAL"
    carol = env.get(f"/api/v2/users/{AD_SID}?counts=false")
    assert carol.json()["data"]["props"]["name"] == "CAROL@LAB.LOCAL"
