"""The certificate services' chain, as the reference's ADCS post-processing derives it:
TrustedForNTAuth, IssuedSignedBy, EnterpriseCAFor and ExtendedByPolicy from the objects'
properties (GoldenCert and the escalations follow the chain they make: pki.py).

- TrustedForNTAuth (EnterpriseCA → NTAuthStore): the CA's `certthumbprint` is one of the
  store's `certthumbprints`.
- IssuedSignedBy (CA → CA): the second entry of an enterprise, root or AIA CA's
  `certchain` (its issuer) is another such CA's `certthumbprint`.
- EnterpriseCAFor (EnterpriseCA → RootCA or AIACA): the same `certthumbprint`.
- ExtendedByPolicy (CertTemplate → IssuancePolicy): one of the template's
  `certificatepolicy` entries is the policy's `certtemplateoid`, both of one domain.
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
    return list(dict.fromkeys(edges))
