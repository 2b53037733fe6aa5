"""An Azure tenant at scale: a generated AzureHound collection of about `--objects` Entra and
Azure objects (users, groups, applications and service principals, devices, roles and their
assignments, Graph permissions, PIM policies, subscriptions, resource groups, VMs, key
vaults), ingested (the ingest ends with the analysis and the tagging), then analysed and
tagged again alone, each in a process of its own for its time and peak memory.

    python bench/azure.py [--objects 100000] [--postgres URL] [--smoke]

Results are printed and written to bench/results/azure.json; --smoke (CI) runs 2,000 objects
on SQLite.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from analysis import run_benchmark

from graphsvc.analysis import azure as rules
from graphsvc.demo.collectors import write_document
from graphsvc.ingest.azurehound import MS_GRAPH_APP_ID, OWNER_ROLE

HERE = Path(__file__).parent
TENANT = "0B5E2C1A-4D3F-4E6A-9B8C-7D6E5F4A3B2C"
# What a tenant of N objects holds, as shares of N (a large company's tenant: mostly users
# and their devices).
SHARES = {"AZUser": 0.55, "AZGroup": 0.08, "AZApp": 0.04, "AZServicePrincipal": 0.06,
          "AZDevice": 0.22, "AZVM": 0.03, "AZKeyVault": 0.01, "AZResourceGroup": 0.01}  # fmt: skip
ROLE_TEMPLATES = [
    rules.GLOBAL_ADMINISTRATOR,
    rules.PRIVILEGED_ROLE_ADMINISTRATOR,
    rules.PRIVILEGED_AUTHENTICATION_ADMINISTRATOR,
    rules.HELPDESK_ADMINISTRATOR,
    rules.USER_ADMINISTRATOR,
    rules.PASSWORD_ADMINISTRATOR,
    rules.AUTHENTICATION_ADMINISTRATOR,
    rules.GROUPS_ADMINISTRATOR,
    rules.INTUNE_ADMINISTRATOR,
    rules.APPLICATION_ADMINISTRATOR,
    rules.CLOUD_APPLICATION_ADMINISTRATOR,
    rules.DIRECTORY_READERS,
    rules.REPORTS_READER,
    rules.HYBRID_IDENTITY_ADMINISTRATOR,
    rules.PARTNER_TIER1_SUPPORT,
]
GROUP_READ_WRITE = "62a82d76-70ea-41e2-9197-370581804d09"


def oid(kind: str, i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"bench/{kind}/{i}"))


def records(objects: int) -> Iterator[dict[str, Any]]:
    """The tenant's records, in the order AzureHound writes them."""
    rng = random.Random(44)  # noqa: S311 (a repeatable shape, not a secret)
    n = {kind: max(2, int(objects * share)) for kind, share in SHARES.items()}
    subscriptions = max(1, n["AZResourceGroup"] // 10)

    def rec(kind: str, **data: Any) -> dict[str, Any]:
        return {"kind": kind, "data": {"tenantId": TENANT, "tenantName": "Scale", **data}}

    yield {"kind": "AZTenant", "data": {"tenantId": TENANT, "displayName": "Scale"}}
    for i in range(n["AZUser"]):
        synced = i % 3 == 0
        yield rec(
            "AZUser",
            id=oid("user", i),
            userPrincipalName=f"user{i}@scale.example",
            displayName=f"user {i}",
            accountEnabled=True,
            onPremisesSyncEnabled=synced,
            onPremisesSecurityIdentifier=f"S-1-5-21-1-2-3-{1000 + i}" if synced else None,
        )
    for g in range(n["AZGroup"]):
        yield rec(
            "AZGroup", id=oid("group", g), displayName=f"group {g}", isAssignableToRole=g % 50 == 0
        )
    for g in range(n["AZGroup"]):
        members = rng.sample(range(n["AZUser"]), min(n["AZUser"], 20))
        yield rec(
            "AZGroupMember",
            groupId=oid("group", g),
            members=[
                {"member": {"@odata.type": "#microsoft.graph.user", "id": oid("user", u)}}
                for u in members
            ],
        )
    for a in range(n["AZApp"]):
        yield rec(
            "AZApp",
            id=oid("appobject", a),
            appId=oid("app", a),
            displayName=f"app {a}",
            publisherDomain="scale.example",
        )
        yield rec(
            "AZAppOwner",
            appId=oid("app", a),
            owners=[
                {
                    "owner": {
                        "@odata.type": "#microsoft.graph.user",
                        "id": oid("user", rng.randrange(n["AZUser"])),
                    }
                }
            ],
        )
    for s in range(n["AZServicePrincipal"]):
        app = oid("app", s % n["AZApp"]) if s < n["AZApp"] else oid("foreignapp", s)
        yield rec("AZServicePrincipal", id=oid("sp", s), appId=app, displayName=f"sp {s}")
    graph = oid("sp", 0)  # Microsoft Graph's service principal in the tenant
    for s in range(1, n["AZServicePrincipal"], 97):
        yield rec(
            "AZAppRoleAssignment",
            appId=MS_GRAPH_APP_ID,
            principalType="ServicePrincipal",
            principalId=oid("sp", s),
            resourceId=graph,
            appRoleId=GROUP_READ_WRITE,
        )
    for d in range(n["AZDevice"]):
        yield rec(
            "AZDevice",
            id=oid("device", d),
            displayName=f"device {d}",
            operatingSystem="Windows" if d % 4 else "iOS",
        )
    for template in ROLE_TEMPLATES:
        yield rec("AZRole", id=template, templateId=template, displayName=template[:8])
        holders = [oid("user", rng.randrange(n["AZUser"])) for _ in range(8)]
        holders.append(oid("group", 50 * rng.randrange(max(1, n["AZGroup"] // 50))))
        yield rec(
            "AZRoleAssignment",
            roleDefinitionId=template,
            roleAssignments=[
                {"principalId": h, "roleDefinitionId": template, "directoryScopeId": "/"}
                for h in holders
            ],
        )
        yield rec(
            "AZRoleManagementPolicyAssignment",
            roleDefinitionId=template,
            endUserAssignmentRequiresApproval=template == rules.GLOBAL_ADMINISTRATOR,
        )
    for s in range(subscriptions):
        sub = f"/subscriptions/{oid('subscription', s)}"
        yield rec("AZSubscription", id=sub, subscriptionId=sub[15:], displayName=f"sub {s}")
        owner = oid("user", rng.randrange(n["AZUser"]))
        yield rec(
            "AZSubscriptionOwner",
            subscriptionId=sub,
            owners=[
                {
                    "owner": {
                        "properties": {
                            "principalId": owner,
                            "scope": sub,
                            "roleDefinitionId": f"/providers/roleDefinitions/{OWNER_ROLE}",
                        }
                    }
                }
            ],
        )
    for r in range(n["AZResourceGroup"]):
        sub = f"/subscriptions/{oid('subscription', r % subscriptions)}"
        yield rec(
            "AZResourceGroup", id=f"{sub}/resourceGroups/rg{r}", name=f"rg{r}", subscriptionId=sub
        )
    for v in range(n["AZVM"]):
        group = f"/subscriptions/{oid('subscription', (v % n['AZResourceGroup']) % subscriptions)}"
        group += f"/resourceGroups/rg{v % n['AZResourceGroup']}"
        yield rec(
            "AZVM",
            id=f"{group}/providers/vm/vm{v}",
            name=f"vm{v}",
            resourceGroupId=group,
            identity={"principalId": oid("sp", v % n["AZServicePrincipal"])},
        )
    for k in range(n["AZKeyVault"]):
        group = f"/subscriptions/{oid('subscription', (k % n['AZResourceGroup']) % subscriptions)}"
        group += f"/resourceGroups/rg{k % n['AZResourceGroup']}"
        vault = f"{group}/providers/vault/kv{k}"
        yield rec("AZKeyVault", id=vault, name=f"kv{k}", resourceGroup=group)
        yield rec(
            "AZKeyVaultAccessPolicy",
            keyVaultId=vault,
            objectId=oid("user", rng.randrange(n["AZUser"])),
            permissions={"secrets": ["Get", "List"]},
        )


def generate(folder: Path, objects: int) -> dict[str, int]:
    folder.mkdir(parents=True)
    with (folder / "azurehound.json").open("w") as out:
        return {"records": write_document(out, "azure", records(objects))}


def main() -> None:
    run_benchmark(
        __doc__.splitlines()[0],
        100_000,
        generate,
        "azure",
        lambda derived: (
            None
            if derived.get("AZResetPassword")
            else "the generated tenant gave no AZResetPassword: the shape is wrong"
        ),
    )


if __name__ == "__main__":
    main()
