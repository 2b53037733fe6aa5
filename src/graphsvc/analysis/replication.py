"""DCSync and SyncLAPSPassword: from each holder of both GetChanges and GetChangesAll on a
domain to the domain, and from each holder of both GetChanges and GetChangesInFilteredSet to
every computer of the domain with LAPS; holders combined over group membership as the
reference's CalculateCrossProductNodeSets combines them (principals.calculate_cross_product)."""

from __future__ import annotations

from graphsvc.analysis.principals import Memberships, calculate_cross_product
from graphsvc.store import analysis as store
from graphsvc.store.analysis import DerivedEdge
from graphsvc.store.db import Connection

REPLICATION_RIGHTS = ("GetChanges", "GetChangesAll", "GetChangesInFilteredSet")


async def replication_edges(conn: Connection) -> list[DerivedEdge]:
    rights: dict[str, dict[str, set[str]]] = {}  # domain -> right -> holders
    for domain, right, holder, _ in await store.list_rights_on(conn, "Domain", REPLICATION_RIGHTS):
        rights.setdefault(domain, {}).setdefault(right, set()).add(holder)
    memberships = Memberships(conn)
    edges: list[DerivedEdge] = []
    for domain, held in sorted(rights.items()):
        changes = held.get("GetChanges", set())
        syncers = await calculate_cross_product(
            memberships, [changes, held.get("GetChangesAll", set())]
        )
        edges += [(holder, domain, "DCSync", domain) for holder in sorted(syncers)]
        readers = await calculate_cross_product(
            memberships, [changes, held.get("GetChangesInFilteredSet", set())]
        )
        if readers:
            for computer in await store.list_laps_computers(conn, domain):
                edges += [
                    (holder, computer, "SyncLAPSPassword", domain) for holder in sorted(readers)
                ]
    return edges
