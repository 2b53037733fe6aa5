"""Built-in schema extensions: Active Directory and Azure, with their kinds.

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

AD_NODES = [
    "Base",
    "User",
    "Computer",
    "Group",
    "GPO",
    "OU",
    "Container",
    "Domain",
    "ADLocalGroup",
    "ADLocalUser",
    "AIACA",
    "RootCA",
    "EnterpriseCA",
    "NTAuthStore",
    "CertTemplate",
    "IssuancePolicy",
]
AD_RELATIONSHIPS = [
    "Owns",
    "GenericAll",
    "GenericWrite",
    "WriteOwner",
    "WriteDacl",
    "MemberOf",
    "ForceChangePassword",
    "AllExtendedRights",
    "AddMember",
    "HasSession",
    "Contains",
    "GPLink",
    "AllowedToDelegate",
    "CoerceToTGT",
    "GetChanges",
    "GetChangesAll",
    "GetChangesInFilteredSet",
    "CrossForestTrust",
    "SameForestTrust",
    "SpoofSIDHistory",
    "AbuseTGTDelegation",
    "AllowedToAct",
    "AdminTo",
    "CanPSRemote",
    "CanRDP",
    "ExecuteDCOM",
    "HasSIDHistory",
    "AddSelf",
    "DCSync",
    "ReadLAPSPassword",
    "ReadGMSAPassword",
    "DumpSMSAPassword",
    "SQLAdmin",
    "AddAllowedToAct",
    "WriteSPN",
    "AddKeyCredentialLink",
    "LocalToComputer",
    "MemberOfLocalGroup",
    "RemoteInteractiveLogonRight",
    "SyncLAPSPassword",
    "WriteAccountRestrictions",
    "WriteGPLink",
    "RootCAFor",
    "DCFor",
    "PublishedTo",
    "ManageCertificates",
    "ManageCA",
    "DelegatedEnrollmentAgent",
    "Enroll",
    "HostsCAService",
    "WritePKIEnrollmentFlag",
    "WritePKINameFlag",
    "NTAuthStoreFor",
    "TrustedForNTAuth",
    "EnterpriseCAFor",
    "IssuedSignedBy",
    "GoldenCert",
    "EnrollOnBehalfOf",
    "OIDGroupLink",
    "ExtendedByPolicy",
    "ADCSESC1",
    "ADCSESC3",
    "ADCSESC4",
    "ADCSESC6a",
    "ADCSESC6b",
    "ADCSESC9a",
    "ADCSESC9b",
    "ADCSESC10a",
    "ADCSESC10b",
    "ADCSESC13",
    "SyncedToEntraUser",
    "CoerceAndRelayNTLMToSMB",
    "CoerceAndRelayNTLMToADCS",
    "WriteOwnerLimitedRights",
    "WriteOwnerRaw",
    "OwnsLimitedRights",
    "OwnsRaw",
    "ClaimSpecialIdentity",
    "CoerceAndRelayNTLMToLDAP",
    "CoerceAndRelayNTLMToLDAPS",
    "ContainsIdentity",
    "PropagatesACEsTo",
    "GPOAppliesTo",
    "CanApplyGPO",
    "HasTrustKeys",
    "ProtectAdminGroups",
    "CanBackup",
    "BackupPrivilege",
    "RestorePrivilege",
]
AZ_NODES = [
    "AZBase",
    "AZApp",
    "AZVMScaleSet",
    "AZRole",
    "AZDevice",
    "AZFunctionApp",
    "AZGroup",
    "AZKeyVault",
    "AZManagementGroup",
    "AZResourceGroup",
    "AZServicePrincipal",
    "AZSubscription",
    "AZTenant",
    "AZUser",
    "AZVM",
    "AZManagedCluster",
    "AZContainerRegistry",
    "AZWebApp",
    "AZLogicApp",
    "AZAutomationAccount",
    "AZFederatedIdentityCredential",
]
AZ_RELATIONSHIPS = [
    "AZAvereContributor",
    "AZContains",
    "AZContributor",
    "AZGetCertificates",
    "AZGetKeys",
    "AZGetSecrets",
    "AZHasRole",
    "AZMemberOf",
    "AZOwner",
    "AZRunsAs",
    "AZVMContributor",
    "AZAutomationContributor",
    "AZKeyVaultContributor",
    "AZVMAdminLogin",
    "AZAddMembers",
    "AZAddSecret",
    "AZExecuteCommand",
    "AZGlobalAdmin",
    "AZPrivilegedAuthAdmin",
    "AZGrant",
    "AZGrantSelf",
    "AZPrivilegedRoleAdmin",
    "AZResetPassword",
    "AZUserAccessAdministrator",
    "AZOwns",
    "AZScopedTo",
    "AZCloudAppAdmin",
    "AZAppAdmin",
    "AZAddOwner",
    "AZManagedIdentity",
    "AZMGApplication_ReadWrite_All",
    "AZMGAppRoleAssignment_ReadWrite_All",
    "AZMGDirectory_ReadWrite_All",
    "AZMGGroup_ReadWrite_All",
    "AZMGGroupMember_ReadWrite_All",
    "AZMGRoleManagement_ReadWrite_Directory",
    "AZMGServicePrincipalEndpoint_ReadWrite_All",
    "AZAKSContributor",
    "AZNodeResourceGroup",
    "AZWebsiteContributor",
    "AZLogicAppContributor",
    "AZMGAddMember",
    "AZMGAddOwner",
    "AZMGAddSecret",
    "AZMGGrantAppRoles",
    "AZMGGrantRole",
    "SyncedToADUser",
    "AZRoleEligible",
    "AZRoleApprover",
    "AZAuthenticatesTo",
]

# (name, display name, node kinds, relationship kinds, environment kind, source kind)
EXTENSIONS = [
    ("AD", "Active Directory", AD_NODES, AD_RELATIONSHIPS, "Domain", "Base"),
    ("AZ", "Azure", AZ_NODES, AZ_RELATIONSHIPS, "AZTenant", "AZBase"),
]


def upgrade() -> None:
    bind = op.get_bind()
    now = datetime.now(UTC)
    kinds = sa.table("kinds", sa.column("id", sa.Integer), sa.column("name", sa.String))
    extensions = sa.table(
        "schema_extensions",
        sa.column("id", sa.Integer),
        sa.column("name"),
        sa.column("display_name"),
        sa.column("version"),
        sa.column("is_builtin", sa.Boolean),
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("updated_at", sa.DateTime(timezone=True)),
    )
    extension_kinds = sa.table(
        "schema_extension_kinds",
        sa.column("extension_id"),
        sa.column("kind_id"),
        sa.column("category"),
    )
    environments = sa.table(
        "schema_environments",
        sa.column("extension_id"),
        sa.column("environment_kind_id"),
        sa.column("source_kind_id"),
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("updated_at", sa.DateTime(timezone=True)),
    )

    def kind_id(name: str) -> int:
        found = bind.execute(sa.select(kinds.c.id).where(kinds.c.name == name)).scalar()
        if found is not None:
            return int(found)
        return int(
            bind.execute(sa.insert(kinds).values(name=name).returning(kinds.c.id)).scalar_one()
        )

    for name, display, nodes, relationships, env_kind, source_kind in EXTENSIONS:
        extension_id = bind.execute(
            sa.insert(extensions)
            .values(
                name=name,
                display_name=display,
                version="builtin",
                is_builtin=True,
                created_at=now,
                updated_at=now,
            )
            .returning(extensions.c.id)
        ).scalar_one()
        rows = [
            {"extension_id": extension_id, "kind_id": kind_id(k), "category": "node"} for k in nodes
        ]
        rows += [
            {"extension_id": extension_id, "kind_id": kind_id(k), "category": "relationship"}
            for k in relationships
        ]
        op.bulk_insert(extension_kinds, rows)
        op.bulk_insert(
            environments,
            [
                {
                    "extension_id": extension_id,
                    "environment_kind_id": kind_id(env_kind),
                    "source_kind_id": kind_id(source_kind),
                    "created_at": now,
                    "updated_at": now,
                }
            ],
        )


def downgrade() -> None:
    op.execute("DELETE FROM schema_extensions WHERE is_builtin")
