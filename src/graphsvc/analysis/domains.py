"""What the reference derives between a domain and its objects:

- HasTrustKeys (Domain → User): a collected domain holds the keys of the trust account
  other domains keep for it: for each domain it trusts outbound (a SameForestTrust or
  CrossForestTrust from it), the user of that domain whose `samaccountname` is this
  domain's `netbios` name and "$".
- ProtectAdminGroups (Container → principal): a collected domain's AdminSDHolder container
  (`distinguishedname` starting CN=ADMINSDHOLDER,CN=SYSTEM,) to each of the domain's users,
  groups and computers whose `adminsdholderprotected` is true.
"""

from __future__ import annotations

from collections import defaultdict

from graphsvc.store import analysis as store
from graphsvc.store.analysis import DerivedEdge
from graphsvc.store.db import Connection

ADMIN_SD_HOLDER = "CN=ADMINSDHOLDER,CN=SYSTEM,"
TRUSTS = ("SameForestTrust", "CrossForestTrust")
PROTECTED_KINDS = ("User", "Group", "Computer")


async def domain_edges(conn: Connection) -> list[DerivedEdge]:
    domains = {n.object_id: n for n in await store.list_nodes_of_kinds(conn, ("Domain",))}
    edges: list[DerivedEdge] = []
    # HasTrustKeys
    trusted: dict[str, set[str]] = defaultdict(set)
    for start, _, end in await store.list_edges_of_kinds(conn, TRUSTS):
        if start in domains and end in domains:
            trusted[start].add(end)
    for domain_id, domain in sorted(domains.items()):
        netbios = domain.properties.get("netbios")
        if not domain.collected or not isinstance(netbios, str) or not netbios:
            continue
        name = f"{netbios}$"
        accounts = await store.list_nodes_with(conn, ("User",), "samaccountname", name)
        for other in sorted(trusted.get(domain_id, set())):
            sid = domains[other].properties.get("domainsid") or other
            found = sorted(a.object_id for a in accounts if a.properties.get("domainsid") == sid)
            if found:  # the reference takes one
                edges.append((domain_id, found[0], "HasTrustKeys", domain_id))
    # ProtectAdminGroups
    containers = await store.list_nodes_of_kinds(conn, ("Container",))
    protected = await store.list_nodes_with(conn, PROTECTED_KINDS, "adminsdholderprotected", True)
    for domain_id, domain in sorted(domains.items()):
        sid = domain.properties.get("domainsid") or domain_id
        if not domain.collected:
            continue
        holders = sorted(
            n.object_id
            for n in containers
            if n.properties.get("domainsid") == sid
            and str(n.properties.get("distinguishedname", "")).startswith(ADMIN_SD_HOLDER)
        )
        if holders:  # the reference takes the first it finds
            edges += [
                (holders[0], node.object_id, "ProtectAdminGroups", domain_id)
                for node in protected
                if node.properties.get("domainsid") == sid
            ]
    return edges
