"""The certificate services' chain, as the reference's ADCS post-processing derives it:
TrustedForNTAuth, IssuedSignedBy, EnterpriseCAFor and ExtendedByPolicy from the objects'
properties, then GoldenCert from the chain they and the collected links make.

- TrustedForNTAuth (EnterpriseCA → NTAuthStore): the CA's `certthumbprint` is one of the
  store's `certthumbprints`.
- IssuedSignedBy (CA → CA): the second entry of an enterprise, root or AIA CA's
  `certchain` (its issuer) is another such CA's `certthumbprint`.
- EnterpriseCAFor (EnterpriseCA → RootCA or AIACA): the same `certthumbprint`.
- ExtendedByPolicy (CertTemplate → IssuancePolicy): one of the template's
  `certificatepolicy` entries is the policy's `certtemplateoid`, both of one domain.
- GoldenCert (Computer → Domain): from each enabled computer hosting an enterprise CA that
  is trusted for NT authentication by the domain's NTAuth store (CA -TrustedForNTAuth->
  NTAuthStore -NTAuthStoreFor-> domain) and whose chain ends at a root CA for the domain (CA
  -IssuedSignedBy/EnterpriseCAFor-> ... RootCA -RootCAFor-> domain, through CAs only), as
  the reference's newest tests pin it down (a computer not enabled holds no key to steal
  from, and the chain must be rooted).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from graphsvc.store import analysis as store
from graphsvc.store.analysis import AnalysedNode, DerivedEdge
from graphsvc.store.db import Connection

CA_KINDS = ("EnterpriseCA", "RootCA", "AIACA")
CHAIN_KINDS = ("IssuedSignedBy", "EnterpriseCAFor")


def text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def texts(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str) and v] if isinstance(value, list) else []


async def certificate_edges(conn: Connection) -> list[DerivedEdge]:
    nodes = await store.list_nodes_of_kinds(
        conn, (*CA_KINDS, "NTAuthStore", "CertTemplate", "IssuancePolicy", "Domain")
    )
    of_kind: dict[str, list[AnalysedNode]] = defaultdict(list)
    for node in nodes:
        for kind in node.kinds:
            of_kind[kind].append(node)
    by_thumbprint: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for kind in CA_KINDS:
        for node in of_kind[kind]:
            thumbprint = text(node.properties.get("certthumbprint"))
            if thumbprint is not None:
                by_thumbprint[kind][thumbprint].append(node.object_id)
    edges: list[DerivedEdge] = []
    for store_node in of_kind["NTAuthStore"]:
        for thumbprint in texts(store_node.properties.get("certthumbprints")):
            for trusted in by_thumbprint["EnterpriseCA"].get(thumbprint, []):
                edges.append((trusted, store_node.object_id, "TrustedForNTAuth", store_node.domain))
    for kind in CA_KINDS:
        for node in of_kind[kind]:
            chain = texts(node.properties.get("certchain"))
            if len(chain) < 2:
                continue
            for parent_kind in CA_KINDS:
                for parent in by_thumbprint[parent_kind].get(chain[1], []):
                    edges.append((node.object_id, parent, "IssuedSignedBy", node.domain))
    for ca in of_kind["EnterpriseCA"]:
        thumbprint = text(ca.properties.get("certthumbprint"))
        if thumbprint is None:
            continue
        for kind in ("RootCA", "AIACA"):
            for other in by_thumbprint[kind].get(thumbprint, []):
                edges.append((ca.object_id, other, "EnterpriseCAFor", ca.domain))
    policies: dict[str, list[AnalysedNode]] = defaultdict(list)
    for policy in of_kind["IssuancePolicy"]:
        oid = text(policy.properties.get("certtemplateoid"))
        if oid is not None:
            policies[oid].append(policy)
    for template in of_kind["CertTemplate"]:
        domain = text(template.properties.get("domainsid"))
        for oid in texts(template.properties.get("certificatepolicy")):
            for policy in policies.get(oid, []):
                if domain is not None and text(policy.properties.get("domainsid")) == domain:
                    edges.append((template.object_id, policy.object_id, "ExtendedByPolicy", domain))
    edges += await golden_cert_edges(conn, of_kind, edges)
    return list(dict.fromkeys(edges))


async def golden_cert_edges(
    conn: Connection, of_kind: dict[str, list[AnalysedNode]], derived: list[DerivedEdge]
) -> list[DerivedEdge]:
    kinds = {node.object_id: set(node.kinds) for nodes in of_kind.values() for node in nodes}
    links = await store.list_edges_of_kinds(conn, ("RootCAFor", "NTAuthStoreFor"))
    hosts = await store.list_hosts(conn)  # (computer, enabled, enterprise CA)
    up: dict[str, set[str]] = defaultdict(set)  # a CA -> the CAs its chain steps to
    trusted_by: dict[str, set[str]] = defaultdict(set)  # an enterprise CA -> NTAuth stores
    for start, end, kind, _ in derived:
        if kind in CHAIN_KINDS and kinds.get(end, set()) & set(CA_KINDS):
            up[start].add(end)
        elif kind == "TrustedForNTAuth":
            trusted_by[start].add(end)
    root_for: dict[str, set[str]] = defaultdict(set)  # a root CA -> domains
    store_for: dict[str, set[str]] = defaultdict(set)  # an NTAuth store -> domains
    for start, kind, end in links:
        if kind == "RootCAFor" and "RootCA" in kinds.get(start, set()):
            root_for[start].add(end)
        elif kind == "NTAuthStoreFor" and "NTAuthStore" in kinds.get(start, set()):
            store_for[start].add(end)
    hosted: dict[str, list[str]] = defaultdict(list)  # enterprise CA -> its enabled hosts
    for computer, enabled, ca in hosts:
        if enabled:
            hosted[ca].append(computer)
    edges: list[DerivedEdge] = []
    for ca, computers in sorted(hosted.items()):
        if "EnterpriseCA" not in kinds.get(ca, set()):
            continue
        rooted: set[str] = set()
        seen, frontier = {ca}, [ca]
        while frontier:  # every CA the chain reaches, cycles ended
            step = []
            for node in frontier:
                rooted |= root_for.get(node, set())
                step += [n for n in up.get(node, set()) if n not in seen]
            seen.update(step)
            frontier = step
        trusting = {d for s in trusted_by.get(ca, set()) for d in store_for.get(s, set())}
        for domain in sorted(rooted & trusting):
            edges += [(computer, domain, "GoldenCert", domain) for computer in sorted(computers)]
    return edges
