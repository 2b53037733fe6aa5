"""SharpHound input: the real collector fixtures, DCOM rights through nested groups and well-known
links, statistics checked against counts computed here from the raw files, and bad zips."""

from __future__ import annotations

import json
import re
import zipfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from graphsvc.demo.collectors import Domain, write_sharphound
from graphsvc.ingest.records import IngestError
from graphsvc.store import graph
from tests.conftest import FIXTURES, Env, ingest

CE = FIXTURES / "bloodhound-ce" / "fixtures"
SAMPLES = {
    "v6 folder": CE / "v6" / "ingest",
    "v5 computers": CE / "v5" / "ingest" / "computers.json",
    "adcs zip": CE / "v6" / "all" / "adcs.zip",
    "sample zip (3 domains, 3 collections)": FIXTURES / "bloodhound-docs" / "ad_sampledata.zip",
    "utf-8 bom": CE / "utf8bomjson.json",
}
TESTLAB = "S-1-5-21-3130019616-2776909439-2417379446"
WIN10 = f"{TESTLAB}-1104"
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


def fixture(name: str) -> Path:
    return SAMPLES[name]


# --- the expected graph, computed from the raw files without graphsvc's code ----------------


def raw_documents(path: Path) -> list[dict[str, Any]]:
    if path.is_dir():
        return [d for p in sorted(path.glob("*.json")) for d in raw_documents(p)]
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return [
                json.loads(z.read(n).decode("utf-8-sig"))
                for n in z.namelist()
                if n.endswith(".json")
            ]
    return [json.loads(path.read_bytes().decode("utf-8-sig"))]


def low(value: Any) -> Any:
    if isinstance(value, dict):
        return {k.lower(): low(v) for k, v in value.items()}
    return [low(v) for v in value] if isinstance(value, list) else value


def refs(items: Any) -> list[str]:
    found = []
    for item in items or []:
        oid = item.get("objectidentifier") or item.get("memberid")
        if oid and not oid.upper().startswith("DN="):
            found.append(oid.upper())
    return found


# The edge a local group's direct members get (Remote Desktop Users: see derive_can_rdp).
LOCAL_GROUP_RIGHTS = {"544": "AdminTo", "562": "ExecuteDCOM", "580": "CanPSRemote"}
# The legacy blocks and GPO changes name their group by the computer's id and this RID.
GROUP_BLOCKS = {
    "localadmins": "544",
    "remotedesktopusers": "555",
    "dcomusers": "562",
    "psremoteusers": "580",
}
PRIVILEGES = {
    "SeRemoteInteractiveLogonRight": "RemoteInteractiveLogonRight",
    "SeBackupPrivilege": "BackupPrivilege",
    "SeRestorePrivilege": "RestorePrivilege",
}
DIRECTIONS = {0: "Disabled", 1: "Inbound", 2: "Outbound", 3: "Bidirectional"}
TRUST_TYPES = {0: "ParentChild", 1: "CrossLink", 2: "Forest", 3: "External", 4: "Unknown"}


def cross_product(holder_sets: list[set[str]], members: dict[str, set[str]]) -> set[str]:
    """The reference's CalculateCrossProductNodeSets, as its documentation and code describe
    it, written here from that description (not from graphsvc's code)."""

    def below(starts: set[str]) -> set[str]:
        found: set[str] = set()
        todo = list(starts)
        while todo:
            for member in members.get(todo.pop(), set()) - found:
                found.add(member)
                todo.append(member)
        return found

    def special(oid: str) -> bool:
        return oid.endswith(("-S-1-5-11", "-S-1-1-0"))

    kept = [
        (holders, holders | below(holders))
        for holders in holder_sets
        if not any(special(p) for p in holders | below(holders))
    ]
    if not kept:
        return set().union(*holder_sets)
    if len(kept) == 1:
        return kept[0][0]
    check = set.intersection(*(unrolled for _, unrolled in kept[1:]))
    result = {p for p in kept[0][0] if p in check}
    reference: set[str] = set()
    for p in kept[0][0] - check:
        reference |= below({p})
    groups = sorted((g for g in reference if below({g})), key=lambda g: (len(below({g})), g))
    for group in groups:
        if group in reference:
            reference.discard(group)
            if group in check:
                result.add(group)
                reference ^= below({group})
    return result | (reference & check)


OWNER_KINDS = {
    "Owns": ("OwnsRaw", "Owns"),
    "OwnsRaw": ("OwnsRaw", "Owns"),
    "WriteOwner": ("WriteOwnerRaw", "WriteOwner"),
    "WriteOwnerRaw": ("WriteOwnerRaw", "WriteOwner"),
}


# The kinds `analysed_edges` reads from the store for the oracle.
ESCALATION_KINDS = (
    "EnrollOnBehalfOf", "ADCSESC1", "ADCSESC3", "ADCSESC4", "ADCSESC6a", "ADCSESC6b",
    "ADCSESC9a", "ADCSESC9b", "ADCSESC10a", "ADCSESC10b", "ADCSESC13", "ADCSESC16",
    "CoerceAndRelayNTLMToSMB", "CoerceAndRelayNTLMToLDAP", "CoerceAndRelayNTLMToLDAPS",
    "CoerceAndRelayNTLMToADCS",
)  # fmt: skip


def analysed_edges(env: Env) -> dict[tuple[str, str, str], str | None]:
    """The escalation and relay relationships in the store, with their environments."""

    async def read(conn):  # type: ignore[no-untyped-def]
        return await conn.fetch(
            "SELECT s.object_id, k.name, e.object_id, x.environment_id FROM edges x "
            "JOIN kinds k ON k.id = x.kind_id JOIN nodes s ON s.id = x.start_id "
            "JOIN nodes e ON e.id = x.end_id WHERE x.derived"
        )

    return {
        (r[0], r[1], r[2]): r[3] for r in env.run_in_transaction(read) if r[1] in ESCALATION_KINDS
    }


class Expected:
    """Distinct nodes per kind and distinct edges per kind of one run, by the documented rules:
    a node or edge belongs to a domain (its domainsid, else the SID's domain part, else for an
    edge its end's then its start's domain), and only domains stored as Domain nodes count:
    those with a domain record, and those a record names as a domain (a DC's, a trusted
    one...), which become Domain stubs. Every relationship kind the README lists is worked
    out here from the raw records."""

    def __init__(
        self,
        documents: list[dict[str, Any]],
        analysed: dict[tuple[str, str, str], str | None] | None = None,
    ) -> None:
        self.nodes: dict[str, tuple[str, str | None]] = {}
        self.edges: dict[tuple[str, str, str], str | None] = {}
        self.deleted: set[str] = set()
        self.domains: set[str] = set()
        self.rights: dict[str, dict[str, set[str]]] = {}  # domain -> right -> holders
        self.laps: dict[str, set[str]] = {}  # domain -> computers with LAPS
        self.acl: set[tuple[str, str, str]] = set()  # the edges of ACEs and SPN targets
        self.props: dict[str, dict[str, Any]] = {}  # each record's properties, lower-cased
        for document in documents:
            kind = document["meta"]["type"]
            for raw in document["data"]:
                self.read(kind, raw)
        self.derive()
        # The certificate-services escalations and NTLM relay, as the analysis made them: its
        # rules are checked on the reference's harnesses (tests/test_escalations.py,
        # tests/test_relay.py), and a check of counts or paths takes them as they are.
        self.edges.update(analysed or {})
        for oid in self.deleted:
            self.nodes.pop(oid, None)
        self.edges = {
            t: e
            for t, e in self.edges.items()
            if t[0] not in self.deleted and t[2] not in self.deleted
        }

    def edge(self, start: str, kind: str, end: str, env: str | None) -> None:
        self.edges[(start, kind, end)] = env

    def read(self, kind: str, raw: Any) -> None:
        if kind == "deleted":
            self.deleted.add(raw.upper())
            return
        record = low(raw)
        if kind == "sessions":
            computer = record["computersid"].upper()
            self.edge(computer, "HasSession", record["usersid"].upper(), computer.rsplit("-", 1)[0])
            return
        oid = record["objectidentifier"].upper()
        props = record.get("properties") or {}
        match = re.fullmatch(r"(S-1-5-21-\d+-\d+-\d+)-\d+", oid)
        domain = (
            props.get("domainsid") or record.get("domainsid") or (match.group(1) if match else None)
        )
        domain = oid if kind == "domains" else domain.upper() if domain else None
        label = LABELS[kind]
        self.nodes[oid] = (label, domain)
        self.props[oid] = {**self.props.get(oid, {}), **props}
        if kind == "domains" and props.get("name"):
            self.domains.add(oid)
            name = props["name"].upper()
            for well_known in (f"{name}-S-1-5-11", f"{name}-S-1-1-0"):
                self.nodes[well_known] = ("Group", oid)
            self.edge(f"{oid}-513", "MemberOf", f"{name}-S-1-5-11", oid)
            self.edge(f"{oid}-515", "MemberOf", f"{name}-S-1-5-11", oid)
            self.edge(f"{name}-S-1-5-11", "MemberOf", f"{name}-S-1-1-0", oid)
            self.edge(f"{oid}-501", "MemberOf", f"{name}-S-1-1-0", oid)
        self.read_aces(kind, oid, record, domain)
        if record.get("containedby"):
            self.edge(refs([record["containedby"]])[0], "Contains", oid, domain)
        for child in refs(record.get("childobjects")):
            self.edge(oid, "Contains", child, domain)
        for member in refs(record.get("members")):
            self.edge(member, "MemberOf", oid, domain)
        if record.get("primarygroupsid"):
            self.edge(oid, "MemberOf", record["primarygroupsid"].upper(), domain)
        for target in refs(record.get("allowedtodelegate")):
            self.edge(oid, "AllowedToDelegate", target, domain)
        for actor in refs(record.get("allowedtoact")):
            self.edge(actor, "AllowedToAct", oid, domain)
        for target in refs(record.get("hassidhistory")):
            self.edge(oid, "HasSIDHistory", target, domain)
        for target in refs(record.get("dumpsmsapassword")):
            self.edge(oid, "DumpSMSAPassword", target, domain)
        for spn in record.get("spntargets") or []:
            self.edge(oid, spn["service"], spn["computersid"].upper(), domain)
            self.acl.add((oid, spn["service"], spn["computersid"].upper()))
        if kind == "computers":
            self.read_computer(oid, record, props, domain)
        if kind in ("users", "computers"):
            domain_sid = props.get("domainsid") or record.get("domainsid")
            is_dc = record["isdc"] if "isdc" in record else props.get("isdc")
            delegates = props.get("unconstraineddelegation", record.get("unconstraineddelegation"))
            if domain_sid and kind == "computers" and is_dc is True:
                self.edge(oid, "DCFor", domain_sid.upper(), domain)
                self.domains.add(domain_sid.upper())
            elif domain_sid and delegates is True:
                self.edge(oid, "CoerceToTGT", domain_sid.upper(), domain)
                self.domains.add(domain_sid.upper())
        changes = record.get("gpochanges") or {}
        for block, rid in GROUP_BLOCKS.items():
            for computer in refs(changes.get("affectedcomputers")):
                self.local_group(f"{computer}-{rid}", computer, refs(changes.get(block)), domain)
        for link in record.get("links") or []:
            self.edge(link["guid"].upper(), "GPLink", oid, domain)
        for trust in record.get("trusts") or []:
            self.read_trust(oid, trust)
        self.read_adcs(kind, oid, record, domain)

    def read_aces(self, kind: str, oid: str, record: dict[str, Any], domain: str | None) -> None:
        aces = list(record.get("aces") or [])
        security = (record.get("caregistrydata") or {}).get("casecurity") or {}
        if kind == "enterprisecas" and security.get("collected"):
            aces += [
                a
                for a in security.get("data") or []
                if a["rightname"] != "Owns" and a["principaltype"].lower() != "localgroup"
            ]
        owned = False
        for ace in aces:
            principal = ace["principalsid"].upper()
            # The owner and WriteOwner holders are kept raw, and the analysis makes Owns and
            # WriteOwner of them (no fixture's domain blocks owner rights): one owner each.
            right = ace["rightname"]
            kinds = OWNER_KINDS.get(right, (right,))
            if principal == oid or (kinds[0] == "OwnsRaw" and owned):
                continue
            owned = owned or kinds[0] == "OwnsRaw"
            for kind_of_edge in kinds:
                self.edge(principal, kind_of_edge, oid, domain)
                self.acl.add((principal, kind_of_edge, oid))
            if kind == "domains":
                self.rights.setdefault(oid, {}).setdefault(right, set()).add(principal)

    def read_computer(
        self, oid: str, record: dict[str, Any], props: dict[str, Any], domain: str | None
    ) -> None:
        for group in record.get("localgroups") or []:
            if group.get("collected"):
                members = refs(group.get("results"))
                self.local_group(group["objectidentifier"].upper(), oid, members, domain)
        for block, rid in GROUP_BLOCKS.items():
            value = record.get(block)
            if isinstance(value, dict) and value.get("collected"):
                members = refs(value.get("results"))
            else:
                members = refs(value) if isinstance(value, list) else []
            self.local_group(f"{oid}-{rid}", oid, members, domain)
        for granted in record.get("userrights") or []:
            if granted.get("collected") and granted.get("privilege") in PRIVILEGES:
                for grantee in refs(granted.get("results")):
                    self.edge(grantee, PRIVILEGES[granted["privilege"]], oid, domain)
        for block in ("sessions", "privilegedsessions", "registrysessions"):
            for s in (record.get(block) or {}).get("results") or []:
                self.edge(s["computersid"].upper(), "HasSession", s["usersid"].upper(), domain)
        if props.get("haslaps") is True and domain:
            self.laps.setdefault(domain, set()).add(oid)

    def local_group(self, group: str, computer: str, members: list[str], env: str | None) -> None:
        """A local group with members, kept as the reference keeps it (none without)."""
        if members:
            self.edge(group, "LocalToComputer", computer, env)
        for member in members:
            self.edge(member, "MemberOfLocalGroup", group, env)

    def read_trust(self, oid: str, trust: dict[str, Any]) -> None:
        target = trust["targetdomainsid"].upper()
        self.domains.add(target)
        direction = DIRECTIONS.get(trust["trustdirection"], trust["trustdirection"])
        trust_type = TRUST_TYPES.get(trust["trusttype"], trust["trusttype"])
        kind = (
            "SameForestTrust"
            if trust_type in ("ParentChild", "TreeRoot", "CrossLink")
            else "CrossForestTrust"
        )
        if direction in ("Inbound", "Bidirectional"):
            self.edge(target, kind, oid, oid)
            if kind == "CrossForestTrust" and trust.get("tgtdelegationenabled") is True:
                self.edge(target, "AbuseTGTDelegation", oid, oid)
        if direction in ("Outbound", "Bidirectional"):
            self.edge(oid, kind, target, oid)
            if kind == "CrossForestTrust" and trust.get("sidfilteringenabled") is not True:
                self.edge(target, "SpoofSIDHistory", oid, oid)

    def read_adcs(self, kind: str, oid: str, record: dict[str, Any], domain: str | None) -> None:
        if kind == "enterprisecas":
            for template in refs(record.get("enabledcerttemplates")):
                self.edge(template, "PublishedTo", oid, domain)
            if record.get("hostingcomputer"):
                self.edge(record["hostingcomputer"].upper(), "HostsCAService", oid, domain)
        if kind in ("rootcas", "ntauthstores") and record.get("domainsid"):
            right = "RootCAFor" if kind == "rootcas" else "NTAuthStoreFor"
            self.edge(oid, right, record["domainsid"].upper(), domain)
            self.domains.add(record["domainsid"].upper())
        if kind == "issuancepolicies" and record.get("grouplink"):
            for group in refs([record["grouplink"]]):  # some link to no group (null id)
                self.edge(oid, "OIDGroupLink", group, domain)

    def derive(self) -> None:
        """The edges the run derives once every record is read (before deletions)."""
        self.derive_local_group_edges()
        members: dict[str, set[str]] = {}
        for start, kind, end in self.edges:
            if kind == "MemberOf":
                members.setdefault(end, set()).add(start)
        for domain, rights in self.rights.items():
            changes = rights.get("GetChanges", set())
            for holder in cross_product([changes, rights.get("GetChangesAll", set())], members):
                self.edge(holder, "DCSync", domain, domain)
            syncers = cross_product(
                [changes, rights.get("GetChangesInFilteredSet", set())], members
            )
            for computer in self.laps.get(domain, set()):
                for holder in syncers:
                    self.edge(holder, "SyncLAPSPassword", computer, domain)
        self.derive_certificate_chain()
        self.derive_domain_edges()

    def of_label(self, label: str) -> list[str]:
        return sorted(oid for oid, (found, _) in self.nodes.items() if found == label)

    def derive_local_group_edges(self) -> None:
        """AdminTo, CanPSRemote, ExecuteDCOM from a local group's direct members; CanRDP by
        the user-rights rule the reference enforces: the Remote Desktop Users group's direct
        members if it holds RemoteInteractiveLogonRight on the computer, else each holder of
        that right that is the group or in it at any depth, or else those of the holder's
        members (at any depth) that are."""
        members: dict[str, set[str]] = defaultdict(set)  # at any depth, both kinds
        own: dict[str, set[str]] = defaultdict(set)  # a local group's own members
        local: dict[str, set[str]] = defaultdict(set)  # computer -> its local groups
        logon: dict[str, set[str]] = defaultdict(set)  # computer -> the right's holders
        for start, kind, end in list(self.edges):
            if kind in ("MemberOf", "MemberOfLocalGroup"):
                members[end].add(start)
            if kind == "MemberOfLocalGroup":
                own[end].add(start)
            if kind == "LocalToComputer":
                local[end].add(start)
            if kind == "RemoteInteractiveLogonRight":
                logon[end].add(start)

        def below(group: str) -> set[str]:
            found: set[str] = set()
            todo = [group]
            while todo:
                for member in members.get(todo.pop(), ()):
                    if member not in found:
                        found.add(member)
                        todo.append(member)
            return found - {group}

        for computer, groups in local.items():
            env = self.nodes.get(computer, ("", None))[1]
            for group in groups:
                right = LOCAL_GROUP_RIGHTS.get(group.rsplit("-", 1)[1])
                if right is not None:
                    for member in own[group]:
                        self.edge(member, right, computer, env)
            for rdu in (g for g in groups if g.endswith("-555")):
                holders = logon.get(computer, set())
                if rdu in holders:
                    users = set(own[rdu])
                else:
                    in_rdu = below(rdu) | {rdu}
                    users = set()
                    for holder in holders:
                        users |= {holder} & in_rdu or below(holder) & in_rdu
                for user in users - {computer}:
                    self.edge(user, "CanRDP", computer, env)

    def derive_certificate_chain(self) -> None:
        """The reference's ADCS post-processing, as its documentation and tests state it:
        thumbprints and chains give TrustedForNTAuth, IssuedSignedBy and EnterpriseCAFor;
        template policies ExtendedByPolicy; and GoldenCert from the enabled hosts of a CA
        trusted by a domain's NTAuth store and chained through CAs to its root CA."""
        cas = ("EnterpriseCA", "RootCA", "AIACA")
        print_of = {
            oid: self.props.get(oid, {}).get("certthumbprint")
            for label in cas
            for oid in self.of_label(label)
        }
        chain: set[tuple[str, str]] = set()
        for store in self.of_label("NTAuthStore"):
            for thumbprint in self.props.get(store, {}).get("certthumbprints") or []:
                for ca in self.of_label("EnterpriseCA"):
                    if thumbprint and print_of[ca] == thumbprint:
                        self.edge(ca, "TrustedForNTAuth", store, self.nodes[store][1])
        for child in print_of:
            certificates = self.props.get(child, {}).get("certchain") or []
            if len(certificates) > 1:
                for parent, thumbprint in print_of.items():
                    if thumbprint == certificates[1]:
                        self.edge(child, "IssuedSignedBy", parent, self.nodes[child][1])
                        chain.add((child, parent))
        for ca in self.of_label("EnterpriseCA"):
            for other in self.of_label("RootCA") + self.of_label("AIACA"):
                if print_of[ca] and print_of[ca] == print_of[other]:
                    self.edge(ca, "EnterpriseCAFor", other, self.nodes[ca][1])
                    chain.add((ca, other))
        for template in self.of_label("CertTemplate"):
            sid = self.props.get(template, {}).get("domainsid")
            for policy in self.of_label("IssuancePolicy"):
                oid = self.props.get(policy, {}).get("certtemplateoid")
                if (
                    oid in (self.props.get(template, {}).get("certificatepolicy") or [])
                    and sid
                    and self.props.get(policy, {}).get("domainsid") == sid
                ):
                    self.edge(template, "ExtendedByPolicy", policy, sid.upper())
        edges = list(self.edges)
        for ca in self.of_label("EnterpriseCA"):
            hosts = [
                s for s, k, e in edges
                if k == "HostsCAService" and e == ca
                and self.props.get(s, {}).get("enabled") is True
            ]  # fmt: skip
            reached, todo = {ca}, [ca]
            while todo:
                node = todo.pop()
                for child, parent in chain:
                    if child == node and parent not in reached:
                        reached.add(parent)
                        todo.append(parent)
            rooted = {
                e for s, k, e in edges
                if k == "RootCAFor" and s in reached and self.nodes[s][0] == "RootCA"
            }  # fmt: skip
            stores = {e for s, k, e in edges if k == "TrustedForNTAuth" and s == ca}
            trusting = {
                e for s, k, e in edges
                if k == "NTAuthStoreFor" and s in stores and self.nodes[s][0] == "NTAuthStore"
            }  # fmt: skip
            for domain in rooted & trusting:
                for host in hosts:
                    self.edge(host, "GoldenCert", domain, domain)

    def derive_domain_edges(self) -> None:
        """HasTrustKeys and ProtectAdminGroups, as the reference's documentation states them:
        a collected domain holds the key of the trust account (its NetBIOS name and "$") in
        each domain it trusts outbound; a domain's AdminSDHolder protects its principals
        marked adminsdholderprotected."""
        edges = list(self.edges)
        collected = [d for d in self.of_label("Domain") if self.props.get(d)]
        for domain in collected:
            netbios = self.props.get(domain, {}).get("netbios")
            for s, k, trusted in edges:
                if s != domain or k not in ("SameForestTrust", "CrossForestTrust") or not netbios:
                    continue
                sid = (self.props.get(trusted, {}).get("domainsid") or trusted).upper()
                accounts = sorted(
                    u for u in self.of_label("User")
                    if self.props.get(u, {}).get("samaccountname") == f"{netbios}$"
                    and str(self.props.get(u, {}).get("domainsid", "")).upper() == sid
                )  # fmt: skip
                if accounts:
                    self.edge(domain, "HasTrustKeys", accounts[0], domain)
        for domain in collected:
            holders = sorted(
                c for c in self.of_label("Container")
                if str(self.props.get(c, {}).get("domainsid", "")).upper() == domain
                and str(self.props.get(c, {}).get("distinguishedname", "")).startswith(
                    "CN=ADMINSDHOLDER,CN=SYSTEM,"
                )
            )  # fmt: skip
            if not holders:
                continue
            for label in ("User", "Group", "Computer"):
                for principal in self.of_label(label):
                    props = self.props.get(principal, {})
                    if (
                        props.get("adminsdholderprotected") is True
                        and str(props.get("domainsid", "")).upper() == domain
                    ):
                        self.edge(holders[0], "ProtectAdminGroups", principal, domain)

    def domain_of_edge(self, triple: tuple[str, str, str]) -> str | None:
        env = self.edges[triple]
        for oid in (triple[2], triple[0]):
            if env is None and oid in self.nodes:
                env = self.nodes[oid][1]
        return env

    def node_counts(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for label, domain in self.nodes.values():
            if domain in self.domains:
                counts.update([label, "Base"])
        return counts

    def edge_counts(self) -> Counter[str]:
        return Counter(t[1] for t in self.edges if self.domain_of_edge(t) in self.domains)

    def members_of(self, group: str) -> set[str]:
        return {s for (s, k, e) in self.edges if k == "MemberOf" and e == group}

    def dcom_holders(self, computer: str) -> set[str]:
        found = {s for (s, k, e) in self.edges if k == "ExecuteDCOM" and e == computer}
        todo = list(found)
        while todo:
            for member in self.members_of(todo.pop()) - found:
                found.add(member)
                todo.append(member)
        return found


def served_rows(env: Env, run_id: str) -> tuple[dict[str, float], dict[str, float]]:
    body = env.get(
        "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"
        "&schema_extension_id=1&limit=10000"
    ).json()
    rows = [r for r in body["data"] if r["run_id"] == run_id]
    return (
        {r["metric_name"]: r["metric_value"] for r in rows if r["metric_type"] == "node"},
        {r["metric_name"]: r["metric_value"] for r in rows if r["metric_type"] == "relationship"},
    )


@pytest.mark.parametrize("name", list(SAMPLES))
def test_fixture_statistics_equal_counts_from_the_raw_files(env: Env, name: str) -> None:
    path = fixture(name)
    result = ingest(env, path)
    documents = raw_documents(path)
    expected = Expected(documents, analysed_edges(env))
    nodes, relationships = served_rows(env, result.run_id)
    assert nodes == {k: float(v) for k, v in expected.node_counts().items()}
    assert relationships == {k: float(v) for k, v in expected.edge_counts().items()}
    records = sum(len(document["data"]) for document in documents)
    assert (result.nodes > 0) == (records > 0), "a fixture's records are stored as nodes"
    if expected.domains:
        assert nodes, "a fixture with a domain record yields statistics"


def test_sample_zip_has_three_domains_and_real_counts(env: Env) -> None:
    path = fixture("sample zip (3 domains, 3 collections)")
    result = ingest(env, path)
    nodes, _ = served_rows(env, result.run_id)
    assert nodes["Domain"] == 3 and nodes["Computer"] == 34 and nodes["Group"] >= 219

    async def per_domain(conn):  # type: ignore[no-untyped-def]
        return await conn.fetch(
            "SELECT environment_id, metric_value FROM data_quality_environment_stats "
            "WHERE run_id = $1 AND metric_name = 'Domain' ORDER BY 1",
            result.run_id,
        )

    assert [float(r[1]) for r in env.run_in_transaction(per_domain)] == [1.0, 1.0, 1.0]


def test_win10_dcom_rights_hold_everyone_and_its_nested_members(env: Env) -> None:
    path = fixture("v6 folder")
    ingest(env, path)
    expected = Expected(raw_documents(path)).dcom_holders(WIN10)
    body = env.get(f"/api/v2/computers/{WIN10}/dcom-rights?limit=1000").json()
    served = {e["objectID"] for e in body["data"]}
    assert served == expected and body["count"] == len(expected)
    names = {e["name"] for e in body["data"]}
    assert {"EVERYONE@TESTLAB.LOCAL", "AUTHENTICATED USERS@TESTLAB.LOCAL"} <= names
    assert f"{TESTLAB}-513" in served and f"{TESTLAB}-515" in served  # the well-known links
    assert len(served) > 10, "users and computers reach Everyone through their primary groups"


def test_v5_computers_give_the_same_single_dcom_edge(env: Env) -> None:
    ingest(env, fixture("v5 computers"))

    async def dcom(conn):  # type: ignore[no-untyped-def]
        return await conn.fetch(
            "SELECT s.object_id, e.object_id FROM edges x JOIN kinds k ON k.id = x.kind_id "
            "JOIN nodes s ON s.id = x.start_id JOIN nodes e ON e.id = x.end_id "
            "WHERE k.name = 'ExecuteDCOM'"
        )

    assert [tuple(r) for r in env.run_in_transaction(dcom)] == [("TESTLAB.LOCAL-S-1-1-0", WIN10)]


def test_nested_group_dcom_lists_exactly_the_expected_principals(env: Env, tmp_path: Path) -> None:
    """DCOM granted to a group of nested groups, by hand: OPS > (TEAM-A > TEAM-A1), TEAM-B."""
    domain = Domain("EXAMPLE.LOCAL", "S-1-5-21-10-20-30")
    domain.users = {
        1001: "ANA",
        1002: "BEN",
        1003: "CLEO",
        1004: "DAN",
        1005: "EVE",
        1006: "OUTSIDER",
    }
    domain.groups = {
        513: "DOMAIN USERS",
        515: "DOMAIN COMPUTERS",
        2000: "OPS",
        2001: "TEAM-A",
        2002: "TEAM-A1",
        2003: "TEAM-B",
        2004: "UNRELATED",
    }
    domain.computers = {3000: "SRV", 3001: "JUMP"}
    domain.members = {
        2000: [2001, 2003],
        2001: [2002, 1001],
        2002: [1002, 3001],
        2003: [1003, 2001],
        2004: [1006],
    }
    domain.dcom = {3000: [2000, 1004]}
    ingest(env, *write_sharphound(tmp_path, domain))
    body = env.get(f"/api/v2/computers/{domain.id_of(3000)}/dcom-rights?limit=100").json()
    assert sorted(e["name"] for e in body["data"]) == [
        "ANA@EXAMPLE.LOCAL",
        "BEN@EXAMPLE.LOCAL",
        "CLEO@EXAMPLE.LOCAL",
        "DAN@EXAMPLE.LOCAL",
        "JUMP.EXAMPLE.LOCAL",
        "OPS@EXAMPLE.LOCAL",
        "TEAM-A1@EXAMPLE.LOCAL",
        "TEAM-A@EXAMPLE.LOCAL",
        "TEAM-B@EXAMPLE.LOCAL",
    ]
    assert body["count"] == 9  # TEAM-A is reached twice (OPS and TEAM-B) and listed once


def test_legacy_layouts_and_gpo_dcom(env: Env, tmp_path: Path) -> None:
    """v4 DcomUsers (Collected), v3 DcomUsers (MemberId list), and GPO-set DCOM users."""
    sid = "S-1-5-21-7-8-9"
    computers = {
        "meta": {"type": "computers", "version": 4},
        "data": [
            {
                "ObjectIdentifier": f"{sid}-1000",
                "Properties": {"name": "V4.X", "domainsid": sid},
                "DcomUsers": {
                    "Collected": True,
                    "Results": [{"ObjectIdentifier": f"{sid}-1100", "ObjectType": "User"}],
                },
            },
            {
                "ObjectIdentifier": f"{sid}-1001",
                "Properties": {"name": "V3.X", "domainsid": sid},
                "DcomUsers": [{"MemberId": f"{sid}-1101", "MemberType": "user"}],
            },
            {
                "ObjectIdentifier": f"{sid}-1002",
                "Properties": {"name": "NOTCOLLECTED.X"},
                "DcomUsers": {
                    "Collected": False,
                    "Results": [{"ObjectIdentifier": f"{sid}-1100", "ObjectType": "User"}],
                },
            },
        ],
    }
    ous = {
        "meta": {"type": "ous", "version": 5},
        "data": [
            {
                "ObjectIdentifier": "OU-GUID-1",
                "Properties": {"name": "SERVERS@X", "domainsid": sid},
                "GPOChanges": {
                    "DcomUsers": [{"ObjectIdentifier": f"{sid}-1102", "ObjectType": "Group"}],
                    "AffectedComputers": [
                        {"ObjectIdentifier": f"{sid}-1002", "ObjectType": "Computer"}
                    ],
                },
            }
        ],
    }
    for name, document in (("computers.json", computers), ("ous.json", ous)):
        (tmp_path / name).write_text(json.dumps(document))
    ingest(env, tmp_path)
    holders = {
        c: [
            e["objectID"]
            for e in env.get(f"/api/v2/computers/{sid}-{c}/dcom-rights").json()["data"]
        ]
        for c in (1000, 1001, 1002)
    }
    assert holders == {1000: [f"{sid}-1100"], 1001: [f"{sid}-1101"], 1002: [f"{sid}-1102"]}


def test_keys_match_case_insensitively(env: Env, tmp_path: Path) -> None:
    document = {
        "META": {"TYPE": "Groups", "version": 6},
        "DATA": [
            {
                "objectidentifier": "S-1-5-21-1-1-1-512",
                "PROPERTIES": {"name": "ADMINS@Y"},
                "MEMBERS": [{"OBJECTIDENTIFIER": "s-1-5-21-1-1-1-500", "objecttype": "user"}],
            }
        ],
    }
    (tmp_path / "groups.json").write_text(json.dumps(document))
    with pytest.raises(IngestError, match="unknown format"):
        ingest(env, tmp_path / "groups.json")  # top-level keys are the envelope's own: exact
    document = {"meta": document["META"], "data": document["DATA"]}
    (tmp_path / "groups.json").write_text(json.dumps(document))
    ingest(env, tmp_path / "groups.json")
    members = env.get("/api/v2/computers/S-1-5-21-1-1-1-512/dcom-rights")
    assert members.status_code == 404  # a group, not a computer: but it was stored

    async def member_of(conn):  # type: ignore[no-untyped-def]
        return await conn.fetchval(
            "SELECT count(*) FROM edges x JOIN nodes s ON s.id = x.start_id "
            "WHERE s.object_id = 'S-1-5-21-1-1-1-500' AND s.label = 'User'"
        )

    assert env.run_in_transaction(member_of) == 1


def test_ingesting_the_same_files_twice_gives_the_same_graph(env: Env) -> None:
    path = fixture("adcs zip")
    first = ingest(env, path)
    counts = env.run_in_transaction(graph.count_graph)
    second = ingest(env, path)
    assert env.run_in_transaction(graph.count_graph) == counts
    assert (second.nodes, second.edges) == (first.nodes, first.edges)
    assert served_rows(env, first.run_id) == served_rows(env, second.run_id)


def test_deleted_objects_are_removed(env: Env) -> None:
    folder = fixture("v6 folder")
    ingest(env, folder)
    deleted = json.loads((folder / "deleted.json").read_text())["data"]
    found = env.run_in_transaction(
        lambda conn: graph.find_nodes(conn, [d.upper() for d in deleted])
    )
    assert found == {}


# --- zips -------------------------------------------------------------------------------


def make_zip(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return path


def users_document(oid: str) -> bytes:
    return json.dumps(
        {"meta": {"type": "users", "version": 6}, "data": [{"ObjectIdentifier": oid}]}
    ).encode()


def test_zip_with_status_csv_and_several_collections(env: Env, tmp_path: Path) -> None:
    path = make_zip(
        tmp_path / "c.zip",
        {
            "20240101000000_users.json": users_document("S-1-5-21-1-2-3-1001"),
            "20240102000000_users.json": users_document("S-1-5-21-1-2-3-1002"),
            "20240101000000_computerstatus.csv": b"name,status\n",
        },
    )
    result = ingest(env, path)
    assert result.nodes == 2 and len(result.files) == 2


def test_encrypted_zip_is_refused_naming_the_entry(env: Env, tmp_path: Path) -> None:
    path = make_zip(tmp_path / "locked.zip", {"users.json": users_document("S-1-5-21-1-2-3-9")})
    raw = bytearray(path.read_bytes())
    # Set the "encrypted" flag in the local and the central directory headers.
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = raw.index(signature) + offset
        raw[at] |= 0x1
    path.write_bytes(bytes(raw))
    with pytest.raises(IngestError, match=r"locked\.zip: users\.json: encrypted"):
        ingest(env, path)
    assert env.run_in_transaction(graph.count_graph) == (0, 0)


def test_nested_zip_is_refused_naming_the_entry(env: Env, tmp_path: Path) -> None:
    inner = make_zip(tmp_path / "inner.zip", {"users.json": users_document("S-1-5-21-1-2-3-9")})
    outer = make_zip(
        tmp_path / "outer.zip",
        {"loop/inner.zip": inner.read_bytes(), "users.json": users_document("S-1-5-21-1-2-3-8")},
    )
    with pytest.raises(IngestError, match=r"outer\.zip: loop/inner\.zip: a zip inside a zip"):
        ingest(env, outer)
    assert env.run_in_transaction(graph.count_graph) == (0, 0)


def test_bad_json_inside_a_zip_names_the_entry_and_changes_nothing(
    env: Env, tmp_path: Path
) -> None:
    path = make_zip(
        tmp_path / "c.zip",
        {
            "users.json": users_document("S-1-5-21-1-2-3-1"),
            "groups.json": b'{"meta": {"type": "groups"}, "data": [',
        },
    )
    with pytest.raises(IngestError, match=r"c\.zip: groups\.json: not valid JSON"):
        ingest(env, path)
    assert env.run_in_transaction(graph.count_graph) == (0, 0)
