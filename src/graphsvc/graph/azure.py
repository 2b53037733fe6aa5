"""The reference's Azure entity route, `GET /api/v2/azure/{entity_type}`: an Azure object's
properties with the size of each of its lists, or one page of one list
(`related_entity_type`), on the reference's entity types, list names and count keys.

Each list is a walk of store.entities (`AZURE_LISTS`), nesting through AZMemberOf. Where
the reference lists only the ends of chains (an executing group replaced by its members),
graphsvc lists the holders and their members, as its AD lists do; its roles list follows a
principal's groups at any depth, where Entra's role-assignable groups are never nested.
Unlike the reference, an object of another kind than the route's (a group asked for as a
user) is a 404, and a list name it does not know a 400 naming those it does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from graphsvc import wire
from graphsvc.errors import bad_request, not_found
from graphsvc.graph.entities import entity_props
from graphsvc.store import entities
from graphsvc.store import tags as store_tags
from graphsvc.store.db import Connection
from graphsvc.store.entities import Direction, EntityRow, Nesting, Walk
from graphsvc.store.paging import Page, SortKey

Node = TypeVar("Node", bound=wire.AzureNode)
# The route's entity types, and the kind of node each is.
AZURE_ENTITY_TYPES = {
    "az-base": "AZBase",
    "users": "AZUser",
    "groups": "AZGroup",
    "tenants": "AZTenant",
    "management-groups": "AZManagementGroup",
    "subscriptions": "AZSubscription",
    "resource-groups": "AZResourceGroup",
    "vms": "AZVM",
    "managed-clusters": "AZManagedCluster",
    "container-registries": "AZContainerRegistry",
    "web-apps": "AZWebApp",
    "logic-apps": "AZLogicApp",
    "automation-accounts": "AZAutomationAccount",
    "key-vaults": "AZKeyVault",
    "devices": "AZDevice",
    "applications": "AZApp",
    "vm-scale-sets": "AZVMScaleSet",
    "service-principals": "AZServicePrincipal",
    "roles": "AZRole",
    "function-apps": "AZFunctionApp",
    "federated-identity-credentials": "AZFederatedIdentityCredential",
}
# The reference's relationship kinds of control, execution and Microsoft Graph permissions.
CONTROL_KINDS = (
    "AZAvereContributor", "AZContributor", "AZOwner", "AZVMContributor",
    "AZAutomationContributor", "AZKeyVaultContributor", "AZAddMembers", "AZAddSecret",
    "AZExecuteCommand", "AZGlobalAdmin", "AZGrant", "AZGrantSelf", "AZPrivilegedRoleAdmin",
    "AZResetPassword", "AZUserAccessAdministrator", "AZOwns", "AZCloudAppAdmin", "AZAppAdmin",
    "AZAddOwner", "AZManagedIdentity", "AZAKSContributor", "AZWebsiteContributor",
    "AZLogicAppContributor", "AZMGAddMember", "AZMGAddOwner", "AZMGAddSecret",
    "AZMGGrantAppRoles", "AZMGGrantRole",
)  # fmt: skip
EXECUTION_KINDS = ("AZVMAdminLogin", "AZVMContributor", "AZAvereContributor",
                   "AZWebsiteContributor", "AZContributor", "AZExecuteCommand")  # fmt: skip
GRAPH_PERMISSION_KINDS = (
    "AZMGApplication_ReadWrite_All", "AZMGAppRoleAssignment_ReadWrite_All",
    "AZMGDirectory_ReadWrite_All", "AZMGGroup_ReadWrite_All", "AZMGGroupMember_ReadWrite_All",
    "AZMGRoleManagement_ReadWrite_Directory", "AZMGServicePrincipalEndpoint_ReadWrite_All",
)  # fmt: skip
VAULT_READERS = {
    "key-readers": ("AZGetKeys", "AZContributor", "AZOwner"),
    "certificate-readers": ("AZGetCertificates", "AZContributor", "AZOwner"),
    "secret-readers": ("AZGetSecrets", "AZContributor", "AZOwner"),
}
# A container's descendants, by the reference's list name, and the kind each lists.
DESCENDANTS = {
    "descendent-users": "AZUser",
    "descendent-groups": "AZGroup",
    "descendent-management-groups": "AZManagementGroup",
    "descendent-subscriptions": "AZSubscription",
    "descendent-resource-groups": "AZResourceGroup",
    "descendent-virtual-machines": "AZVM",
    "descendent-managed-clusters": "AZManagedCluster",
    "descendent-vm-scale-sets": "AZVMScaleSet",
    "descendent-container-registries": "AZContainerRegistry",
    "descendent-web-apps": "AZWebApp",
    "descendent-logic-apps": "AZLogicApp",
    "descendent-automation-accounts": "AZAutomationAccount",
    "descendent-key-vaults": "AZKeyVault",
    "descendent-applications": "AZApp",
    "descendent-service-principals": "AZServicePrincipal",
    "descendent-devices": "AZDevice",
    "descendent-function-apps": "AZFunctionApp",
}
RESOURCES = ("AZVM", "AZManagedCluster", "AZVMScaleSet", "AZContainerRegistry", "AZWebApp",
             "AZLogicApp", "AZAutomationAccount", "AZKeyVault", "AZFunctionApp")  # fmt: skip
# The kinds each container counts among its descendants (the reference's lists).
DESCENDANT_KINDS = {
    "AZTenant": ("AZUser", "AZGroup", "AZManagementGroup", "AZSubscription", "AZResourceGroup",
                 *RESOURCES, "AZApp", "AZServicePrincipal", "AZDevice"),
    "AZManagementGroup": ("AZManagementGroup", "AZSubscription", "AZResourceGroup", *RESOURCES),
    "AZSubscription": ("AZResourceGroup", *RESOURCES),
    "AZResourceGroup": RESOURCES,
}  # fmt: skip


def azure_walk(
    kinds: tuple[str, ...], direction: Direction, nesting: Nesting, result: str = ""
) -> Walk:
    return Walk(kinds, direction, nesting, result=result, membership="AZMemberOf")


AZURE_LISTS: dict[str, Walk] = {
    "group-membership": azure_walk(("AZMemberOf",), "out", "direct"),
    "group-members": azure_walk(("AZMemberOf",), "in", "direct"),
    "roles": azure_walk(("AZHasRole",), "out", "groups"),
    "outbound-execution-privileges": azure_walk(EXECUTION_KINDS, "out", "groups"),
    "inbound-execution-privileges": azure_walk(EXECUTION_KINDS, "in", "holders"),
    "outbound-control": azure_walk(CONTROL_KINDS, "out", "groups"),
    "inbound-control": azure_walk(CONTROL_KINDS, "in", "holders"),
    "outbound-abusable-app-role-assignments": azure_walk(GRAPH_PERMISSION_KINDS, "out", "direct"),
    "inbound-abusable-app-role-assignments": azure_walk(GRAPH_PERMISSION_KINDS, "in", "direct"),
    "active-assignments": azure_walk(("AZHasRole",), "in", "holders"),
    "pim-assignments": azure_walk(("AZGrant", "AZGrantSelf"), "in", "holders"),
    "role-approvers": azure_walk(("AZRoleApprover",), "in", "direct"),
    **{name: azure_walk(kinds, "in", "holders") for name, kinds in VAULT_READERS.items()},
    "all-readers": azure_walk(
        tuple(dict.fromkeys(k for kinds in VAULT_READERS.values() for k in kinds)), "in", "holders"
    ),
    "federated-identity-credentials": azure_walk(("AZAuthenticatesTo",), "in", "direct"),
    **{
        name: azure_walk(("AZContains",), "out", "transitive", result=kind)
        for name, kind in DESCENDANTS.items()
    },
}
# Each entity type's counts: the reference's key, and the list it counts.
COUNTS: dict[str, tuple[tuple[str, str], ...]] = {
    "AZBase": (("outbound_object_control", "outbound-control"),),
    "AZUser": (
        ("group_membership", "group-membership"),
        ("roles", "roles"),
        ("execution_privileges", "outbound-execution-privileges"),
        ("outbound_object_control", "outbound-control"),
        ("inbound_object_control", "inbound-control"),
    ),
    "AZGroup": (
        ("roles", "roles"),
        ("group_members", "group-members"),
        ("group_membership", "group-membership"),
        ("outbound_object_control", "outbound-control"),
        ("inbound_object_control", "inbound-control"),
    ),
    "AZVM": (
        ("inboundExecutionPrivileges", "inbound-execution-privileges"),
        ("inbound_object_control", "inbound-control"),
    ),
    "AZDevice": (
        ("inboundExecutionPrivileges", "inbound-execution-privileges"),
        ("inbound_object_control", "inbound-control"),
    ),
    "AZServicePrincipal": (
        ("roles", "roles"),
        ("inbound_object_control", "inbound-control"),
        ("outbound_object_control", "outbound-control"),
        ("inbound_abusable_app_role_assignments", "inbound-abusable-app-role-assignments"),
        ("outbound_abusable_app_role_assignments", "outbound-abusable-app-role-assignments"),
    ),
    "AZRole": (
        ("active_assignments", "active-assignments"),
        ("pim_assignments", "pim-assignments"),
        ("approvers", "role-approvers"),
    ),
    "AZFederatedIdentityCredential": (),
}
LISTS_TEXT = ", ".join(AZURE_LISTS)


def parse_entity_type(raw: str, name: str) -> str:
    if raw not in AZURE_ENTITY_TYPES:
        known = ", ".join(AZURE_ENTITY_TYPES)
        raise bad_request(f"unknown Azure entity type {raw!r}: one of {known}", name)
    return raw


async def get_azure_entity(
    conn: Connection,
    entity_type: str,
    object_id: str,
    related_entity_type: str | None,
    counts: bool,
    sort: Sequence[SortKey],
    page: Page,
) -> wire.AzureEntityResponse:
    kind = AZURE_ENTITY_TYPES[entity_type]
    entity = await entities.find_entity(conn, object_id, kind)
    if entity is None:
        raise not_found(
            f"no {kind} with object id {object_id!r}; find one by name with "
            f"GET /api/v2/search?q=NAME&type={kind}",
            "object_id",
        )
    if related_entity_type:
        return await list_related(conn, entity, related_entity_type, sort, page)
    details = azure_node(
        entity, await store_tags.read_tag_labels(conn, [entity.node_id]), wire.AzureEntity
    )
    if counts:
        await count_lists(conn, kind, entity, details)
    if kind == "AZApp":  # (a service principal's `appid` is a property of its own)
        details.props["service_principal_id"] = await first_reached(conn, entity, "AZRunsAs", "out")
    return wire.AzureEntityResponse(data=details)


async def list_related(
    conn: Connection, entity: EntityRow, related: str, sort: Sequence[SortKey], page: Page
) -> wire.AzureEntityResponse:
    walk = AZURE_LISTS.get(related)
    if walk is None:
        raise bad_request(
            f"unknown related_entity_type {related!r}: one of {LISTS_TEXT}", "related_entity_type"
        )
    start = await start_of(conn, entity, walk)
    total, rows = await entities.list_reached(conn, start, walk, sort, page.skip, page.limit)
    ids = [node_id for node_id, _ in rows]
    found = {row.node_id: row for row in await entities.find_entities_by_id(conn, ids)}
    labels = await store_tags.read_tag_labels(conn, ids)
    nodes = [azure_node(found[i], labels, wire.AzureNode) for i in ids if i in found]
    return wire.AzureEntityResponse(data=nodes, count=total, limit=page.limit, skip=page.skip)


async def count_lists(
    conn: Connection, kind: str, entity: EntityRow, details: wire.AzureEntity
) -> None:
    """Set the entity's counts, as the route's kind of entity has them (the ids of every
    list's relationship kinds read in one statement)."""
    counted = COUNTS.get(kind, (("inbound_object_control", "inbound-control"),))
    readers = (*VAULT_READERS, "all-readers") if kind == "AZKeyVault" else ()
    walks = [AZURE_LISTS[related] for _, related in counted] + [AZURE_LISTS[r] for r in readers]
    names = sorted({name for walk in walks for name in entities.walk_kind_names(walk)})
    start = entities.WalkStart(entity.node_id, await entities.find_kind_ids(conn, names))
    for key, related in counted:
        setattr(details, key, await entities.count_reached(conn, start, AZURE_LISTS[related]))
    if kind in DESCENDANT_KINDS:
        found = await entities.count_descendants_by_label(conn, entity.node_id, "AZContains")
        details.descendents = wire.AzureDescendants(
            {k: found.get(k, 0) for k in DESCENDANT_KINDS[kind]}
        )
    elif readers:
        size = [await entities.count_reached(conn, start, AZURE_LISTS[r]) for r in readers]
        details.Readers = wire.AzureVaultReaders(*size)


async def start_of(conn: Connection, entity: EntityRow, walk: Walk) -> entities.WalkStart:
    kind_ids = await entities.find_kind_ids(conn, entities.walk_kind_names(walk))
    return entities.WalkStart(entity.node_id, kind_ids)


async def first_reached(
    conn: Connection, entity: EntityRow, kind: str, direction: Direction
) -> str:
    """The object id of the first node one relationship of `kind` leads to ("" if none)."""
    walk = azure_walk((kind,), direction, "direct")
    _, rows = await entities.list_reached(conn, await start_of(conn, entity, walk), walk, [], 0, 1)
    return rows[0][1].objectID if rows else ""


def azure_node(entity: EntityRow, labels: dict[int, list[str]], shape: type[Node]) -> Node:
    """The node as the route answers it: `shape`, an item of a list or the entity."""
    return shape(
        kind=entity.label,
        kinds=[*entity.kinds, *labels.get(entity.node_id, [])],
        isTierZero=entity.is_tier_zero,
        isOwnedObject=entity.is_owned,
        props=entity_props(entity),
    )
