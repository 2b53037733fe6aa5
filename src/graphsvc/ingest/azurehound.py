"""AzureHound output: one document of `{"kind": ..., "data": ...}` records (`meta.type` azure).

Ids are upper-cased (AzureHound's case changed over time). Records of kinds not read here
are skipped and counted in the run's result (kinds grow with every release). Edges made:
AZContains (tenant, subscription and resource group containment), AZRunsAs (app to service
principal), AZMemberOf, AZOwns, AZHasRole, AZAuthenticatesTo (federated identity credential
to app).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from graphsvc.ingest.records import EdgeRecord, IngestError, NodeRecord, lower_keys
from graphsvc.ingest.writer import GraphWriter

# Entity kinds: the data field holding the node id, and the one holding its display name.
ENTITIES = {
    "AZUser": ("id", "userprincipalname"),
    "AZGroup": ("id", "displayname"),
    "AZApp": ("appid", "displayname"),
    "AZServicePrincipal": ("id", "displayname"),
    "AZDevice": ("id", "displayname"),
    "AZManagementGroup": ("id", "displayname"),
    "AZSubscription": ("id", "displayname"),
    "AZResourceGroup": ("id", "name"),
    "AZVM": ("id", "name"),
    "AZKeyVault": ("id", "name"),
    "AZVMScaleSet": ("id", "name"),
    "AZAutomationAccount": ("id", "name"),
    "AZLogicApp": ("id", "name"),
    "AZFunctionApp": ("id", "name"),
    "AZContainerRegistry": ("id", "name"),
    "AZWebApp": ("id", "name"),
    "AZManagedCluster": ("id", "name"),
}
IN_TENANT = {
    "AZUser",
    "AZGroup",
    "AZApp",
    "AZServicePrincipal",
    "AZDevice",
    "AZManagementGroup",
    "AZSubscription",
}
# Owner records: (field naming the owned object, its kind).
OWNERS = {
    "AZGroupOwner": ("groupid", "AZGroup"),
    "AZAppOwner": ("appid", "AZApp"),
    "AZServicePrincipalOwner": ("serviceprincipalid", "AZServicePrincipal"),
    "AZDeviceOwner": ("deviceid", "AZDevice"),
}
MEMBER_KINDS = {
    "#microsoft.graph.user": "AZUser",
    "#microsoft.graph.group": "AZGroup",
    "#microsoft.graph.serviceprincipal": "AZServicePrincipal",
    "#microsoft.graph.device": "AZDevice",
}


def text(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value.upper() if isinstance(value, str) and value else None


def graph_kind(member: dict[str, Any]) -> str:
    return MEMBER_KINDS.get(str(member.get("@odata.type", "")).lower(), "AZBase")


async def ingest(records: AsyncIterator[tuple[int, Any]], source: str, writer: GraphWriter) -> None:
    async for i, raw in records:
        where = f"data[{i}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("kind"), str):
            raise IngestError(source, "must be an object with a string 'kind'", where)
        data = lower_keys(raw.get("data"))
        if not isinstance(data, dict):
            raise IngestError(source, "'data' must be an object", where)
        await ingest_record(raw["kind"], data, source, where, writer)


async def ingest_record(
    kind: str, data: dict[str, Any], source: str, where: str, writer: GraphWriter
) -> None:
    tenant = text(data, "tenantid")
    if kind == "AZTenant":
        if tenant is None:
            raise IngestError(source, "an AZTenant needs 'tenantId'", where)
        name = data.get("displayname") or tenant
        await writer.node(NodeRecord(tenant, str(name), ["AZTenant", "AZBase"], data, tenant))
    elif kind in ENTITIES:
        await ingest_entity(kind, data, tenant, source, where, writer)
    elif kind == "AZGroupMember":
        group = text(data, "groupid")
        for entry in data.get("members") or []:
            member = entry.get("member") if isinstance(entry, dict) else None
            if group and isinstance(member, dict) and text(member, "id"):
                await writer.edge(
                    EdgeRecord(
                        text(member, "id") or "",
                        group,
                        "AZMemberOf",
                        None,
                        graph_kind(member),
                        "AZGroup",
                    )
                )
    elif kind in OWNERS:
        field, owned_kind = OWNERS[kind]
        owned = text(data, field)
        for entry in data.get("owners") or []:
            owner = entry.get("owner") if isinstance(entry, dict) else None
            if owned and isinstance(owner, dict) and text(owner, "id"):
                await writer.edge(
                    EdgeRecord(
                        text(owner, "id") or "",
                        owned,
                        "AZOwns",
                        None,
                        graph_kind(owner),
                        owned_kind,
                    )
                )
    elif kind == "AZRoleAssignment":
        for assignment in data.get("roleassignments") or []:
            if not isinstance(assignment, dict):
                continue
            principal, role = text(assignment, "principalid"), text(assignment, "roledefinitionid")
            if principal and role and tenant:
                await writer.edge(
                    EdgeRecord(
                        principal, f"{role}@{tenant}", "AZHasRole", tenant, "AZBase", "AZRole"
                    )
                )
    elif kind == "AZFederatedIdentityCredential":
        for entry in data.get("fics") or []:
            fic = entry.get("fic") if isinstance(entry, dict) else None
            app = text(entry, "appid") if isinstance(entry, dict) else None
            if isinstance(fic, dict) and text(fic, "id") and app:
                fic_id = text(fic, "id") or ""
                await writer.node(
                    NodeRecord(
                        fic_id,
                        str(fic.get("name") or fic_id),
                        ["AZFederatedIdentityCredential", "AZBase"],
                        fic,
                    )
                )
                await writer.edge(
                    EdgeRecord(
                        fic_id,
                        app,
                        "AZAuthenticatesTo",
                        None,
                        "AZFederatedIdentityCredential",
                        "AZApp",
                    )
                )
    else:
        writer.skip(f"AzureHound {kind}")


async def ingest_entity(
    kind: str,
    data: dict[str, Any],
    tenant: str | None,
    source: str,
    where: str,
    writer: GraphWriter,
) -> None:
    id_field, name_field = ENTITIES[kind]
    nested = data.get("properties")
    if tenant is None and isinstance(nested, dict):  # key vaults keep it in their properties
        tenant = text(nested, "tenantid")
    oid = text(data, id_field)
    if oid is None:
        raise IngestError(source, f"an {kind} needs '{id_field}'", where)
    name = data.get(name_field) or data.get("displayname") or oid
    properties = {k: v for k, v in data.items() if not isinstance(v, dict | list)}
    await writer.node(NodeRecord(oid, str(name), [kind, "AZBase"], properties, tenant))
    if tenant and kind in IN_TENANT:
        await writer.edge(EdgeRecord(tenant, oid, "AZContains", tenant, "AZTenant", kind))
    if kind == "AZServicePrincipal" and text(data, "appid"):
        await writer.edge(
            EdgeRecord(text(data, "appid") or "", oid, "AZRunsAs", tenant, "AZApp", kind)
        )
    parent = {
        "AZResourceGroup": ("subscriptionid", "AZSubscription"),
        "AZVM": ("resourcegroupid", "AZResourceGroup"),
        "AZKeyVault": ("resourcegroup", "AZResourceGroup"),
    }.get(kind)
    if parent and text(data, parent[0]):
        container = text(data, parent[0]) or ""
        if parent[1] == "AZSubscription" and not container.startswith("/SUBSCRIPTIONS/"):
            container = f"/SUBSCRIPTIONS/{container}"
        await writer.edge(EdgeRecord(container, oid, "AZContains", tenant, parent[1], kind))
