"""The reference's relationship kind macros: `-[:AD_ATTACK_PATHS*1..]->` stands for every
kind its AD path finding walks, `AZ_ATTACK_PATHS` Azure's, `ALL_ATTACK_PATHS` both (Azure's
first, as the reference lists them). Facts from the reference's schema
(SpecterOps/BloodHound packages/go/graphschema: ad.PathfindingRelationships() and
azure.PathfindingRelationships(); Apache-2.0), as its rewriter expands them
(cmd/api/src/queries/rewriter.go).
"""

from __future__ import annotations

AD_ATTACK_PATHS = (
    "Owns", "GenericAll", "GenericWrite", "WriteOwner", "WriteDacl", "MemberOf",
    "ForceChangePassword", "AllExtendedRights", "AddMember", "HasSession", "GPLink",
    "AllowedToDelegate", "CoerceToTGT", "AllowedToAct", "AdminTo", "CanPSRemote", "CanRDP",
    "ExecuteDCOM", "HasSIDHistory", "AddSelf", "DCSync", "ReadLAPSPassword",
    "ReadGMSAPassword", "DumpSMSAPassword", "SQLAdmin", "AddAllowedToAct", "WriteSPN",
    "AddKeyCredentialLink", "SyncLAPSPassword", "WriteAccountRestrictions", "WriteGPLink",
    "GoldenCert", "ADCSESC1", "ADCSESC3", "ADCSESC4", "ADCSESC6a", "ADCSESC6b", "ADCSESC9a",
    "ADCSESC9b", "ADCSESC10a", "ADCSESC10b", "ADCSESC13", "SyncedToEntraUser",
    "CoerceAndRelayNTLMToSMB", "CoerceAndRelayNTLMToADCS", "WriteOwnerLimitedRights",
    "OwnsLimitedRights", "ClaimSpecialIdentity", "CoerceAndRelayNTLMToLDAP",
    "CoerceAndRelayNTLMToLDAPS", "ContainsIdentity", "PropagatesACEsTo", "GPOAppliesTo",
    "CanApplyGPO", "HasTrustKeys", "ManageCA", "ManageCertificates", "CanBackup", "Contains",
    "DCFor", "SameForestTrust", "SpoofSIDHistory", "AbuseTGTDelegation",
)  # fmt: skip

AZ_ATTACK_PATHS = (
    "AZAvereContributor", "AZContributor", "AZGetCertificates", "AZGetKeys", "AZGetSecrets",
    "AZHasRole", "AZMemberOf", "AZOwner", "AZRunsAs", "AZVMContributor",
    "AZAutomationContributor", "AZKeyVaultContributor", "AZVMAdminLogin", "AZAddMembers",
    "AZAddSecret", "AZExecuteCommand", "AZGlobalAdmin", "AZPrivilegedAuthAdmin", "AZGrant",
    "AZGrantSelf", "AZPrivilegedRoleAdmin", "AZResetPassword", "AZUserAccessAdministrator",
    "AZOwns", "AZCloudAppAdmin", "AZAppAdmin", "AZAddOwner", "AZManagedIdentity",
    "AZAKSContributor", "AZNodeResourceGroup", "AZWebsiteContributor", "AZLogicAppContributor",
    "AZMGAddMember", "AZMGAddOwner", "AZMGAddSecret", "AZMGGrantAppRoles", "AZMGGrantRole",
    "SyncedToADUser", "AZContains",
)  # fmt: skip

MACROS = {
    "AD_ATTACK_PATHS": AD_ATTACK_PATHS,
    "AZ_ATTACK_PATHS": AZ_ATTACK_PATHS,
    "ALL_ATTACK_PATHS": AZ_ATTACK_PATHS + AD_ATTACK_PATHS,
}
