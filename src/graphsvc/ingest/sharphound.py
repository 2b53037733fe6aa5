"""SharpHound output (JSON versions 3 to 6): one object type per document, `meta.type` says which.

Keys are matched case-insensitively (producers disagree on case). Edges made: MemberOf (group
members, primary groups, well-known links), ExecuteDCOM (members of a computer's local group
with RID 562, the legacy DcomUsers block, GPO-set DCOM users), Contains, GPLink, HasSession.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable
from typing import Any

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
DCOM_RID = "-562"


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


def domain_of(record: dict[str, Any], properties: dict[str, Any], oid: str) -> str | None:
    sid = properties.get("domainsid") or record.get("domainsid")
    if isinstance(sid, str) and sid:
        return sid.upper()
    match = DOMAIN_SID.fullmatch(oid)
    return match.group(1) if match else None


def dcom_members(record: dict[str, Any]) -> list[tuple[str, str]]:
    """Members of the computer's Distributed COM Users group, current and legacy layouts."""
    members: list[tuple[str, str]] = []
    for group in record.get("localgroups") or []:
        if (
            isinstance(group, dict)
            and group.get("collected")
            and str(group.get("objectidentifier", "")).endswith(DCOM_RID)
        ):
            members += principals(group.get("results"))
    legacy = record.get("dcomusers")
    if isinstance(legacy, dict) and legacy.get("collected"):
        members += principals(legacy.get("results"))
    elif isinstance(legacy, list):  # JSON v3: a list of {MemberId, MemberType}
        members += principals(legacy)
    return members


def session_pairs(record: dict[str, Any]) -> Iterable[tuple[str, str]]:
    for key in ("sessions", "privilegedsessions", "registrysessions"):
        block = record.get(key)
        results = block.get("results") if isinstance(block, dict) else block
        for s in results if isinstance(results, list) else []:
            if isinstance(s, dict) and s.get("computersid") and s.get("usersid"):
                yield str(s["computersid"]).upper(), str(s["usersid"]).upper()


async def ingest_objects(
    meta_type: str, records: AsyncIterator[tuple[int, Any]], source: str, writer: GraphWriter
) -> None:
    label = LABELS[meta_type]
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
        await writer.node(
            NodeRecord(
                oid,
                name if isinstance(name, str) and name else oid,
                [label, "Base"],
                properties,
                env,
            )
        )
        for edge in object_edges(label, oid, record, properties, env):
            await writer.edge(edge)
        if label == "Domain" and isinstance(name, str) and name:
            await well_known_groups(oid, name.upper(), writer)


def object_edges(
    label: str, oid: str, record: dict[str, Any], properties: dict[str, Any], env: str | None
) -> Iterable[EdgeRecord]:
    parent = principal(record.get("containedby"))
    if parent:
        yield EdgeRecord(parent[0], oid, "Contains", env, parent[1], label)
    for child, kind in principals(record.get("childobjects")):
        yield EdgeRecord(oid, child, "Contains", env, label, kind)
    for member, kind in principals(record.get("members")):
        yield EdgeRecord(member, oid, "MemberOf", env, kind, "Group")
    primary = record.get("primarygroupsid")
    if isinstance(primary, str) and primary:
        yield EdgeRecord(
            oid, primary.upper(), "MemberOf", env, label, "Group", {"isprimarygroup": True}
        )
    if label == "Computer":
        for member, kind in dcom_members(record):
            yield EdgeRecord(member, oid, "ExecuteDCOM", env, kind, "Computer")
        for computer, user in session_pairs(record):
            yield EdgeRecord(computer, user, "HasSession", env, "Computer", "User")
    gpo_changes = record.get("gpochanges")
    if isinstance(gpo_changes, dict):
        affected = principals(gpo_changes.get("affectedcomputers"))
        for member, kind in principals(gpo_changes.get("dcomusers")):
            for computer, _ in affected:
                yield EdgeRecord(
                    member, computer, "ExecuteDCOM", env, kind, "Computer", {"fromgpo": True}
                )
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
            )
    if label == "Domain" and isinstance(properties.get("name"), str):
        yield from well_known_links(oid, properties["name"].upper())


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
    meta_type: str, records: AsyncIterator[tuple[int, Any]], source: str, writer: GraphWriter
) -> None:
    if meta_type in LABELS:
        await ingest_objects(meta_type, records, source, writer)
    elif meta_type == "sessions":
        await ingest_sessions(records, source, writer)
    elif meta_type == "deleted":
        await ingest_deleted(records, source, writer)
    # IGNORED_TYPES: accepted, nothing kept
