"""The relationships the reference's Azure post-processing derives, tenant by tenant, from
Entra role assignments, Microsoft Graph application permissions and PIM policies, over the
whole graph (docs/azure.md has the rules as a table). A tenant's objects are those its
AZTenant node contains (AZContains), as in the reference.

A role's members are the principals (users, groups, service principals) holding it through
AZHasRole, and the users and service principals directly in a role-assignable group that
holds it: nesting stops there, as Entra's own does. Where the reference reads
"role-assignable" as the text "true" (and so never finds one), the boolean ingest stores is
read: a user in a role-assignable group is out of the lower password-reset tiers' reach,
as Entra documents.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from graphsvc.store import analysis as store
from graphsvc.store.analysis import AnalysedNode, DerivedEdge
from graphsvc.store.db import Connection

# Entra built-in roles by template id.
GLOBAL_ADMINISTRATOR = "62e90394-69f5-4237-9190-012177145e10"
PRIVILEGED_ROLE_ADMINISTRATOR = "e8611ab8-c189-46e8-94e1-60213ab1f814"
PRIVILEGED_AUTHENTICATION_ADMINISTRATOR = "7be44c8a-adaf-4e2a-84d6-ab2649e08a13"
PARTNER_TIER2_SUPPORT = "e00e864a-17c5-4a4b-9c06-f5b95a8d5bd8"
PARTNER_TIER1_SUPPORT = "4ba39ca4-527c-499a-b93d-d9b492c50246"
HELPDESK_ADMINISTRATOR = "729827e3-9c14-49f7-bb1b-9608f156bbb8"
AUTHENTICATION_ADMINISTRATOR = "c4e39bd9-1100-46d3-8c65-fb160da0071f"
USER_ADMINISTRATOR = "fe930be7-5e62-47db-91af-98c3a49a38b1"
PASSWORD_ADMINISTRATOR = "966707d0-3269-4727-9be2-8c3a10f19b9d"  # noqa: S105 (a role id)
REPORTS_READER = "4a5d8f65-41da-4de4-8968-e035b65339cf"
MESSAGE_CENTER_READER = "790c1fb9-7f7d-4f88-86a1-ef1f95c05c1b"
GUEST_INVITER = "95e79109-95c0-4d8e-aee3-d01accf2d47b"
DIRECTORY_READERS = "88d8e3e3-8f55-4a1e-953a-9b9898b8876b"
USAGE_SUMMARY_REPORTS_READER = "75934031-6c7e-415a-99d7-48dbd49e875e"
GROUPS_ADMINISTRATOR = "fdd7a751-b60b-444a-984c-02652fe8fa1c"
DIRECTORY_WRITERS = "9360feb5-f418-4baa-8175-e2a00bac4301"
IDENTITY_GOVERNANCE_ADMINISTRATOR = "45d8d3c5-c802-45c6-b32a-1d70b5e1e86e"
INTUNE_ADMINISTRATOR = "3a2c62db-5318-420d-8d74-23affee5d9d5"
KNOWLEDGE_ADMINISTRATOR = "b5a8dcf3-09d5-43a9-a639-8e29ef291470"
KNOWLEDGE_MANAGER = "744ec460-397e-42ad-a462-8b3f9747a02c"
APPLICATION_ADMINISTRATOR = "9b895d92-2cd3-44c7-9d02-a6ac2d5ea5c3"
CLOUD_APPLICATION_ADMINISTRATOR = "158c047a-c907-4556-b7ef-446551a6b5f7"
HYBRID_IDENTITY_ADMINISTRATOR = "8ac3fc64-6eca-42ea-9e69-59f4c7b60eb2"
DIRECTORY_SYNCHRONIZATION_ACCOUNTS = "d29b2b05-8046-44ba-8758-1e26182fcf32"

# The tenant-wide edges a role's members get.
TENANT_ROLE_EDGES = {
    GLOBAL_ADMINISTRATOR: "AZGlobalAdmin",
    PRIVILEGED_ROLE_ADMINISTRATOR: "AZPrivilegedRoleAdmin",
    PRIVILEGED_AUTHENTICATION_ADMINISTRATOR: "AZPrivilegedAuthAdmin",
}
# Whose password each role may reset: every user of the tenant (None), or the users with no
# role and those whose roles are all in the set, but users in role-assignable groups.
RESET_PASSWORD_REACH: dict[str, frozenset[str] | None] = {
    GLOBAL_ADMINISTRATOR: None,
    PRIVILEGED_AUTHENTICATION_ADMINISTRATOR: None,
    PARTNER_TIER2_SUPPORT: None,
    USER_ADMINISTRATOR: frozenset({
        USER_ADMINISTRATOR, REPORTS_READER, MESSAGE_CENTER_READER, HELPDESK_ADMINISTRATOR,
        GUEST_INVITER, DIRECTORY_READERS, PASSWORD_ADMINISTRATOR, USAGE_SUMMARY_REPORTS_READER,
        GROUPS_ADMINISTRATOR,
    }),
    HELPDESK_ADMINISTRATOR: frozenset({
        REPORTS_READER, MESSAGE_CENTER_READER, HELPDESK_ADMINISTRATOR, GUEST_INVITER,
        DIRECTORY_READERS, PASSWORD_ADMINISTRATOR, USAGE_SUMMARY_REPORTS_READER,
    }),
    AUTHENTICATION_ADMINISTRATOR: frozenset({
        AUTHENTICATION_ADMINISTRATOR, REPORTS_READER, MESSAGE_CENTER_READER, GUEST_INVITER,
        DIRECTORY_READERS, PASSWORD_ADMINISTRATOR, USAGE_SUMMARY_REPORTS_READER,
    }),
    PASSWORD_ADMINISTRATOR: frozenset({
        PASSWORD_ADMINISTRATOR, GUEST_INVITER, DIRECTORY_READERS,
    }),
    PARTNER_TIER1_SUPPORT: frozenset(),
}  # fmt: skip
# Roles whose members may add members to every group, and those to groups that are not
# role-assignable.
ADD_MEMBERS_ANY_GROUP = (GLOBAL_ADMINISTRATOR, PRIVILEGED_ROLE_ADMINISTRATOR)
ADD_MEMBERS_ORDINARY_GROUPS = (
    GROUPS_ADMINISTRATOR, DIRECTORY_WRITERS, IDENTITY_GOVERNANCE_ADMINISTRATOR,
    USER_ADMINISTRATOR, INTUNE_ADMINISTRATOR, KNOWLEDGE_ADMINISTRATOR, KNOWLEDGE_MANAGER,
)  # fmt: skip
# Roles (the role nodes themselves) that may add secrets to, or owners of, every application
# and service principal of the tenant.
ADD_SECRET_ROLES = (APPLICATION_ADMINISTRATOR, CLOUD_APPLICATION_ADMINISTRATOR)
ADD_OWNER_ROLES = (
    HYBRID_IDENTITY_ADMINISTRATOR, PARTNER_TIER1_SUPPORT, PARTNER_TIER2_SUPPORT,
    DIRECTORY_SYNCHRONIZATION_ACCOUNTS,
)  # fmt: skip
# What a service principal holding a Microsoft Graph application permission may do in the
# tenant of Microsoft Graph's service principal it holds it on: (edge, targets).
ALL_GROUPS, ORDINARY_GROUPS, APPS, SERVICE_PRINCIPALS, ROLES, TENANT = (
    "groups", "ordinary groups", "apps", "service principals", "roles", "tenant",
)  # fmt: skip
PERMISSION_EDGES: dict[str, tuple[tuple[str, str], ...]] = {
    "AZMGApplication_ReadWrite_All": (
        ("AZMGAddSecret", SERVICE_PRINCIPALS), ("AZMGAddSecret", APPS),
        ("AZMGAddOwner", SERVICE_PRINCIPALS), ("AZMGAddOwner", APPS),
    ),
    "AZMGAppRoleAssignment_ReadWrite_All": (("AZMGGrantAppRoles", TENANT),),
    "AZMGDirectory_ReadWrite_All": (
        ("AZMGAddMember", ORDINARY_GROUPS), ("AZMGAddOwner", ORDINARY_GROUPS),
    ),
    "AZMGGroup_ReadWrite_All": (
        ("AZMGAddMember", ORDINARY_GROUPS), ("AZMGAddOwner", ORDINARY_GROUPS),
    ),
    "AZMGGroupMember_ReadWrite_All": (("AZMGAddMember", ORDINARY_GROUPS),),
    "AZMGRoleManagement_ReadWrite_Directory": (
        ("AZMGGrantAppRoles", TENANT), ("AZMGGrantRole", ROLES),
        ("AZMGAddSecret", SERVICE_PRINCIPALS), ("AZMGAddSecret", APPS),
        ("AZMGAddOwner", SERVICE_PRINCIPALS), ("AZMGAddOwner", APPS),
        ("AZMGAddMember", ALL_GROUPS), ("AZMGAddOwner", ALL_GROUPS),
    ),
    "AZMGServicePrincipalEndpoint_ReadWrite_All": (("AZMGAddOwner", SERVICE_PRINCIPALS),),
}  # fmt: skip
APPROVER_LISTS = ("enduserassignmentuserapprovers", "enduserassignmentgroupapprovers")
CONTENT_KINDS = ("AZUser", "AZGroup", "AZServicePrincipal", "AZApp", "AZDevice", "AZRole")
PRINCIPAL_KINDS = ("AZUser", "AZGroup", "AZServicePrincipal")


@dataclass
class Tenant:
    """A tenant's objects by kind, and its roles' members by template id."""

    object_id: str
    objects: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    roles: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # template
    members: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # template

    def holders(self, templates: Iterable[str], kinds: tuple[str, ...]) -> set[str]:
        """The members of any of the roles that are of the kinds."""
        found = set().union(*(self.members.get(t, set()) for t in templates))
        return {p for p in found if any(p in self.objects[k] for k in kinds)}


class AzureGraph:
    """What the rules read of the whole graph: the Azure nodes, the tenants' contents, role
    assignments, group memberships and the Graph permissions held."""

    def __init__(self, nodes: list[AnalysedNode]) -> None:
        self.nodes = {n.object_id: n for n in nodes}
        self.tenants: dict[str, Tenant] = {}
        self.direct_members: dict[str, set[str]] = defaultdict(set)  # group -> members
        self.role_holders: dict[str, set[str]] = defaultdict(set)  # role node -> principals
        self.permissions: dict[str, set[tuple[str, str]]] = defaultdict(set)  # kind -> pairs
        self.approvers: set[str] = set()  # the approvers PIM policies list that are nodes

    def kind_of(self, object_id: str) -> str | None:
        node = self.nodes.get(object_id)
        if node is None:
            return None
        return next((k for k in node.kinds if k in CONTENT_KINDS), None)

    def prop(self, object_id: str, key: str) -> object:
        node = self.nodes.get(object_id)
        return None if node is None else node.properties.get(key)

    def role_assignable(self, group: str) -> bool:
        return self.prop(group, "isassignabletorole") is True


async def read_azure_graph(conn: Connection) -> AzureGraph | None:
    tenants = await store.list_nodes_of_kinds(conn, ["AZTenant"])
    if not tenants:
        return None
    graph = AzureGraph(await store.list_nodes_of_kinds(conn, CONTENT_KINDS))
    graph.tenants = {t.object_id: Tenant(t.object_id) for t in tenants}
    kinds = ("AZContains", "AZHasRole", "AZMemberOf", *PERMISSION_EDGES)
    for start, kind, end in await store.list_edges_of_kinds(conn, kinds, collected_only=True):
        if kind == "AZContains":
            tenant = graph.tenants.get(start)
            content = graph.kind_of(end)
            if tenant is not None and content is not None:
                tenant.objects[content].add(end)
        elif kind == "AZHasRole":
            graph.role_holders[end].add(start)
        elif kind == "AZMemberOf":
            graph.direct_members[end].add(start)
        else:
            graph.permissions[kind].add((start, end))
    listed = {
        approver.upper()
        for role in graph.nodes.values()
        for key in APPROVER_LISTS
        for approver in listed_text(role.properties.get(key))
    }
    if listed:
        graph.approvers = {n.object_id for n in await store.find_analysed_nodes(conn, listed)}
    for tenant in graph.tenants.values():
        for role in tenant.objects["AZRole"]:
            template = graph.prop(role, "templateid")
            if isinstance(template, str) and template:
                tenant.roles[template.lower()].add(role)
                tenant.members[template.lower()] |= role_members(graph, role)
    return graph


def role_members(graph: AzureGraph, role: str) -> set[str]:
    """The principals holding the role, and the users and service principals directly in a
    role-assignable group holding it."""
    found: set[str] = set()
    for holder in graph.role_holders.get(role, set()):
        kind = graph.kind_of(holder)
        if kind not in PRINCIPAL_KINDS:
            continue
        found.add(holder)
        if kind == "AZGroup" and graph.role_assignable(holder):
            found |= {
                m
                for m in graph.direct_members.get(holder, set())
                if graph.kind_of(m) in ("AZUser", "AZServicePrincipal")
            }
    return found


async def azure_edges(conn: Connection) -> list[DerivedEdge]:
    graph = await read_azure_graph(conn)
    if graph is None:
        return []
    edges: set[DerivedEdge] = set()
    for tenant in graph.tenants.values():
        edges |= role_edges(graph, tenant)
        edges |= permission_edges(graph, tenant)
    edges |= approver_edges(graph)
    return list(edges)


def role_edges(graph: AzureGraph, tenant: Tenant) -> set[DerivedEdge]:
    t = tenant.object_id
    edges: set[DerivedEdge] = set()
    for template, kind in TENANT_ROLE_EDGES.items():
        edges |= {(p, t, kind, t) for p in tenant.holders([template], PRINCIPAL_KINDS)}
    users = tenant.objects["AZUser"]
    any_role = set().union(*tenant.members.values()) if tenant.members else set()
    without_roles = users - any_role
    in_assignable = {
        m
        for g in tenant.objects["AZGroup"]
        if graph.role_assignable(g)
        for m in graph.direct_members.get(g, set())
        if m in users
    }
    for template, allowed in RESET_PASSWORD_REACH.items():
        if allowed is None:
            reach = set(users)
        else:
            inside = set().union(*(tenant.members.get(r, set()) for r in allowed))
            outside = set().union(*(m for r, m in tenant.members.items() if r not in allowed))
            reach = (without_roles | ((inside - outside) & users)) - in_assignable
        for role in tenant.roles.get(template, set()):
            edges |= {(role, user, "AZResetPassword", t) for user in reach}
    groups = tenant.objects["AZGroup"]
    ordinary = {g for g in groups if graph.prop(g, "isassignabletorole") is False}
    accounts = ("AZUser", "AZServicePrincipal")
    for holder in tenant.holders(ADD_MEMBERS_ANY_GROUP, accounts):
        edges |= {(holder, g, "AZAddMembers", t) for g in groups}
    for holder in tenant.holders(ADD_MEMBERS_ORDINARY_GROUPS, accounts):
        edges |= {(holder, g, "AZAddMembers", t) for g in ordinary}
    apps_and_principals = tenant.objects["AZApp"] | tenant.objects["AZServicePrincipal"]
    # A managed identity has no secrets to add (the reference's newer rule).
    with_secrets = {
        x for x in apps_and_principals if graph.prop(x, "serviceprincipaltype") != "ManagedIdentity"
    }
    for templates, kind, targets in (
        (ADD_SECRET_ROLES, "AZAddSecret", with_secrets),
        (ADD_OWNER_ROLES, "AZAddOwner", apps_and_principals),
    ):
        for template in templates:
            for role in tenant.roles.get(template, set()):
                edges |= {(role, target, kind, t) for target in targets}
    windows = {
        d
        for d in tenant.objects["AZDevice"]
        if "WINDOWS" in str(graph.prop(d, "operatingsystem") or "").upper()
    }
    for admin in tenant.holders([INTUNE_ADMINISTRATOR], PRINCIPAL_KINDS):
        edges |= {(admin, d, "AZExecuteCommand", t) for d in windows}
    return edges


def permission_edges(graph: AzureGraph, tenant: Tenant) -> set[DerivedEdge]:
    """Microsoft Graph's application permissions held on a service principal of the tenant
    (its Microsoft Graph) give their holders these edges in it."""
    t = tenant.object_id
    groups = tenant.objects["AZGroup"]
    targets = {
        ALL_GROUPS: groups,
        ORDINARY_GROUPS: {g for g in groups if graph.prop(g, "isassignabletorole") is False},
        APPS: tenant.objects["AZApp"],
        SERVICE_PRINCIPALS: tenant.objects["AZServicePrincipal"],
        ROLES: tenant.objects["AZRole"],
        TENANT: {t},
    }
    edges: set[DerivedEdge] = set()
    for permission, grants in PERMISSION_EDGES.items():
        holders = {
            s
            for s, resource in graph.permissions.get(permission, set())
            if resource in tenant.objects["AZServicePrincipal"]
        }
        for kind, target in grants:
            edges |= {(h, x, kind, t) for h in holders for x in targets[target]}
    return edges


def listed_text(value: object) -> list[str]:
    return [a for a in value if isinstance(a, str)] if isinstance(value, list) else []


def approver_edges(graph: AzureGraph) -> set[DerivedEdge]:
    """AZRoleApprover: who approves the activation of a role whose PIM policy asks for
    approval: the users and groups it lists, else the tenant's Global and Privileged Role
    Administrator roles. A role is the tenant's if the tenant contains it or, as the
    reference reads policies, its `tenantid` names it."""
    tenant_of = {
        role: tenant for tenant in graph.tenants.values() for role in tenant.objects["AZRole"]
    }
    edges: set[DerivedEdge] = set()
    for role, node in graph.nodes.items():
        if "AZRole" not in node.kinds:
            continue
        if node.properties.get("enduserassignmentrequiresapproval") is not True:
            continue
        tenant = tenant_of.get(role) or graph.tenants.get(
            str(node.properties.get("tenantid") or "").upper()
        )
        if tenant is None:
            continue
        listed = {
            a.upper() for key in APPROVER_LISTS for a in listed_text(node.properties.get(key))
        }
        if listed:
            approvers = listed & graph.approvers
        else:
            approvers = tenant.roles.get(GLOBAL_ADMINISTRATOR, set()) | tenant.roles.get(
                PRIVILEGED_ROLE_ADMINISTRATOR, set()
            )
        edges |= {(a, role, "AZRoleApprover", tenant.object_id) for a in approvers}
    return edges
