"""AzureHound output: one document of `{"kind": ..., "data": ...}` records (`meta.type` azure),
read as the reference reads them (docs/azure.md says what each kind becomes).

Ids and names are upper-cased (AzureHound's case changed over time). Records of kinds the
reference does not read either (raw role-assignment lists, storage accounts...) are skipped
and counted in the run's result. What a record states as a whole (a group's members, an
object's owners, the holders of an Azure role on a resource, a key vault's access policies,
a role's assignments) replaces what an older collection stated about that object
(ingest/facts.py's groups of facts); AZRoleApprover and the other edges the reference
derives from roles and app roles are the analysis's (analysis/azure.py), not the ingest's.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from graphsvc.ingest.records import EdgeRecord, IngestError, NodeRecord, lower_keys
from graphsvc.ingest.statistics import is_uuid
from graphsvc.ingest.writer import GraphWriter

Data = dict[str, Any]

MEMBER_KINDS = {
    "#microsoft.graph.user": "AZUser",
    "#microsoft.graph.group": "AZGroup",
    "#microsoft.graph.serviceprincipal": "AZServicePrincipal",
    "#microsoft.graph.device": "AZDevice",
}
# Owner records: the field naming the owned object, and its kind.
OWNERS = {
    "AZGroupOwner": ("groupid", "AZGroup"),
    "AZAppOwner": ("appid", "AZApp"),
    "AZServicePrincipalOwner": ("serviceprincipalid", "AZServicePrincipal"),
    "AZDeviceOwner": ("deviceid", "AZDevice"),
}
# Azure RBAC's built-in roles the reference reads, by role definition id, and the edge each
# gives its holder on the resource.
OWNER_ROLE = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635"
USER_ACCESS_ADMINISTRATOR_ROLE = "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9"
CONTRIBUTOR_ROLE = "b24988ac-6180-42a0-ab88-20f7382dd24c"
RBAC_ROLE_EDGES = {
    OWNER_ROLE: "AZOwner",
    USER_ACCESS_ADMINISTRATOR_ROLE: "AZUserAccessAdministrator",
    CONTRIBUTOR_ROLE: "AZContributor",
    "de139f84-1756-47ae-9be6-808fbbe84772": "AZWebsiteContributor",
    "f353d9bd-d4a6-484e-a77a-8050b599b867": "AZAutomationContributor",
    "87a39d53-fc1b-424a-814c-f7e04687dc9e": "AZLogicAppContributor",
    "9980e02c-c2be-4d73-94e8-173b1dc7cf3c": "AZVMContributor",
    "ed7f3fbd-7b88-4dd4-9017-9adb7ce333f8": "AZAKSContributor",
}
# Records that hold the assignments of one Azure role on one resource, as AzureHound splits
# them: kind -> (field naming the resource, its kind, list field, item field, edge).
ROLE_HOLDERS: dict[str, tuple[str, str, str, str, str]] = {}
for _resource, _field, _target in (
    ("Subscription", "subscriptionid", "AZSubscription"),
    ("ResourceGroup", "resourcegroupid", "AZResourceGroup"),
    ("ManagementGroup", "managementgroupid", "AZManagementGroup"),
    ("KeyVault", "keyvaultid", "AZKeyVault"),
    ("VM", "virtualmachineid", "AZVM"),
):
    for _suffix, _items, _item, _edge in (
        ("Owner", "owners", "owner", "AZOwner"),
        ("UserAccessAdmin", "useraccessadmins", "useraccessadmin", "AZUserAccessAdministrator"),
        ("Contributor", "contributors", "contributor", "AZContributor"),
    ):
        ROLE_HOLDERS[f"AZ{_resource}{_suffix}"] = (_field, _target, _items, _item, _edge)
ROLE_HOLDERS.update(
    {
        "AZKeyVaultKVContributor": (
            "keyvaultid", "AZKeyVault", "kvcontributors", "kvcontributor",
            "AZKeyVaultContributor",
        ),
        "AZVMVMContributor": (
            "virtualmachineid", "AZVM", "vmcontributors", "vmcontributor", "AZVMContributor"
        ),
        "AZVMAdminLogin": (
            "virtualmachineid", "AZVM", "adminlogins", "adminlogin", "AZVMAdminLogin"
        ),
        "AZVMAvereContributor": (
            "virtualmachineid", "AZVM", "averecontributors", "averecontributor",
            "AZAvereContributor",
        ),
    }
)  # fmt: skip
# The newer resources' role-assignment records (`{objectId, assignees: [...]}`): the kind of
# the resource, and the roles whose holders get an edge besides Owner, User Access
# Administrator and Contributor.
ASSIGNEE_RECORDS = {
    "AZVMScaleSetRoleAssignment": ("AZVMScaleSet", "9980e02c-c2be-4d73-94e8-173b1dc7cf3c"),
    "AZFunctionAppRoleAssignment": ("AZFunctionApp", "de139f84-1756-47ae-9be6-808fbbe84772"),
    "AZWebAppRoleAssignment": ("AZWebApp", "de139f84-1756-47ae-9be6-808fbbe84772"),
    "AZLogicAppRoleAssignment": ("AZLogicApp", "87a39d53-fc1b-424a-814c-f7e04687dc9e"),
    "AZAutomationAccountRoleAssignment": (
        "AZAutomationAccount",
        "f353d9bd-d4a6-484e-a77a-8050b599b867",
    ),
    "AZContainerRegistryRoleAssignment": ("AZContainerRegistry", None),
    "AZManagedClusterRoleAssignment": ("AZManagedCluster", "ed7f3fbd-7b88-4dd4-9017-9adb7ce333f8"),
}
# Entra roles whose assignment scoped below the tenant is an edge to the scoped object.
SCOPED_ADMIN_ROLES = {
    "9B895D92-2CD3-44C7-9D02-A6AC2D5EA5C3": "AZAppAdmin",  # Application Administrator
    "158C047A-C907-4556-B7EF-446551A6B5F7": "AZCloudAppAdmin",  # Cloud Application Admin.
}
MS_GRAPH_APP_ID = "00000003-0000-0000-c000-000000000000"
# The groups of facts a record states whole (ingest/facts.py): the relationships an object's
# own record gives it (its container, its application, its identities...), a service
# principal's app role assignments (Microsoft Graph's), a role's eligibilities, a management
# group's children, an application's federated credentials, a key vault's access policies.
RECORD = "azure:record"
APP_ROLE_ASSIGNMENTS = "azure:approleassignments"
ELIGIBILITIES = "azure:eligibilities"
DESCENDANTS = "azure:descendants"
CREDENTIALS = "azure:credentials"
ACCESS_POLICIES = "azure:accesspolicies"
# Microsoft Graph's application permissions that the reference's analysis reads, by app
# role id: what an assignment of one to a service principal is stored as.
MS_GRAPH_PERMISSIONS = {
    "1bfefb4e-e0b5-418b-a88f-73c46d2cc8e9": "AZMGApplication_ReadWrite_All",
    "06b708a9-e830-4db3-a914-8e69da51d44f": "AZMGAppRoleAssignment_ReadWrite_All",
    "19dbc75e-c2e2-444c-a770-ec69d8559fc7": "AZMGDirectory_ReadWrite_All",
    "62a82d76-70ea-41e2-9197-370581804d09": "AZMGGroup_ReadWrite_All",
    "dbaae8cf-10b5-4b86-a4a1-f871c94c6695": "AZMGGroupMember_ReadWrite_All",
    "9e3f62cf-ca93-4989-b6ce-bf83c28f9fe8": "AZMGRoleManagement_ReadWrite_Directory",
    "89c8469c-83ad-45f7-8ff2-6e3d4285709e": "AZMGServicePrincipalEndpoint_ReadWrite_All",
}
# Azure resources in a resource group, each with the field naming it.
RESOURCES = {
    "AZVM": "resourcegroupid",
    "AZVMScaleSet": "resourcegroupid",
    "AZFunctionApp": "resourcegroupid",
    "AZWebApp": "resourcegroupid",
    "AZLogicApp": "resourcegroupid",
    "AZAutomationAccount": "resourcegroupid",
    "AZContainerRegistry": "resourcegroupid",
    "AZManagedCluster": "resourcegroupid",
    "AZKeyVault": "resourcegroup",
}
# Resources whose managed identities (system- and user-assigned) are AZManagedIdentity edges.
WITH_IDENTITIES = set(RESOURCES) - {"AZManagedCluster", "AZKeyVault"}


def text(data: Any, key: str) -> str | None:
    value = data.get(key) if isinstance(data, dict) else None
    return value.upper() if isinstance(value, str) and value.strip() else None


def raw_text(data: Any, key: str) -> str | None:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, str) and value else None


def child(data: Any, key: str) -> Data:
    """The object under `key`, or an empty one."""
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, dict) else {}


def upper_name(*parts: Any) -> str | None:
    """`A@B` upper-cased, as the reference names Entra objects; None if `A` is missing."""
    if not isinstance(parts[0], str) or not parts[0]:
        return None
    return "@".join(p for p in parts if isinstance(p, str) and p).upper()


def graph_kind(member: Data) -> str | None:
    return MEMBER_KINDS.get(str(member.get("@odata.type", "")).lower())


def is_property_value(value: Any) -> bool:
    """A value the reference's typed records hold: text, a number, a flag or a list of text."""
    if isinstance(value, list):
        return all(isinstance(item, str) for item in value)
    return isinstance(value, str | int | float | bool)


def has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_nul(item) for item in value)
    return False


def safe_kind(kind: str) -> str:
    """A record kind as the run's report may print it (an unknown kind is the file's text)."""
    return re.sub(r"[^\w.-]", "?", kind)[:100]


def subscription_id(value: str) -> str:
    value = value.upper()
    return value if value.startswith("/SUBSCRIPTIONS/") else f"/SUBSCRIPTIONS/{value}"


class AzureReader:
    """One document's records; keeps the tenants' names (management groups are named after
    theirs, and AzureHound writes the tenant first)."""

    def __init__(self, source: str, writer: GraphWriter) -> None:
        self.source = source
        self.writer = writer
        self.tenant_names: dict[str, str] = {}

    async def read(self, kind: str, data: Data, where: str) -> None:
        handler = HANDLERS.get(kind)
        known = handler is not None or kind in ROLE_HOLDERS or kind in ASSIGNEE_RECORDS
        if not known and kind not in OWNERS:
            self.writer.skip(f"AzureHound {safe_kind(kind)}")
            return
        if has_nul(data):
            raise IngestError(self.source, "must not contain a NUL character", where)
        tenant = data.get("tenantid")
        if kind == "AZTenant" or tenant is None:
            pass
        elif not (isinstance(tenant, str) and is_uuid(tenant)):
            raise IngestError(self.source, f"'tenantId' must be a UUID, got {tenant!r:.60}", where)
        if handler is not None:
            await handler(self, data, where)
        elif kind in ROLE_HOLDERS:
            await self.role_holders(kind, data, where)
        elif kind in ASSIGNEE_RECORDS:
            await self.assignees(kind, data, where)
        else:
            await self.owners(kind, data, where)

    def listed(self, data: Any, key: str, where: str) -> list[Any]:
        """The list under `key` (none: empty); anything else is an error naming it."""
        value = data.get(key) if isinstance(data, dict) else None
        if value is None:
            return []
        if not isinstance(value, list):
            raise IngestError(self.source, f"'{key}' must be a list", where)
        return value

    def curated(self, data: Data, fields: dict[str, str], where: str) -> dict[str, Any]:
        """The properties the reference keeps, by its name, from the record's fields (a
        null one clears what an older collection stated)."""
        found = {}
        for name, key in fields.items():
            value = data.get(key)
            if value is not None and not is_property_value(value):
                raise IngestError(
                    self.source, f"'{key}' must be text, a number, true or false", where
                )
            found[name] = value
        return found

    async def node(
        self,
        object_id: str,
        kind: str,
        name: str | None,
        properties: dict[str, Any],
        tenant: str | None,
        facts: tuple[str, ...] = (),
    ) -> None:
        if tenant is not None:
            properties["tenantid"] = tenant
        properties["name"] = name or object_id
        await self.writer.node(
            NodeRecord(object_id, name or object_id, [kind, "AZBase"], properties, tenant),
            facts or None,
        )

    async def edge(
        self,
        start: str,
        end: str,
        kind: str,
        start_kind: str,
        end_kind: str,
        tenant: str | None = None,
        fact: str | None = None,
        owner: str | None = None,
        properties: dict[str, Any] | None = None,
    ) -> None:
        await self.writer.edge(
            EdgeRecord(
                start, end, kind, tenant, start_kind, end_kind, properties or {}, fact, owner
            )
        )

    def states(self, object_id: str, fact: str) -> None:
        """Say that this collection states `fact` of the object whole (its members, its
        owners...): what an older one stated in it goes, unless stated again."""
        self.writer.state(object_id, (fact,))

    # --- objects ---------------------------------------------------------------------------

    async def tenant(self, data: Data, where: str) -> None:
        tenant = text(data, "tenantid")
        if tenant is None or not is_uuid(tenant):
            raise IngestError(self.source, "an AZTenant needs 'tenantId', a UUID", where)
        display = raw_text(data, "displayname")
        self.tenant_names[tenant] = display or tenant
        properties = self.curated(data, {"displayname": "displayname"}, where)
        if data.get("collected") is True:
            properties["collected"] = True
        await self.node(tenant, "AZTenant", upper_name(display), properties, tenant)

    async def entity(
        self,
        kind: str,
        data: Data,
        where: str,
        id_field: str,
        name: str | None,
        properties: dict[str, Any],
        facts: tuple[str, ...] = (),
    ) -> str:
        """Store one object; its object id."""
        oid = text(data, id_field)
        if oid is None:
            raise IngestError(self.source, f"an {kind} needs '{id_field}'", where)
        tenant = text(data, "tenantid")
        await self.node(oid, kind, name, properties, tenant, (RECORD, *facts))
        if tenant is not None and kind not in RESOURCES and kind != "AZResourceGroup":
            await self.edge(
                tenant, oid, "AZContains", "AZTenant", kind, tenant, fact=RECORD, owner=oid
            )
        return oid

    async def user(self, data: Data, where: str) -> None:
        fields = {
            "enabled": "accountenabled",
            "displayname": "displayname",
            "title": "jobtitle",
            "email": "mail",
            "onpremid": "onpremisessecurityidentifier",
            "onpremsyncenabled": "onpremisessyncenabled",
            "userprincipalname": "userprincipalname",
            "usertype": "usertype",
            "whencreated": "createddatetime",
            "pwdlastset": "lastpasswordchangedatetime",
        }
        properties = self.curated(data, fields, where)
        signin = data.get("signinactivity")
        if isinstance(signin, dict) and signin.get("lastsuccessfulsignindatetime"):
            properties["lastsuccessfulsignin"] = signin["lastsuccessfulsignindatetime"]
        name = upper_name(data.get("userprincipalname")) or upper_name(data.get("displayname"))
        await self.entity("AZUser", data, where, "id", name, properties)

    async def group(self, data: Data, where: str) -> None:
        fields = {
            "displayname": "displayname",
            "description": "description",
            "isassignabletorole": "isassignabletorole",
            "onpremid": "onpremisessecurityidentifier",
            "onpremsyncenabled": "onpremisessyncenabled",
            "securityenabled": "securityenabled",
            "securityidentifier": "securityidentifier",
            "whencreated": "createddatetime",
        }
        name = upper_name(data.get("displayname"), data.get("tenantname"))
        await self.entity("AZGroup", data, where, "id", name, self.curated(data, fields, where))

    async def app(self, data: Data, where: str) -> None:
        fields = {
            "displayname": "displayname",
            "description": "description",
            "appid": "appid",
            "publisherdomain": "publisherdomain",
            "signinaudience": "signinaudience",
            "whencreated": "createddatetime",
        }
        name = upper_name(data.get("displayname"), data.get("publisherdomain"))
        await self.entity("AZApp", data, where, "appid", name, self.curated(data, fields, where))

    async def service_principal(self, data: Data, where: str) -> None:
        fields = {
            "displayname": "displayname",
            "description": "description",
            "enabled": "accountenabled",
            "appid": "appid",
            "appownerorganizationid": "appownerorganizationid",
            "appdescription": "appdescription",
            "appdisplayname": "appdisplayname",
            "loginurl": "loginurl",
            "serviceprincipaltype": "serviceprincipaltype",
        }
        name = upper_name(data.get("displayname"), data.get("tenantname"))
        properties = self.curated(data, fields, where)
        oid = await self.entity(
            "AZServicePrincipal", data, where, "id", name, properties, (APP_ROLE_ASSIGNMENTS,)
        )
        app = text(data, "appid")
        if app is not None:
            tenant = text(data, "tenantid")
            await self.edge(
                app, oid, "AZRunsAs", "AZApp", "AZServicePrincipal", tenant,
                fact=RECORD, owner=oid,
            )  # fmt: skip
            if raw_text(data, "appdisplayname"):
                self.writer.name_stub(app, str(data["appdisplayname"]).upper())

    async def device(self, data: Data, where: str) -> None:
        fields = {
            "displayname": "displayname",
            "deviceid": "deviceid",
            "operatingsystemversion": "operatingsystemversion",
            "trustype": "trusttype",  # sic: the reference's name
            "enabled": "accountenabled",
        }
        properties = self.curated(data, fields, where)
        if raw_text(data, "operatingsystem"):
            properties["operatingsystem"] = str(data["operatingsystem"]).upper()
        name = upper_name(data.get("displayname"), data.get("tenantname"))
        await self.entity("AZDevice", data, where, "id", name, properties)

    async def role(self, data: Data, where: str) -> None:
        role, tenant = text(data, "id"), text(data, "tenantid")
        if role is None or tenant is None:
            raise IngestError(self.source, "an AZRole needs 'id' and 'tenantId'", where)
        fields = {
            "displayname": "displayname",
            "description": "description",
            "enabled": "isenabled",
            "isbuiltin": "isbuiltin",
            "templateid": "templateid",
        }
        oid = f"{role}@{tenant}"
        name = upper_name(data.get("displayname"), data.get("tenantname"))
        properties = self.curated(data, fields, where)
        await self.node(oid, "AZRole", name, properties, tenant, (RECORD, ELIGIBILITIES))
        await self.edge(
            tenant, oid, "AZContains", "AZTenant", "AZRole", tenant, fact=RECORD, owner=oid
        )

    async def subscription(self, data: Data, where: str) -> None:
        properties = self.curated(data, {"displayname": "displayname"}, where)
        name = upper_name(data.get("displayname"))
        await self.entity("AZSubscription", data, where, "id", name, properties)

    async def management_group(self, data: Data, where: str) -> None:
        nested = child(data, "properties")
        display = data.get("displayname") or nested.get("displayname")
        tenant = text(data, "tenantid") or text(nested, "tenantid")
        if tenant is not None:
            data = {**data, "tenantid": tenant}
        tenant_name = data.get("tenantname") or self.tenant_names.get(tenant or "")
        properties = {"displayname": display} if display else {}
        name = upper_name(display, tenant_name)
        await self.entity("AZManagementGroup", data, where, "id", name, properties, (DESCENDANTS,))

    async def resource_group(self, data: Data, where: str) -> None:
        oid = await self.entity(
            "AZResourceGroup", data, where, "id", upper_name(data.get("name")), {}
        )
        subscription = text(data, "subscriptionid")
        if subscription is not None:
            await self.edge(
                subscription_id(subscription),
                oid,
                "AZContains",
                "AZSubscription",
                "AZResourceGroup",
                text(data, "tenantid"),
                fact=RECORD,
                owner=oid,
            )

    async def resource(self, kind: str, data: Data, where: str) -> None:
        """A VM, key vault, web app... in a resource group, with its managed identities."""
        nested = child(data, "properties")
        if text(data, "tenantid") is None and text(nested, "tenantid"):
            data = {**data, "tenantid": nested["tenantid"]}  # key vaults keep it there
        properties: dict[str, Any] = {}
        facts: tuple[str, ...] = ()
        if kind == "AZVM":
            # (A record's `properties` has its keys lower-cased at its own level only.)
            profile = lower_keys(nested.get("storageprofile"))
            disk = profile.get("osdisk") if isinstance(profile, dict) else None
            os_type = disk.get("ostype") if isinstance(disk, dict) else None
            if isinstance(os_type, str) and os_type:
                properties["operatingsystem"] = os_type.upper()
        elif kind == "AZKeyVault":
            if nested.get("enablerbacauthorization") is not None:
                properties["enablerbacauthorization"] = nested["enablerbacauthorization"]
            facts = (ACCESS_POLICIES,)
        elif kind == "AZManagedCluster":
            node_group = raw_text(nested, "noderesourcegroup")
            subscription = text(data, "subscriptionid")
            if node_group and subscription:
                node_group_id = f"{subscription_id(subscription)}/RESOURCEGROUPS/{node_group}"
                properties["noderesourcegroupid"] = node_group_id.upper()
        tenant = text(data, "tenantid")
        oid = await self.entity(kind, data, where, "id", upper_name(data.get("name")), properties,
                                facts)  # fmt: skip
        group = text(data, RESOURCES[kind])
        if group is not None:
            await self.edge(
                group, oid, "AZContains", "AZResourceGroup", kind, tenant, fact=RECORD, owner=oid
            )
        if "noderesourcegroupid" in properties:
            await self.edge(
                oid,
                properties["noderesourcegroupid"],
                "AZNodeResourceGroup",
                kind,
                "AZResourceGroup",
                tenant,
                fact=RECORD,
                owner=oid,
            )
        if kind in WITH_IDENTITIES:
            identity = child(data, "identity")
            principals = [text(identity, "principalid")]
            assigned = identity.get("userassignedidentities")
            if isinstance(assigned, dict):
                principals += [
                    text(i, "principalid") for i in assigned.values() if text(i, "clientid")
                ]
            for principal in principals:
                if principal is not None:
                    await self.edge(
                        oid, principal, "AZManagedIdentity", kind, "AZServicePrincipal", tenant,
                        fact=RECORD, owner=oid,
                    )  # fmt: skip

    # --- what holds what -------------------------------------------------------------------

    async def group_members(self, data: Data, where: str) -> None:
        group = text(data, "groupid")
        if group is None:
            return
        self.states(group, "azure:members")
        for entry in self.listed(data, "members", where):
            member = entry.get("member") if isinstance(entry, dict) else None
            member_kind = graph_kind(member) if isinstance(member, dict) else None
            member_id = text(member, "id")
            if member_kind is not None and member_id is not None:
                await self.edge(
                    member_id, group, "AZMemberOf", member_kind, "AZGroup",
                    fact="azure:members", owner=group,
                )  # fmt: skip

    async def owners(self, kind: str, data: Data, where: str) -> None:
        field, owned_kind = OWNERS[kind]
        owned = text(data, field)
        if owned is None:
            return
        self.states(owned, "azure:owners")
        for entry in self.listed(data, "owners", where):
            owner = entry.get("owner") if isinstance(entry, dict) else None
            owner_kind = graph_kind(owner) if isinstance(owner, dict) else None
            owner_id = text(owner, "id")
            if owner_kind is not None and owner_id is not None:
                await self.edge(
                    owner_id, owned, "AZOwns", owner_kind, owned_kind,
                    fact="azure:owners", owner=owned,
                )  # fmt: skip

    async def role_assignments(self, data: Data, where: str) -> None:
        """One Entra role's assignments: AZHasRole (scoped ones say their scope), but the
        application administrators' below the tenant, which are edges to their objects."""
        tenant = text(data, "tenantid")
        role_id = text(data, "roledefinitionid")
        if tenant is None:
            return
        if role_id is not None:
            self.states(f"{role_id}@{tenant}", "azure:assignments")
        for assignment in self.listed(data, "roleassignments", where):
            if not isinstance(assignment, dict):
                continue
            principal = text(assignment, "principalid")
            role = text(assignment, "roledefinitionid") or role_id
            if principal is None or role is None:
                continue
            scope_id = assignment.get("directoryscopeid") or "/"
            if not isinstance(scope_id, str):
                raise IngestError(self.source, "'directoryScopeId' must be text", where)
            scope = tenant if scope_id == "/" else scope_id[1:].upper()
            role_node = f"{role}@{tenant}"
            scoped_kind = SCOPED_ADMIN_ROLES.get(role)
            if scoped_kind is not None and scope_id != "/":
                await self.edge(
                    principal, scope, scoped_kind, "AZBase", "AZBase", tenant,
                    fact="azure:assignments", owner=role_node,
                )  # fmt: skip
            else:
                await self.edge(
                    principal, role_node, "AZHasRole", "AZBase", "AZRole", tenant,
                    fact="azure:assignments", owner=role_node, properties={"scope": scope},
                )  # fmt: skip

    async def role_eligibility(self, data: Data, where: str) -> None:
        """A PIM eligibility: AZRoleEligible, for tenant-wide ones (the reference's rule)."""
        tenant, role = text(data, "tenantid"), text(data, "roledefinitionid")
        principal = text(data, "principalid")
        if tenant and role and principal and raw_text(data, "directoryscopeid") == "/":
            role_node = f"{role}@{tenant}"
            await self.edge(
                principal, role_node, "AZRoleEligible", "AZBase", "AZRole", tenant,
                fact=ELIGIBILITIES, owner=role_node,
            )  # fmt: skip

    async def role_policy(self, data: Data, where: str) -> None:
        """A PIM activation policy: kept on its role (the analysis derives its approvers)."""
        tenant, role = text(data, "tenantid"), text(data, "roledefinitionid")
        if tenant is None or role is None:
            return
        properties: dict[str, Any] = {"roledefinitionid": role}
        for flag in ("approval", "capauthenticationcontext", "mfa", "justification",
                     "ticketinformation"):  # fmt: skip
            properties[f"enduserassignmentrequires{flag}"] = (
                data.get(f"enduserassignmentrequires{flag}") is True
            )
        for who in ("user", "group"):
            approvers = self.listed(data, f"enduserassignment{who}approvers", where)
            listed = [a.upper() for a in approvers if isinstance(a, str) and a]
            properties[f"enduserassignment{who}approvers"] = listed or None
        oid = f"{role}@{tenant}"
        await self.writer.node(
            NodeRecord(oid, oid, ["AZRole", "AZBase"], {**properties, "tenantid": tenant}, tenant)
        )
        await self.edge(
            tenant, oid, "AZContains", "AZTenant", "AZRole", tenant, fact=RECORD, owner=oid
        )

    async def app_role_assignment(self, data: Data, where: str) -> None:
        """Microsoft Graph's application permissions held by service principals."""
        if raw_text(data, "appid") != MS_GRAPH_APP_ID or data.get("principaltype") != (
            "ServicePrincipal"
        ):
            return
        principal, resource = text(data, "principalid"), text(data, "resourceid")
        kind = MS_GRAPH_PERMISSIONS.get(str(data.get("approleid", "")).lower())
        if principal and resource and kind:
            tenant = text(data, "tenantid")
            await self.edge(
                principal, resource, kind, "AZServicePrincipal", "AZServicePrincipal", tenant,
                fact=APP_ROLE_ASSIGNMENTS, owner=resource,
            )  # fmt: skip

    async def role_holders(self, kind: str, data: Data, where: str) -> None:
        """The holders of one Azure role on one resource; only assignments made on the
        resource itself (inherited ones are the scope's own record)."""
        field, target_kind, items, item, edge = ROLE_HOLDERS[kind]
        resource = text(data, field)
        if resource is None:
            return
        fact = f"azure:{edge}"
        self.states(resource, fact)
        for entry in self.listed(data, items, where):
            assignment = entry.get(item) if isinstance(entry, dict) else None
            held = assignment.get("properties") if isinstance(assignment, dict) else None
            principal = text(held, "principalid")
            if principal is not None and text(held, "scope") == resource:
                await self.edge(
                    principal, resource, edge, "AZBase", target_kind, fact=fact, owner=resource
                )

    async def assignees(self, kind: str, data: Data, where: str) -> None:
        target_kind, own_role = ASSIGNEE_RECORDS[kind]
        resource = text(data, "objectid")
        if resource is None:
            return
        self.states(resource, "azure:rbac")
        allowed = {OWNER_ROLE, USER_ACCESS_ADMINISTRATOR_ROLE, CONTRIBUTOR_ROLE, own_role}
        for entry in self.listed(data, "assignees", where):
            if not isinstance(entry, dict):
                continue
            role = str(entry.get("roledefinitionid") or "").rsplit("/", 1)[-1].lower()
            held = child(child(entry, "assignee"), "properties")
            principal = text(held, "principalid")
            if role in allowed and principal is not None and text(held, "scope") == resource:
                await self.edge(
                    principal, resource, RBAC_ROLE_EDGES[role], "AZBase", target_kind,
                    fact="azure:rbac", owner=resource,
                )  # fmt: skip

    async def access_policy(self, data: Data, where: str) -> None:
        """One entry of a key vault's access policy: a principal's Get rights on its keys,
        secrets and certificates (the vault's record states its policies whole)."""
        vault, principal = text(data, "keyvaultid"), text(data, "objectid")
        permissions = data.get("permissions")
        if vault is None or principal is None or not isinstance(permissions, dict):
            return
        for field, edge in (("certificates", "AZGetCertificates"), ("keys", "AZGetKeys"),
                            ("secrets", "AZGetSecrets")):  # fmt: skip
            if "Get" in self.listed(permissions, field, f"{where}.permissions"):
                await self.edge(
                    principal, vault, edge, "AZBase", "AZKeyVault",
                    fact=ACCESS_POLICIES, owner=vault,
                )  # fmt: skip

    async def management_group_descendant(self, data: Data, where: str) -> None:
        descendant = text(data, "id")
        parent = text(child(child(data, "properties"), "parent"), "id")
        if descendant is None or parent is None:
            return
        subscription = descendant.startswith("/SUBSCRIPTIONS/")
        kind = "AZSubscription" if subscription else "AZManagementGroup"
        await self.edge(
            parent, descendant, "AZContains", "AZManagementGroup", kind,
            fact=DESCENDANTS, owner=parent,
        )  # fmt: skip

    async def federated_identity_credentials(self, data: Data, where: str) -> None:
        """An application's federated credentials, stated whole."""
        stated: set[str] = set()
        for entry in self.listed(data, "fics", where):
            fic = entry.get("fic") if isinstance(entry, dict) else None
            app = text(entry, "appid") or text(data, "appid")
            fic_id = text(fic, "id")
            if not isinstance(fic, dict) or fic_id is None or app is None:
                continue
            if app not in stated:
                self.states(app, CREDENTIALS)
                stated.add(app)
            fields = {"issuer": "issuer", "subject": "subject", "audiences": "audiences",
                      "description": "description"}  # fmt: skip
            name = upper_name(fic.get("name")) or fic_id
            await self.writer.node(
                NodeRecord(
                    fic_id,
                    name,
                    ["AZFederatedIdentityCredential", "AZBase"],
                    {**self.curated(fic, fields, where), "name": name},
                )
            )
            await self.edge(
                fic_id, app, "AZAuthenticatesTo", "AZFederatedIdentityCredential", "AZApp",
                fact=CREDENTIALS, owner=app,
            )  # fmt: skip


def resource_reader(kind: str) -> Callable[[AzureReader, Data, str], Any]:
    async def read(reader: AzureReader, data: Data, where: str) -> None:
        await reader.resource(kind, data, where)

    return read


HANDLERS: dict[str, Callable[[AzureReader, Data, str], Any]] = {
    "AZTenant": AzureReader.tenant,
    "AZUser": AzureReader.user,
    "AZGroup": AzureReader.group,
    "AZApp": AzureReader.app,
    "AZServicePrincipal": AzureReader.service_principal,
    "AZDevice": AzureReader.device,
    "AZRole": AzureReader.role,
    "AZSubscription": AzureReader.subscription,
    "AZManagementGroup": AzureReader.management_group,
    "AZResourceGroup": AzureReader.resource_group,
    **{kind: resource_reader(kind) for kind in RESOURCES},
    "AZGroupMember": AzureReader.group_members,
    "AZRoleAssignment": AzureReader.role_assignments,
    "AZRoleEligibilityScheduleInstance": AzureReader.role_eligibility,
    "AZRoleManagementPolicyAssignment": AzureReader.role_policy,
    "AZAppRoleAssignment": AzureReader.app_role_assignment,
    "AZKeyVaultAccessPolicy": AzureReader.access_policy,
    "AZManagementGroupDescendant": AzureReader.management_group_descendant,
    "AZFederatedIdentityCredential": AzureReader.federated_identity_credentials,
}


async def ingest(records: AsyncIterator[tuple[int, Any]], source: str, writer: GraphWriter) -> None:
    reader = AzureReader(source, writer)
    async for i, raw in records:
        where = f"data[{i}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("kind"), str):
            raise IngestError(source, "must be an object with a string 'kind'", where)
        data = lower_keys(raw.get("data"))
        if not isinstance(data, dict):
            raise IngestError(source, "'data' must be an object", where)
        await reader.read(raw["kind"], data, where)
