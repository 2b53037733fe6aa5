"""What SharpHound reports about an object outside its `Properties`, kept as properties under
the reference's names: SMB signing, WebClient, the NTLM registry values, a domain
controller's certificate mapping and binding registry values, a CA's registry flags and web
enrollment endpoints, the owner's SID, the user rights collected; and the LDAP availability
flags under the reference's names.

A block is read only when it says it was collected (`Collected: true`): a block that failed
or is missing states nothing, and what an earlier collection stated stays. A collected NTLM
block states every one of its values: one it no longer holds is cleared (None; the writer
drops it from the stored properties), as the reference clears them. Keys are lower-cased
(records.lower_keys) except in ACEs, which keep the collector's.
"""

from __future__ import annotations

from typing import Any

# NTLMRegistryData.Result's values -> (property, how the value becomes it)
NTLM_VALUES: dict[str, tuple[str, str]] = {
    "restrictsendingntlmtraffic": ("restrictoutboundntlm", "deny all"),
    # The reference's spelling ("ntml"), kept so that its queries find it.
    "restrictreceivingntlmtraffic": ("restrictreceivingntmltraffic", "deny all"),
    "requiresecuritysignature": ("requiresecuritysignature", "set"),
    "enablesecuritysignature": ("enablesecuritysignature", "set"),
    "ntlmminclientsec": ("ntlmminclientsec", "number"),
    "ntlmminserversec": ("ntlmminserversec", "number"),
    "lmcompatibilitylevel": ("lmcompatibilitylevel", "number"),
    "usemachineid": ("usemachineid", "set"),
    "clientallowedntlmservers": ("clientallowedntlmservers", "list"),
}
DENY_ALL = 2  # RestrictSendingNtlmTraffic and RestrictReceivingNTLMTraffic: 0 allow, 1 audit

REGISTRY_VALUE_MISSING = -1  # what the collector reports for a registry value not set
CERTIFICATE_MAPPING_BITS = (
    (0x01, "0x01: One-to-one (subject/issuer)"),
    (0x02, "0x02: Many-to-one (issuer certificate)"),
    (0x04, "0x04: User principal name (UPN/SAN)"),
    (0x08, "0x08: Kerberos service-for-user (S4U) certificate"),
    (0x10, "0x10: Kerberos service-for-user (S4U) explicit certificate"),
)
MISSING_TEXT = "Registry value does not exist"
BINDING_ENFORCEMENT = {
    REGISTRY_VALUE_MISSING: MISSING_TEXT,
    0: "Disabled",
    1: "Compatibility mode",
    2: "Full enforcement mode",
}
# User rights whose collected grants set `hasura` (the reference's CanRDP rule reads it).
USER_RIGHTS = {"SeRemoteInteractiveLogonRight", "SeBackupPrivilege", "SeRestorePrivilege"}
OWNER_RIGHTS = {"Owns", "OwnsRaw", "Owner"}  # "Owner": JSON v3's name of the owner's ACE
# Every property `collected_facts` states from a block: a newer collection's properties
# replace the older ones but for these, which stay until a collected block states them.
FACT_KEYS = frozenset(
    {
        "ownersid",
        "webclientrunning",
        "smbsigning",
        *(name for name, _ in NTLM_VALUES.values()),
        "certificatemappingmethodsraw",
        "certificatemappingmethods",
        "strongcertificatebindingenforcementraw",
        "strongcertificatebindingenforcement",
        "vulnerablenetlogonsecuritydescriptorcollected",
        "vulnerablenetlogonsecuritydescriptor",
        "hasura",
        "hasenrollmentagentrestrictions",
        "isuserspecifiessanenabled",
        "roleseparationenabled",
        "httpenrollmentendpoints",
        "httpsenrollmentendpoints",
        "hasvulnerableendpoint",
    }
)


def collected(block: Any) -> dict[str, Any] | None:
    """A `{Collected, FailureReason, ...}` block that was collected, else None."""
    return block if isinstance(block, dict) and block.get("collected") is True else None


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def collected_facts(
    label: str, record: dict[str, Any], properties: dict[str, Any]
) -> dict[str, Any]:
    """The properties the record's blocks state (None: a property to clear), and the renamed
    LDAP flags; `properties` (the record's own) are not changed."""
    facts: dict[str, Any] = {}
    owner = owner_sid(record.get("aces"))
    if owner is not None:
        facts["ownersid"] = owner
    if label == "Computer":
        facts.update(computer_facts(record, properties))
    elif label == "EnterpriseCA":
        facts.update(enterprise_ca_facts(record))
    return facts


def owner_sid(aces: Any) -> str | None:
    """The principal of the first ACE that names the owner."""
    for ace in aces if isinstance(aces, list) else []:
        if not isinstance(ace, dict):
            continue
        lowered = {str(k).lower(): v for k, v in ace.items()}
        sid = lowered.get("principalsid")
        if lowered.get("rightname") in OWNER_RIGHTS and isinstance(sid, str) and sid:
            return sid.upper()
    return None


def computer_facts(record: dict[str, Any], properties: dict[str, Any]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    webclient = collected(record.get("iswebclientrunning"))
    if webclient is not None and isinstance(webclient.get("result"), bool):
        facts["webclientrunning"] = webclient["result"]
    smb = collected(record.get("smbinfo"))
    result = smb.get("result") if smb is not None else None
    if isinstance(result, dict) and isinstance(result.get("signingenabled"), bool):
        facts["smbsigning"] = result["signingenabled"]
    ntlm = collected(record.get("ntlmregistrydata"))
    if ntlm is not None:
        facts.update(ntlm_facts(ntlm.get("result")))
    for old, new in (("ldapenabled", "ldapavailable"), ("ldapsenabled", "ldapsavailable")):
        if old in properties:
            facts[old] = None
            facts[new] = properties[old]
    facts.update(dc_registry_facts(record.get("dcregistrydata")))
    if any(
        isinstance(right, dict)
        and right.get("collected") is True
        and right.get("privilege") in USER_RIGHTS
        and right.get("results")
        for right in record.get("userrights") or []
    ):
        facts["hasura"] = True
    return facts


def ntlm_facts(result: Any) -> dict[str, Any]:
    """Every NTLM property: from the value the collector read, or cleared."""
    result = result if isinstance(result, dict) else {}
    facts: dict[str, Any] = {}
    for key, (name, reading) in NTLM_VALUES.items():
        value = result.get(key)
        facts[name] = None
        if reading == "list":
            if isinstance(value, list):
                facts[name] = [v for v in value if isinstance(v, str)]
        elif is_number(value):
            if reading == "deny all":
                facts[name] = value == DENY_ALL
            elif reading == "set":
                facts[name] = value != 0
            else:
                facts[name] = value
    return facts


def dc_registry_facts(data: Any) -> dict[str, Any]:
    data = data if isinstance(data, dict) else {}
    facts: dict[str, Any] = {}
    mapping = collected(data.get("certificatemappingmethods"))
    if mapping is not None and is_number(mapping.get("value")):
        value = int(mapping["value"])
        facts["certificatemappingmethodsraw"] = value
        facts["certificatemappingmethods"] = (
            [MISSING_TEXT]
            if value == REGISTRY_VALUE_MISSING
            else [text for bit, text in CERTIFICATE_MAPPING_BITS if value & bit]
        )
    binding = collected(data.get("strongcertificatebindingenforcement"))
    if binding is not None and is_number(binding.get("value")):
        value = int(binding["value"])
        facts["strongcertificatebindingenforcementraw"] = value
        if value in BINDING_ENFORCEMENT:
            facts["strongcertificatebindingenforcement"] = BINDING_ENFORCEMENT[value]
    netlogon = collected(data.get("vulnerablenetlogonsecuritydescriptor"))
    facts["vulnerablenetlogonsecuritydescriptorcollected"] = netlogon is not None
    if netlogon is not None:
        facts["vulnerablenetlogonsecuritydescriptor"] = netlogon.get("value")
    return facts


def enterprise_ca_facts(record: dict[str, Any]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    registry = record.get("caregistrydata")
    registry = registry if isinstance(registry, dict) else {}
    restrictions = collected(registry.get("enrollmentagentrestrictions"))
    if restrictions is not None:
        facts["hasenrollmentagentrestrictions"] = bool(restrictions.get("restrictions"))
    for key in ("isuserspecifiessanenabled", "roleseparationenabled"):
        flag = collected(registry.get(key))
        if flag is not None and isinstance(flag.get("value"), bool):
            facts[key] = flag["value"]
    http: list[str] = []
    https: list[str] = []
    any_collected = False
    for endpoint in record.get("httpenrollmentendpoints") or []:
        if collected(endpoint) is None:
            continue
        any_collected = True
        result = endpoint.get("result")
        result = result if isinstance(result, dict) else {}
        url = result.get("url")
        if not isinstance(url, str):
            continue
        if result.get("adcswebenrollmenthttp") is True:
            http.append(url)
        # HTTPS with extended protection for authentication (EPA) cannot be relayed to.
        if (
            result.get("adcswebenrollmenthttps") is True
            and result.get("adcswebenrollmentepa") is not True
        ):
            https.append(url)
    if http:
        facts["httpenrollmentendpoints"] = http
    if https:
        facts["httpsenrollmentendpoints"] = https
    if http or https or any_collected:
        facts["hasvulnerableendpoint"] = bool(http or https)
    return facts
