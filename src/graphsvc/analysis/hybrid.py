"""SyncedToEntraUser and SyncedToADUser: an Entra user synchronized from AD and the AD user it
comes from, as the reference's hybrid post-processing pairs them (the Entra user's
`onpremsyncenabled` true and its `onpremid` the AD user's SID). Only AD users in the graph
are paired: the reference stopped making a user of an unknown SID."""

from __future__ import annotations

from collections import defaultdict

from graphsvc.store import analysis as store
from graphsvc.store.analysis import DerivedEdge
from graphsvc.store.db import Connection


async def hybrid_edges(conn: Connection) -> list[DerivedEdge]:
    synced: dict[str, list[tuple[str, str | None]]] = defaultdict(list)  # SID -> Entra users
    for user in await store.list_nodes_with(conn, ["AZUser"], "onpremsyncenabled", True):
        sid = user.properties.get("onpremid")
        if isinstance(sid, str) and sid:
            synced[sid.upper()].append((user.object_id, user.domain))
    if not synced:
        return []
    edges: list[DerivedEdge] = []
    for ad_user in await store.find_analysed_nodes(conn, synced):
        if "User" not in ad_user.kinds:
            continue
        for entra_user, tenant in synced[ad_user.object_id]:
            edges.append((ad_user.object_id, entra_user, "SyncedToEntraUser", ad_user.domain))
            edges.append((entra_user, ad_user.object_id, "SyncedToADUser", tenant))
    return edges
