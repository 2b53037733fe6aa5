"""SharpHound output (JSON versions 3 to 6): one object type per document, `meta.type` says which.

Keys are matched case-insensitively (producers disagree on case). Every relationship the
collector reports becomes an edge under the reference server's kind names: ACEs (kind =
the right), group membership and primary groups, containment, GPO links, sessions,
delegation, SID history, SPN targets, trusts, DCs, unconstrained delegation, the ADCS links,
and a computer's local groups as the reference keeps them (ADLocalGroup nodes,
LocalToComputer and MemberOfLocalGroup: from the computer's groups, the legacy v3/v4 blocks
and GPO changes; a domain controller's are the domain's BUILTIN groups, one node shared by
its DCs). What is derived from the graph (AdminTo, CanRDP, ExecuteDCOM and CanPSRemote from
the local groups, DCSync...) is the analysis's, over the whole graph (graphsvc.analysis).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from graphsvc.ingest.facts import collected_facts
from graphsvc.ingest.records import EdgeRecord, IngestError, NodeRecord, lower_keys
from graphsvc.ingest.writer import GraphWriter

LABELS = {
    "users": "User",
    "computers": "Computer",
    "groups": "Group",
    "domains": "Domain",
    "ous": "OU",
    "gpos": "GPO",
    "containers": "Container",
    "aiacas": "AIACA",
    "rootcas": "RootCA",
    "enterprisecas": "EnterpriseCA",
    "ntauthstores": "NTAuthStore",
    "certtemplates": "CertTemplate",
    "issuancepolicies": "IssuancePolicy",
}
# Accepted by the reference server but carrying nothing this service keeps.
IGNORED_TYPES = {"localgroups"}
TYPES = sorted([*LABELS, "sessions", "deleted", *IGNORED_TYPES])
# SharpHound ObjectType -> graph kind; anything else (LocalGroup, LocalUser, Base) is Base.
OBJECT_KINDS = {v.lower(): v for v in LABELS.values()} | {"base": "Base"}
DOMAIN_SID = re.compile(r"(S-1-5-21-\d+-\d+-\d+)-\d+")

# The owner and WriteOwner holders are stored as OwnsRaw and WriteOwnerRaw (not traversable),
# which the analysis makes Owns and WriteOwner where the domain's dSHeuristics allow
# (analysis/owners.py), as the reference does; or, where the OWNER RIGHTS principal's ACEs
# limit what an owner gets, as OwnsLimitedRights and WriteOwnerLimitedRights (`owner_edges`).
OWNER_KINDS = {"Owns": "Owns", "OwnsRaw": "Owns", "Owner": "Owns"}  # "Owner": JSON v3's
WRITE_OWNER_KINDS = {"WriteOwner", "WriteOwnerRaw"}
OWNER_RIGHTS_SID = "S-1-3-4"  # the OWNER RIGHTS principal (a domain-prefixed id ends with it)
# JSON v3 ACEs name a right and an AceType (the extended right or property set); BloodHound 3
# read them into these kinds. Later versions name the edge in RightName alone.
V3_ACE_TYPES = {
    "All": "AllExtendedRights",
    "User-Force-Change-Password": "ForceChangePassword",
    "AddMember": "AddMember",
    "AllowedToAct": "AddAllowedToAct",
}
V3_RIGHTS = {
    "GenericAll",
    "WriteDacl",
    "WriteOwner",
    "GenericWrite",
    "ReadLAPSPassword",
    "ReadGMSAPassword",
}
ACE_KEYS = {"PrincipalSID", "PrincipalType", "RightName", "IsInherited"}  # as SharpHound writes
ACL_EXPLICIT = {"isacl": True, "isinherited": False}
ACL_INHERITED = {"isacl": True, "isinherited": True}
# The local groups whose direct members the analysis gives an edge to the computer, by RID
# (analysis/local_groups.py); each is a group of facts of its own, named by that edge, and
# any other local group by its RID.
LOCAL_GROUP_EDGE_BY_RID = {
    "544": "AdminTo",
    "555": "CanRDP",
    "562": "ExecuteDCOM",
    "580": "CanPSRemote",
}
# The same groups as computer blocks (JSON v3/v4) and as GPOChanges lists, by their RID:
# the group is then named by the computer's object id and the RID, as the reference names
# the groups GPOs set.
GROUP_BLOCK_RIDS = {
    "localadmins": "544",
    "remotedesktopusers": "555",
    "dcomusers": "562",
    "psremoteusers": "580",
}
# What SharpHound names a domain controller's BUILTIN groups: they stay named by their id.
UNNAMED_LOCAL_GROUP = "IGNOREME"
BUILTIN_GROUP = re.compile(r".+-S-1-5-32-\d+")
USER_RIGHT_KINDS = {
    "SeRemoteInteractiveLogonRight": "RemoteInteractiveLogonRight",
    "SeBackupPrivilege": "BackupPrivilege",
    "SeRestorePrivilege": "RestorePrivilege",
}
# Older producers wrote trust directions and types as numbers.
TRUST_DIRECTIONS = {0: "Disabled", 1: "Inbound", 2: "Outbound", 3: "Bidirectional"}
TRUST_TYPES = {0: "ParentChild", 1: "CrossLink", 2: "Forest", 3: "External", 4: "Unknown"}
SAME_FOREST_TYPES = {"ParentChild", "TreeRoot", "CrossLink"}
# Stale facts. A record's relationships come in groups of facts, each replaced whole when a
# newer collection states the group for the same object (writer.py, migration 0021). A
# record states a group when it holds one of the group's keys and the document's
# `meta.methods` has the bit of the method that collects it (SharpHound's CollectionMethod
# flags; a document without methods, JSON v3 and v4, collected what it holds): a method not
# run leaves empty lists, which say "not collected", not "none". Local groups and user
# rights say it themselves (`Collected`); sessions are not replaced but accumulate.
METHOD_BITS = {
    "Group": 0,
    "GPOLocalGroup": 2,
    "Trusts": 5,
    "ACL": 6,
    "Container": 7,
    "ObjectProps": 9,
    "SPNTargets": 13,
    "CertServices": 18,
}
FACT_GROUPS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "aces": (("aces",), "ACL"),
    "members": (("members",), "Group"),
    "primarygroup": (("primarygroupsid",), None),
    "containment": (("containedby", "childobjects"), "Container"),
    "links": (("links",), "Container"),
    "delegation": (
        ("allowedtodelegate", "allowedtoact", "hassidhistory", "dumpsmsapassword"),
        "ObjectProps",
    ),
    "spntargets": (("spntargets",), "SPNTargets"),
    "gpochanges": (("gpochanges",), "GPOLocalGroup"),
    "trusts": (("trusts",), "Trusts"),
}
ADCS_KEYS = {
    "EnterpriseCA": ("enabledcerttemplates", "hostingcomputer"),
    "RootCA": ("domainsid",),
    "NTAuthStore": ("domainsid",),
    "IssuancePolicy": ("grouplink",),
}
# A record of only these keys is a stub (a repeated BUILTIN group...): its properties add
# to the stored ones and never replace them.
STUB_KEYS = {"objectidentifier", "properties", "objecttype"}


def principal(ref: Any) -> tuple[str, str] | None:
    """(object id, kind) of a TypedPrincipal or of a v3 GenericMember."""
    if not isinstance(ref, dict):
        return None
    oid = ref.get("objectidentifier") or ref.get("memberid")
    if not isinstance(oid, str) or not oid or oid.upper().startswith("DN="):
        return None  # unresolved distinguished names are not objects yet
    kind = str(ref.get("objecttype") or ref.get("membertype") or "Base").lower()
    return oid.upper(), OBJECT_KINDS.get(kind, "Base")


def principals(refs: Any) -> list[tuple[str, str]]:
    if not isinstance(refs, list):
        return []
    return [p for p in (principal(r) for r in refs) if p is not None]


def to_upper_id(value: Any) -> str | None:
    return value.upper() if isinstance(value, str) and value else None


def domain_of(record: dict[str, Any], properties: dict[str, Any], oid: str) -> str | None:
    sid = properties.get("domainsid") or record.get("domainsid")
    if isinstance(sid, str) and sid:
        return sid.upper()
    match = DOMAIN_SID.fullmatch(oid)
    return match.group(1) if match else None


def find_field(record: dict[str, Any], properties: dict[str, Any], key: str) -> Any:
    """A value SharpHound moved out of Properties in later versions: the bag's, else the
    record's (as the reference reads unconstraineddelegation and domainsid)."""
    return properties[key] if key in properties else record.get(key)


def session_pairs(record: dict[str, Any]) -> Iterable[tuple[str, str]]:
    for key in ("sessions", "privilegedsessions", "registrysessions"):
        block = record.get(key)
        results = block.get("results") if isinstance(block, dict) else block
        for s in results if isinstance(results, list) else []:
            if isinstance(s, dict) and s.get("computersid") and s.get("usersid"):
                yield str(s["computersid"]).upper(), str(s["usersid"]).upper()


def collects(methods: int | None, method: str | None) -> bool:
    return methods is None or method is None or bool(methods >> METHOD_BITS[method] & 1)


LocalGroup = tuple[str, str | None, list[tuple[str, str]]]  # collected_local_groups's


def stated_facts(
    label: str, record: dict[str, Any], methods: int | None, local_groups: list[LocalGroup]
) -> list[str]:
    """The groups of facts a record states (see FACT_GROUPS); `local_groups`: the
    collected_local_groups of a computer's record."""
    facts = [
        fact
        for fact, (keys, method) in FACT_GROUPS.items()
        if collects(methods, method) and any(key in record for key in keys)
    ]
    properties = record.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    if any(k in record or k in properties for k in ("isdc", "unconstraineddelegation")):
        facts.append("roles")
    adcs_keys = ADCS_KEYS.get(label, ())
    if collects(methods, "CertServices") and any(key in record for key in adcs_keys):
        facts.append("adcs")
    registry = record.get("caregistrydata")
    security = registry.get("casecurity") if isinstance(registry, dict) else None
    if label == "EnterpriseCA" and isinstance(security, dict) and security.get("collected"):
        facts.append("casecurity")
    for group_id, _, _ in local_groups:
        facts.append(local_group_fact(group_id))
    for right in record.get("userrights") or []:
        if isinstance(right, dict) and right.get("collected"):
            granted = USER_RIGHT_KINDS.get(str(right.get("privilege")))
            if granted is not None:
                facts.append(f"userright:{granted}")
    return facts


async def ingest_objects(
    meta_type: str,
    records: AsyncIterator[tuple[int, Any]],
    source: str,
    writer: GraphWriter,
    methods: int | None,
) -> None:
    label = LABELS[meta_type]
    reads_properties = collects(methods, "ObjectProps")
    async for i, raw in records:
        where = f"data[{i}]"
        record = lower_keys(raw)
        if not isinstance(record, dict):
            raise IngestError(source, "must be an object", where)
        oid = record.get("objectidentifier")
        if not isinstance(oid, str) or not oid:
            raise IngestError(source, "'ObjectIdentifier' must be a non-empty string", where)
        oid = oid.upper()
        properties = record.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        env = oid if label == "Domain" else domain_of(record, properties, oid)
        name = properties.get("name")
        # Read once: the facts stated, the stubs' names and the edges all need them.
        local_groups = list(collected_local_groups(oid, record)) if label == "Computer" else []
        await writer.node(
            NodeRecord(
                oid,
                name if isinstance(name, str) and name else oid,
                [label, "Base"],
                {**properties, **collected_facts(label, record, properties)},
                env,
                replaces_properties=reads_properties and not record.keys() <= STUB_KEYS,
            ),
            stated_facts(label, record, methods, local_groups)
            if writer.older_collections
            else None,
        )
        await writer.add_edges(object_edges(label, oid, record, properties, env, local_groups))
        for group_id, group_name, _ in local_groups:
            if group_name:
                writer.name_stub(group_id, group_name)
        if label == "Domain":
            for target, target_name in list_trust_targets(record):
                writer.name_stub(target, target_name)
            if isinstance(name, str) and name:
                await well_known_groups(oid, name.upper(), writer)


def stamped(fact: str, owner: str, edges: Iterable[EdgeRecord]) -> Iterator[EdgeRecord]:
    """The edges of one group of facts of the owner's record."""
    for edge in edges:
        edge.fact = fact
        edge.owner = owner
        yield edge


def object_edges(
    label: str,
    oid: str,
    record: dict[str, Any],
    properties: dict[str, Any],
    env: str | None,
    local_groups: list[LocalGroup],
) -> Iterable[EdgeRecord]:
    yield from stamped("aces", oid, read_aces(label, oid, record.get("aces"), env, properties))
    if label == "EnterpriseCA":
        yield from stamped("casecurity", oid, read_ca_security(oid, record, env))
    yield from stamped("containment", oid, read_containment(label, oid, record, env))
    for member, kind in principals(record.get("members")):
        yield EdgeRecord(member, oid, "MemberOf", env, kind, "Group", fact="members", owner=oid)
    primary = record.get("primarygroupsid")
    if isinstance(primary, str) and primary:
        yield EdgeRecord(
            oid,
            primary.upper(),
            "MemberOf",
            env,
            label,
            "Group",
            {"isprimarygroup": True},
            fact="primarygroup",
            owner=oid,
        )
    yield from stamped("delegation", oid, read_delegation(label, oid, record, env))
    yield from stamped("spntargets", oid, read_spn_targets(label, oid, record, env))
    if label == "Computer":
        yield from read_local_groups(oid, record, env, local_groups)
        for computer, user in session_pairs(record):
            yield EdgeRecord(computer, user, "HasSession", env, "Computer", "User")
    if label in ("User", "Computer"):
        yield from stamped("roles", oid, read_domain_roles(label, oid, record, properties, env))
    yield from stamped("gpochanges", oid, read_gpo_changes(record, env))
    for link in record.get("links") or []:
        if isinstance(link, dict) and isinstance(link.get("guid"), str):
            yield EdgeRecord(
                link["guid"].upper(),
                oid,
                "GPLink",
                env,
                "GPO",
                label,
                {"enforced": bool(link.get("isenforced"))},
                fact="links",
                owner=oid,
            )
    if label == "Domain":
        yield from stamped("trusts", oid, read_trusts(oid, record, env))
        if isinstance(properties.get("name"), str):
            yield from well_known_links(oid, properties["name"].upper())
    yield from stamped("adcs", oid, read_adcs_links(label, oid, record, env))


def read_containment(
    label: str, oid: str, record: dict[str, Any], env: str | None
) -> Iterable[EdgeRecord]:
    parent = principal(record.get("containedby"))
    if parent:
        yield EdgeRecord(parent[0], oid, "Contains", env, parent[1], label)
    for child, kind in principals(record.get("childobjects")):
        yield EdgeRecord(oid, child, "Contains", env, label, kind)


def read_delegation(
    label: str, oid: str, record: dict[str, Any], env: str | None
) -> Iterable[EdgeRecord]:
    for target, kind in principals(record.get("allowedtodelegate")):
        yield EdgeRecord(oid, target, "AllowedToDelegate", env, label, kind)
    for actor, kind in principals(record.get("allowedtoact")):
        yield EdgeRecord(actor, oid, "AllowedToAct", env, kind, label)
    for target, kind in principals(record.get("hassidhistory")):
        yield EdgeRecord(oid, target, "HasSIDHistory", env, label, kind)
    for target, kind in principals(record.get("dumpsmsapassword")):
        yield EdgeRecord(oid, target, "DumpSMSAPassword", env, label, kind)


def read_ca_security(oid: str, record: dict[str, Any], env: str | None) -> Iterable[EdgeRecord]:
    """An enterprise CA's CA security entries are ACEs too (less its owner and local groups,
    as the reference reads them)."""
    registry = record.get("caregistrydata")
    security = registry.get("casecurity") if isinstance(registry, dict) else None
    if not isinstance(security, dict) or not security.get("collected"):
        return ()
    return read_aces(
        "EnterpriseCA",
        oid,
        [
            ace
            for ace in security.get("data") or []
            if isinstance(ace, dict)
            and ace.get("rightname") != "Owns"
            and str(ace.get("principaltype")).lower() != "localgroup"
        ],
        env,
    )


def read_aces(
    label: str,
    oid: str,
    aces: Any,
    env: str | None,
    properties: dict[str, Any] | None = None,
) -> Iterable[EdgeRecord]:
    """One edge per ACE, named by its right, from the principal to the object; a right this
    version does not know keeps its own name. The owner's, WriteOwner's and OWNER RIGHTS'
    ACEs give the edges `owner_edges` says, from the record's `properties`."""
    if not isinstance(aces, list):
        return
    owner: tuple[str, str] | None = None
    write_owners: list[tuple[str, str, bool]] = []
    owner_rights: list[tuple[str, bool]] = []
    for ace in aces:
        if type(ace) is not dict:
            continue
        if ace.keys() >= ACE_KEYS and "AceType" not in ace:
            sid, right, ace_type = ace["PrincipalSID"], ace["RightName"], None
            principal_type, inherited = ace["PrincipalType"], ace["IsInherited"]
        else:  # JSON v3, or another producer's key case (records.RAW_KEYS keeps ACEs as is)
            lowered = {str(k).lower(): v for k, v in ace.items()}
            sid, right, ace_type = (
                lowered.get("principalsid"),
                lowered.get("rightname"),
                lowered.get("acetype"),
            )
            principal_type, inherited = lowered.get("principaltype"), lowered.get("isinherited")
        if type(sid) is not str or not sid or type(right) is not str or not right:
            continue
        sid = sid.upper()
        if sid == oid:  # an object's rights over itself lead nowhere (the reference skips them)
            continue
        start_kind = OBJECT_KINDS.get(str(principal_type).lower(), "Base")
        kinds = map_ace_kinds(right, ace_type)
        if sid.endswith(OWNER_RIGHTS_SID):
            owner_rights.extend((kind, bool(inherited)) for kind in kinds)
            continue
        properties_of_ace = ACL_INHERITED if inherited else ACL_EXPLICIT
        for kind in kinds:
            if kind in OWNER_KINDS:
                owner = owner or (sid, start_kind)
            elif kind in WRITE_OWNER_KINDS:
                write_owners.append((sid, start_kind, bool(inherited)))
            else:
                yield EdgeRecord(sid, oid, kind, env, start_kind, label, properties_of_ace)
    yield from owner_edges(label, oid, env, properties or {}, owner, write_owners, owner_rights)


def owner_edges(
    label: str,
    oid: str,
    env: str | None,
    properties: dict[str, Any],
    owner: tuple[str, str] | None,
    write_owners: list[tuple[str, str, bool]],
    owner_rights: list[tuple[str, bool]],
) -> Iterable[EdgeRecord]:
    """What the owner and the WriteOwner holders get, as the reference's ingest decides it.
    ACEs granted to OWNER RIGHTS replace an owner's implicit rights with theirs: the owner
    gets OwnsLimitedRights (with those rights), and a WriteOwner holder, who would become
    the owner, gets WriteOwnerLimitedRights with the inherited ones (an explicit OWNER
    RIGHTS ACE is dropped when the owner changes). Without such ACEs the collector's
    `doesanyacegrantownerrights` and `doesanyinheritedacegrantownerrights` say whether
    non-abusable ones limit them; older collectors say nothing, and OwnsRaw and
    WriteOwnerRaw are kept."""
    limited = sorted({kind for kind, _ in owner_rights})
    limited_inherited = sorted({kind for kind, inherited in owner_rights if inherited})
    any_grant = properties.get("doesanyacegrantownerrights") is True
    inherited_grant = properties.get("doesanyinheritedacegrantownerrights") is True
    if limited:
        if owner is not None:
            yield EdgeRecord(
                owner[0],
                oid,
                "OwnsLimitedRights",
                env,
                owner[1],
                label,
                {"isacl": True, "isinherited": False, "privileges": limited},
            )
        for sid, kind, inherited in write_owners:
            if limited_inherited:
                yield EdgeRecord(
                    sid,
                    oid,
                    "WriteOwnerLimitedRights",
                    env,
                    kind,
                    label,
                    {"isacl": True, "isinherited": inherited, "privileges": limited_inherited},
                )
            elif not inherited_grant:
                yield write_owner_raw(sid, kind, inherited, oid, label, env)
        return
    if any_grant and inherited_grant:
        return
    if not any_grant and owner is not None:
        yield EdgeRecord(owner[0], oid, "OwnsRaw", env, owner[1], label, ACL_EXPLICIT)
    for sid, kind, inherited in write_owners:
        yield write_owner_raw(sid, kind, inherited, oid, label, env)


def write_owner_raw(
    sid: str, kind: str, inherited: bool, oid: str, label: str, env: str | None
) -> EdgeRecord:
    properties = ACL_INHERITED if inherited else ACL_EXPLICIT
    return EdgeRecord(sid, oid, "WriteOwnerRaw", env, kind, label, properties)


def map_ace_kinds(right: str, ace_type: Any) -> list[str]:
    """The edges one ACE gives: its RightName, or for a JSON v3 ACE (with an AceType) what
    BloodHound 3 read from the pair; a pair it did not read keeps the right's name."""
    if ace_type is None:
        return [right]
    kinds = []
    if ace_type in V3_ACE_TYPES:
        kinds.append(V3_ACE_TYPES[ace_type])
    elif right == "ExtendedRight" and isinstance(ace_type, str) and ace_type:
        kinds.append(ace_type)  # GetChanges, GetChangesAll
    if right in V3_RIGHTS:
        kinds.append(right)
    elif right == "Owner":
        kinds.append("Owns")
    return kinds or [right]


def read_spn_targets(
    label: str, oid: str, record: dict[str, Any], env: str | None
) -> Iterable[EdgeRecord]:
    """SPNTargets (SpnTargets in some files): the service's name is the kind (SQLAdmin)."""
    for target in record.get("spntargets") or []:
        if not isinstance(target, dict):
            continue
        computer, service = to_upper_id(target.get("computersid")), target.get("service")
        if computer and isinstance(service, str) and service:
            properties = {"isacl": True, "port": target.get("port")}
            yield EdgeRecord(oid, computer, service, env, label, "Computer", properties)


def collected_local_groups(oid: Any, record: dict[str, Any]) -> Iterator[LocalGroup]:
    """(object id, name, direct members) of each local group a computer's record collected:
    its `LocalGroups` (JSON v5 on), else the legacy v3/v4 blocks, named by the computer's id
    and the group's RID."""
    for group in record.get("localgroups") or []:
        if not isinstance(group, dict) or not group.get("collected"):
            continue
        group_id = to_upper_id(group.get("objectidentifier"))
        if group_id is None:
            continue
        name = group.get("name")
        if not isinstance(name, str) or not name or name == UNNAMED_LOCAL_GROUP:
            name = None
        yield group_id, name and name.upper(), principals(group.get("results"))
    if not isinstance(oid, str):
        return
    for key, rid in GROUP_BLOCK_RIDS.items():
        block = record.get(key)
        if isinstance(block, dict) and block.get("collected"):
            members = principals(block.get("results"))
        elif isinstance(block, list):  # JSON v3: a list of {MemberId, MemberType}
            members = principals(block)
        else:
            continue
        yield f"{oid.upper()}-{rid}", None, members


def local_group_fact(group_id: str) -> str:
    rid = group_id.rsplit("-", 1)[-1]
    return f"localgroup:{LOCAL_GROUP_EDGE_BY_RID.get(rid, rid)}"


def local_group_edges(
    group_id: str, computer: str, members: list[tuple[str, str]], env: str | None
) -> Iterator[EdgeRecord]:
    """A local group with members, as the reference keeps it: LocalToComputer to its
    computer, each member MemberOfLocalGroup of it (a group without members is left out, as
    the reference leaves it)."""
    if not members:
        return
    # A DC's BUILTIN groups are the domain's groups (collected as Group); any other is a
    # node of its own, a stub the computer names.
    kind = "Group" if BUILTIN_GROUP.fullmatch(group_id) else "ADLocalGroup"
    yield EdgeRecord(group_id, computer, "LocalToComputer", env, kind, "Computer")
    for member, member_kind in members:
        yield EdgeRecord(member, group_id, "MemberOfLocalGroup", env, member_kind, kind)


def read_local_groups(
    oid: str, record: dict[str, Any], env: str | None, local_groups: list[LocalGroup]
) -> Iterable[EdgeRecord]:
    """The computer's local groups (its collected_local_groups), each a group of facts of
    the computer's (the analysis makes AdminTo, CanRDP, ExecuteDCOM and CanPSRemote of
    them), and the user rights granted on it."""
    for group_id, _, members in local_groups:
        fact = local_group_fact(group_id)
        yield from stamped(fact, oid, local_group_edges(group_id, oid, members, env))
    for right in record.get("userrights") or []:
        if not isinstance(right, dict) or not right.get("collected"):
            continue
        granted = USER_RIGHT_KINDS.get(str(right.get("privilege")))
        if granted is None:
            continue
        for grantee, grantee_kind in principals(right.get("results")):
            yield EdgeRecord(
                grantee,
                oid,
                granted,
                env,
                grantee_kind,
                "Computer",
                fact=f"userright:{granted}",
                owner=oid,
            )


def read_gpo_changes(record: dict[str, Any], env: str | None) -> Iterable[EdgeRecord]:
    """Domains and OUs: the local group members their GPOs set on the computers they apply
    to, as local groups named by each computer's id and the group's RID."""
    changes = record.get("gpochanges")
    if not isinstance(changes, dict):
        return
    affected = principals(changes.get("affectedcomputers"))
    for key, rid in GROUP_BLOCK_RIDS.items():
        members = principals(changes.get(key))
        for computer, _ in affected:
            yield from local_group_edges(f"{computer}-{rid}", computer, members, env)


def read_domain_roles(
    label: str, oid: str, record: dict[str, Any], properties: dict[str, Any], env: str | None
) -> Iterable[EdgeRecord]:
    """DCFor from a domain controller; CoerceToTGT from any other account trusted for
    unconstrained delegation. IsDC is top-level since JSON v6, in Properties before."""
    domain = to_upper_id(find_field(record, properties, "domainsid"))
    if domain is None:
        return
    is_dc = record.get("isdc") if "isdc" in record else properties.get("isdc")
    if label == "Computer" and is_dc is True:
        yield EdgeRecord(oid, domain, "DCFor", env, "Computer", "Domain")
        return
    if find_field(record, properties, "unconstraineddelegation") is True:
        yield EdgeRecord(oid, domain, "CoerceToTGT", env, label, "Domain")


def list_trust_targets(record: dict[str, Any]) -> Iterable[tuple[str, str]]:
    """The trusted domains' ids and names: a domain no file collected is named by its trust."""
    for trust in record.get("trusts") or []:
        if isinstance(trust, dict):
            target, name = (
                to_upper_id(trust.get("targetdomainsid")),
                to_upper_id(trust.get("targetdomainname")),
            )
            if target and name:
                yield target, name


def decode_enum(value: Any, names: dict[int, str]) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return names.get(value, value)
    return value


def read_trusts(oid: str, record: dict[str, Any], env: str | None) -> Iterable[EdgeRecord]:
    """A trust edge points from the trusting to the trusted domain: an inbound trust (the
    target trusts this domain) gives target -> domain, an outbound one domain -> target.
    Across forests, a trust without SID filtering also gives SpoofSIDHistory and one
    allowing TGT delegation AbuseTGTDelegation, both target -> domain."""
    for trust in record.get("trusts") or []:
        if not isinstance(trust, dict):
            continue
        target = to_upper_id(trust.get("targetdomainsid"))
        if target is None:
            continue
        direction = decode_enum(trust.get("trustdirection"), TRUST_DIRECTIONS)
        trust_type = decode_enum(trust.get("trusttype"), TRUST_TYPES)
        kind = "SameForestTrust" if trust_type in SAME_FOREST_TYPES else "CrossForestTrust"
        attributes = parse_trust_attributes(trust.get("trustattributes"))
        common = {"trusttype": trust_type, "transitive": trust.get("istransitive")}
        if direction in ("Inbound", "Bidirectional"):
            inbound = {**common, "trustattributesinbound": attributes}
            if attributes is not None:  # collected with the attributes, in later versions
                inbound["tgtdelegation"] = trust.get("tgtdelegationenabled")
            yield EdgeRecord(target, oid, kind, env, "Domain", "Domain", inbound)
            if kind == "CrossForestTrust" and trust.get("tgtdelegationenabled") is True:
                yield EdgeRecord(
                    target,
                    oid,
                    "AbuseTGTDelegation",
                    env,
                    "Domain",
                    "Domain",
                    {"trusttype": trust_type},
                )
        if direction in ("Outbound", "Bidirectional"):
            sid_filtering = trust.get("sidfilteringenabled")
            outbound = {
                **common,
                "spoofsidhistoryblocked": sid_filtering,
                "trustattributesoutbound": attributes,
            }
            yield EdgeRecord(oid, target, kind, env, "Domain", "Domain", outbound)
            if kind == "CrossForestTrust" and sid_filtering is not True:
                yield EdgeRecord(
                    target,
                    oid,
                    "SpoofSIDHistory",
                    env,
                    "Domain",
                    "Domain",
                    {"trusttype": trust_type},
                )


def parse_trust_attributes(value: Any) -> int | None:
    """TrustAttributes as a number (producers write it as a number or a numeric string)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def read_adcs_links(
    label: str, oid: str, record: dict[str, Any], env: str | None
) -> Iterable[EdgeRecord]:
    """The ADCS objects' direct links (the certificate-abuse analysis is not done here)."""
    if label == "EnterpriseCA":
        for template, _ in principals(record.get("enabledcerttemplates")):
            yield EdgeRecord(template, oid, "PublishedTo", env, "CertTemplate", label)
        host = to_upper_id(record.get("hostingcomputer"))
        if host:
            yield EdgeRecord(host, oid, "HostsCAService", env, "Computer", label)
    domain = to_upper_id(record.get("domainsid"))
    if label in ("RootCA", "NTAuthStore") and domain:
        kind = "RootCAFor" if label == "RootCA" else "NTAuthStoreFor"
        yield EdgeRecord(oid, domain, kind, env, label, "Domain")
    group = principal(record.get("grouplink"))
    if label == "IssuancePolicy" and group:
        yield EdgeRecord(oid, group[0], "OIDGroupLink", env, label, group[1])


def well_known_links(domain_sid: str, domain_name: str) -> Iterable[EdgeRecord]:
    """Domain Users and Domain Computers are Authenticated Users, who (with Guest) are Everyone."""
    authenticated, everyone = f"{domain_name}-S-1-5-11", f"{domain_name}-S-1-1-0"
    yield EdgeRecord(f"{domain_sid}-513", authenticated, "MemberOf", domain_sid, "Group", "Group")
    yield EdgeRecord(f"{domain_sid}-515", authenticated, "MemberOf", domain_sid, "Group", "Group")
    yield EdgeRecord(authenticated, everyone, "MemberOf", domain_sid, "Group", "Group")
    yield EdgeRecord(f"{domain_sid}-501", everyone, "MemberOf", domain_sid, "User", "Group")


async def well_known_groups(domain_sid: str, domain_name: str, writer: GraphWriter) -> None:
    for suffix, name in (("S-1-5-11", "AUTHENTICATED USERS"), ("S-1-1-0", "EVERYONE")):
        await writer.node(
            NodeRecord(
                f"{domain_name}-{suffix}",
                f"{name}@{domain_name}",
                ["Group", "Base"],
                {"domainsid": domain_sid},
                domain_sid,
            )
        )


async def ingest_sessions(
    records: AsyncIterator[tuple[int, Any]], source: str, writer: GraphWriter
) -> None:
    async for i, raw in records:
        record = lower_keys(raw)
        pairs = list(session_pairs({"sessions": [record]})) if isinstance(record, dict) else []
        if not pairs:
            raise IngestError(source, "a session needs 'ComputerSID' and 'UserSID'", f"data[{i}]")
        for computer, user in pairs:
            match = DOMAIN_SID.fullmatch(computer)
            await writer.edge(
                EdgeRecord(
                    computer,
                    user,
                    "HasSession",
                    match.group(1) if match else None,
                    "Computer",
                    "User",
                )
            )


async def ingest_deleted(
    records: AsyncIterator[tuple[int, Any]], source: str, writer: GraphWriter
) -> None:
    async for i, raw in records:
        if not isinstance(raw, str) or not raw:
            raise IngestError(source, "a deleted entry must be an object id string", f"data[{i}]")
        writer.delete(raw)


async def ingest(
    meta_type: str,
    records: AsyncIterator[tuple[int, Any]],
    source: str,
    writer: GraphWriter,
    methods: int | None = None,
) -> None:
    """`methods`: the document's `meta.methods`, if it says."""
    if meta_type in LABELS:
        await ingest_objects(meta_type, records, source, writer, methods)
    elif meta_type == "sessions":
        await ingest_sessions(records, source, writer)
    elif meta_type == "deleted":
        await ingest_deleted(records, source, writer)
    else:  # IGNORED_TYPES: accepted, counted, nothing kept
        async for _ in records:
            writer.skip(f"SharpHound {meta_type}")
