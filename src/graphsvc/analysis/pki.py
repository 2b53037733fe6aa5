"""The certificate services as the escalation rules read them, once the chain relationships
exist (certificates.py): which enterprise CAs are trusted by which domains, who may enroll
where, and what the domain controllers' registry says. Read from the store whether the
relationships were derived or collected (a harness states IssuedSignedBy directly).

An enterprise CA is *chained* to a domain, as the reference requires of every escalation
and GoldenCert, when all three hold:
- its chain reaches a root CA for the domain: CA -(IssuedSignedBy|EnterpriseCAFor)*-> RootCA
  -RootCAFor-> domain, through CAs only;
- the domain's NTAuth store trusts it: CA -TrustedForNTAuth-> NTAuthStore -NTAuthStoreFor->
  domain, exactly;
- an enabled computer hosts it (HostsCAService): a CA on no running host issues nothing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from graphsvc.analysis.certificates import CA_KINDS, CHAIN_KINDS
from graphsvc.analysis.principals import Memberships, is_special_group
from graphsvc.store import analysis as store
from graphsvc.store.analysis import AnalysedNode, DerivedEdge
from graphsvc.store.db import Connection

PKI_KINDS = (*CA_KINDS, "NTAuthStore", "CertTemplate", "IssuancePolicy", "Domain")
# Rights read on templates and enterprise CAs.
TEMPLATE_RIGHTS = (
    "Enroll", "GenericAll", "AllExtendedRights", "Owns", "WriteDacl", "WriteOwner",
    "GenericWrite", "WritePKINameFlag", "WritePKIEnrollmentFlag", "DelegatedEnrollmentAgent",
)  # fmt: skip
UPN_MAPPING_BIT = 0x04  # CertificateMappingMethods: user principal name (UPN/SAN)
REGISTRY_VALUE_MISSING = -1
# StrongCertificateBindingEnforcement values that let a weak mapping through: disabled,
# compatibility mode, and not set (compatibility mode is the default).
WEAK_BINDING = (0, 1, REGISTRY_VALUE_MISSING)


def flag(node: AnalysedNode, key: str) -> bool | None:
    value = node.properties.get(key)
    return value if isinstance(value, bool) else None


def number(node: AnalysedNode, key: str) -> float | None:
    value = node.properties.get(key)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def strings(node: AnalysedNode, key: str) -> list[str] | None:
    value = node.properties.get(key)
    if not isinstance(value, list):
        return None
    return [v for v in value if isinstance(v, str)]


@dataclass
class PublicKeyServices:
    """What the escalation rules read, by object id."""

    nodes: dict[str, AnalysedNode]
    templates: list[str]
    published: dict[str, list[str]]  # enterprise CA -> its templates
    template_cas: dict[str, list[str]]  # template -> the enterprise CAs it is published to
    chained: dict[str, set[str]]  # enterprise CA -> the domains it is chained to
    hosts: dict[str, list[str]]  # enterprise CA -> its enabled hosts
    rights: dict[str, dict[str, set[str]]]  # template or CA -> right -> direct holders
    groups: set[str]  # the holders that are groups
    upn_mapping: set[str]  # domains whose forest has a DC mapping certificates by UPN
    weak_binding: set[str]  # domains whose forest has a DC binding certificates weakly
    policy_groups: dict[str, set[str]]  # template -> groups its issuance policies link to
    memberships: Memberships
    labels: dict[str, str] = field(default_factory=dict)  # holder -> label

    def holders(self, target: str, *rights: str) -> set[str]:
        held = self.rights.get(target, {})
        return set().union(*(held.get(right, set()) for right in rights))

    def enrollers(self, template: str) -> set[str]:
        return self.holders(template, "Enroll", "GenericAll", "AllExtendedRights")

    def ca_enrollers(self, ca: str) -> set[str]:
        return self.holders(ca, "Enroll")

    def property_of(self, object_id: str, key: str) -> Any:
        node = self.nodes.get(object_id)
        return None if node is None else node.properties.get(key)

    async def has_special_enroller(self, enrollers: set[str]) -> bool:
        """Authenticated Users or Everyone enrolls: itself, or as a direct member of an
        enrolling group (the reference looks one level down)."""
        if any(is_special_group(p) for p in enrollers):
            return True
        groups = enrollers & self.groups
        await self.memberships.read_members(groups)
        special = self.memberships.special
        return any(not special.isdisjoint(self.memberships.direct[g]) for g in groups)


async def read_public_key_services(conn: Connection) -> PublicKeyServices:
    nodes = {n.object_id: n for n in await store.list_nodes_of_kinds(conn, PKI_KINDS)}
    kinds = {oid: set(node.kinds) for oid, node in nodes.items()}
    links = await store.list_edges_of_kinds(
        conn,
        (*CHAIN_KINDS, "TrustedForNTAuth", "RootCAFor", "NTAuthStoreFor", "PublishedTo",
         "ExtendedByPolicy", "OIDGroupLink", "DCFor", "SameForestTrust"),
    )  # fmt: skip
    up: dict[str, set[str]] = defaultdict(set)  # a CA -> the CAs its chain steps to
    by_kind: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for start, kind, end in links:
        if kind in CHAIN_KINDS:
            if kinds.get(start, set()) & set(CA_KINDS) and kinds.get(end, set()) & set(CA_KINDS):
                up[start].add(end)
        else:
            by_kind[kind][start].add(end)
    root_for = {s: d for s, d in by_kind["RootCAFor"].items() if "RootCA" in kinds.get(s, set())}
    store_for = {
        s: d for s, d in by_kind["NTAuthStoreFor"].items() if "NTAuthStore" in kinds.get(s, set())
    }
    hosts: dict[str, list[str]] = defaultdict(list)
    for computer, enabled, ca in await store.list_hosts(conn):
        if enabled:
            hosts[ca].append(computer)
    chained: dict[str, set[str]] = {}
    for ca, node in nodes.items():
        if "EnterpriseCA" not in node.kinds or not hosts.get(ca):
            continue
        rooted: set[str] = set()
        seen, frontier = {ca}, [ca]
        while frontier:  # every CA the chain reaches, cycles ended
            step = []
            for current in frontier:
                rooted |= root_for.get(current, set())
                step += [n for n in up.get(current, set()) if n not in seen]
            seen.update(step)
            frontier = step
        trusting = {
            domain
            for trusted in by_kind["TrustedForNTAuth"].get(ca, set())
            if "NTAuthStore" in kinds.get(trusted, set())
            for domain in store_for.get(trusted, set())
        }
        if rooted & trusting:
            chained[ca] = rooted & trusting
    published: dict[str, list[str]] = defaultdict(list)
    template_cas: dict[str, list[str]] = defaultdict(list)
    for template, cas in by_kind["PublishedTo"].items():
        if "CertTemplate" not in kinds.get(template, set()):
            continue
        for ca in sorted(cas):
            if "EnterpriseCA" in kinds.get(ca, set()):
                published[ca].append(template)
                template_cas[template].append(ca)
    templates = sorted(oid for oid, k in kinds.items() if "CertTemplate" in k)
    targets = templates + sorted(oid for oid, k in kinds.items() if "EnterpriseCA" in k)
    rights: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    labels: dict[str, str] = {}
    for holder, label, right, target in await store.list_rights_into(
        conn, targets, TEMPLATE_RIGHTS
    ):
        rights[target][right].add(holder)
        labels[holder] = label
    policy_groups: dict[str, set[str]] = defaultdict(set)
    for template, policies in by_kind["ExtendedByPolicy"].items():
        for policy in policies:
            policy_groups[template] |= by_kind["OIDGroupLink"].get(policy, set())
    upn, weak = await read_domain_controllers(conn, nodes, by_kind)
    return PublicKeyServices(
        nodes,
        templates,
        published,
        template_cas,
        chained,
        hosts,
        rights,
        {h for h, label in labels.items() if label == "Group"},
        upn,
        weak,
        policy_groups,
        Memberships(conn),
        labels,
    )


async def read_domain_controllers(
    conn: Connection, nodes: dict[str, AnalysedNode], by_kind: dict[str, dict[str, set[str]]]
) -> tuple[set[str], set[str]]:
    """The domains whose forest (the domains trusting them within it: SameForestTrust into
    them, at any depth) has a DC mapping certificates by UPN, and one binding them weakly."""
    controllers: dict[str, set[str]] = defaultdict(set)  # domain -> its DCs
    for dc, domains in by_kind["DCFor"].items():
        for domain in domains:
            controllers[domain].add(dc)
    dcs = {n.object_id: n for n in await store.find_analysed_nodes(conn, by_kind["DCFor"])}
    trusting: dict[str, set[str]] = defaultdict(set)  # domain -> domains trusting it
    for start, ends in by_kind["SameForestTrust"].items():
        for end in ends:
            trusting[end].add(start)
    upn: set[str] = set()
    weak: set[str] = set()
    for domain in (oid for oid, node in nodes.items() if "Domain" in node.kinds):
        forest, frontier = {domain}, [domain]
        while frontier:
            frontier = [d for current in frontier for d in trusting[current] if d not in forest]
            forest.update(frontier)
        for controller in (dcs[c] for d in forest for c in controllers[d] if c in dcs):
            mapping = number(controller, "certificatemappingmethodsraw")
            if mapping is not None and mapping != REGISTRY_VALUE_MISSING:
                upn.update([domain] if int(mapping) & UPN_MAPPING_BIT else [])
            binding = number(controller, "strongcertificatebindingenforcementraw")
            if binding is not None and binding in WEAK_BINDING:
                weak.add(domain)
    return upn, weak


def golden_cert_edges(pki: PublicKeyServices) -> list[DerivedEdge]:
    """GoldenCert (Computer → Domain): from each enabled host of an enterprise CA to each
    domain the CA is chained to (a computer not enabled holds no key to steal from)."""
    return [
        (computer, domain, "GoldenCert", domain)
        for ca, domains in sorted(pki.chained.items())
        for domain in sorted(domains)
        for computer in sorted(pki.hosts[ca])
    ]
