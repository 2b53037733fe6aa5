"""Shortest paths (`GET /api/v2/graphs/shortest-path`): every shortest path between two
objects, found by breadth-first search on an in-memory index of the graph
(graph/path_index.py).

Each request checks the graph's version (store/paths.py GraphVersion) and rebuilds the
index when it moved, so an answer is never made from two versions of the graph and a change
made by any process is seen by the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING

from graphsvc import wire
from graphsvc.errors import bad_request, not_found
from graphsvc.graph.entities import find_entity
from graphsvc.store import graph as store_graph
from graphsvc.store import paths
from graphsvc.store.db import Connection, Database
from graphsvc.store.paging import Page
from graphsvc.store.paths import GraphVersion

if TYPE_CHECKING:
    from graphsvc.graph.path_index import GraphIndex

# The reference's traversable kinds (its PathfindingRelationshipsMatchFrontend, the list its
# UI's path filter shows; docs/reference-ad.md §8b), the default of a search.
TRAVERSABLE_KINDS = (
    "Owns", "GenericAll", "GenericWrite", "WriteOwner", "WriteDacl", "MemberOf",
    "ForceChangePassword", "AllExtendedRights", "AddMember", "HasSession", "GPLink",
    "AllowedToDelegate", "CoerceToTGT", "AllowedToAct", "AdminTo", "CanPSRemote", "CanRDP",
    "ExecuteDCOM", "HasSIDHistory", "AddSelf", "DCSync", "ReadLAPSPassword",
    "ReadGMSAPassword", "DumpSMSAPassword", "SQLAdmin", "AddAllowedToAct", "WriteSPN",
    "AddKeyCredentialLink", "SyncLAPSPassword", "WriteAccountRestrictions", "WriteGPLink",
    "GoldenCert", "ADCSESC1", "ADCSESC3", "ADCSESC4", "ADCSESC6a", "ADCSESC6b", "ADCSESC9a",
    "ADCSESC9b", "ADCSESC10a", "ADCSESC10b", "ADCSESC13", "SyncedToEntraUser",
    "CoerceAndRelayNTLMToSMB", "CoerceAndRelayNTLMToADCS", "WriteOwnerLimitedRights",
    "OwnsLimitedRights", "ClaimSpecialIdentity", "CoerceAndRelayNTLMToLDAP",
    "CoerceAndRelayNTLMToLDAPS", "HasTrustKeys", "ManageCA", "ManageCertificates", "Contains",
    "DCFor", "SameForestTrust", "SpoofSIDHistory", "AbuseTGTDelegation", "ProtectAdminGroups",
    # Azure: the reference's azure.PathfindingRelationships(), which its UI's filter adds.
    "AZAvereContributor", "AZContributor", "AZGetCertificates", "AZGetKeys", "AZGetSecrets",
    "AZHasRole", "AZMemberOf", "AZOwner", "AZRunsAs", "AZVMContributor",
    "AZAutomationContributor", "AZKeyVaultContributor", "AZVMAdminLogin", "AZAddMembers",
    "AZAddSecret", "AZExecuteCommand", "AZGlobalAdmin", "AZPrivilegedAuthAdmin", "AZGrant",
    "AZGrantSelf", "AZPrivilegedRoleAdmin", "AZResetPassword", "AZUserAccessAdministrator",
    "AZOwns", "AZCloudAppAdmin", "AZAppAdmin", "AZAddOwner", "AZManagedIdentity",
    "AZAKSContributor", "AZNodeResourceGroup", "AZWebsiteContributor", "AZLogicAppContributor",
    "AZMGAddMember", "AZMGAddOwner", "AZMGAddSecret", "AZMGGrantAppRoles", "AZMGGrantRole",
    "SyncedToADUser", "AZContains",
)  # fmt: skip
log = logging.getLogger(__name__)
KIND_FILTER = re.compile(r"(in|nin):(\w+(?:,\s*\w+)*)")


class PathIndex:
    """The process's index, rebuilt when the graph's version moves.

    With a database (the server), a build runs as a task of its own on a connection of its
    own: a request cut off by its timeout leaves it running, and the requests after it wait
    for the same build. Without (a CLI command), it runs on the caller's connection.

    With a folder, the index is kept there as files (graph/index_files.py), read by every
    process of the machine using the same store instead of building its own, into one
    sealed copy in memory that they share."""

    def __init__(self, db: Database | None = None, folder: Path | None = None) -> None:
        self.db = db
        self.folder = folder
        self.current: GraphIndex | None = None
        self.building: asyncio.Task[GraphIndex] | None = None

    async def read(self, conn: Connection) -> GraphIndex:
        version = await paths.read_graph_version(conn)
        if self.current is not None and self.current.version == version:
            return self.current
        if self.db is None:
            self.current = await self.obtain(conn, version)
            return self.current
        if self.building is None or self.building.done():
            self.building = asyncio.create_task(self.build_in_background(self.db, version))
        built = await asyncio.shield(self.building)
        if built.version.runs < version.runs:  # the build began before this request's version
            return await self.read(conn)
        return built

    async def stop(self) -> None:
        """Cancel a build still running (the server is stopping)."""
        if self.building is not None and not self.building.done():
            self.building.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.building

    async def build_in_background(self, db: Database, version: GraphVersion) -> GraphIndex:
        async with db.reading() as own:
            self.current = await self.obtain(own, version)
        return self.current

    async def obtain(self, conn: Connection, version: GraphVersion) -> GraphIndex:
        """The index at `version` or later: from the folder when another process (or an
        earlier start) wrote it, else built, and written there for the others."""
        if self.folder is None:
            return await build_stable_index(conn, version)
        from graphsvc.graph import index_files

        try:
            async with index_files.hold_lock(self.folder) as files:
                # Waiting for the lock, another process may have built a newer version.
                version = await paths.read_graph_version(conn)
                found = await files.load(version)
                if found is not None:
                    return found
                built = await build_stable_index(conn, version)
                return await files.save(built)
        except index_files.IndexFolderUnavailable as exc:
            log.warning("path index kept in this process's memory only: %s", exc)
            self.folder = None
            return await build_stable_index(conn, version)


async def build_stable_index(conn: Connection, version: GraphVersion) -> GraphIndex:
    """An index read from one graph: built again if an ingest committed during the build
    (each moves the version at once, so the same version after means one graph)."""
    from graphsvc.graph import path_index  # numpy: loaded by the first search

    while True:
        built = await path_index.build_index(conn, version)
        after = await paths.read_graph_version(conn)
        if after == version:
            return built
        version = after


def choose_kinds(known: dict[str, int], relationship_kinds: str | None) -> list[str]:
    """The kinds a search follows: the traversable ones, or `in:`/`nin:` a list of them."""
    if relationship_kinds is None or relationship_kinds == "":
        return list(TRAVERSABLE_KINDS)
    match = KIND_FILTER.fullmatch(relationship_kinds.strip())
    if match is None:
        raise bad_request(
            "relationship_kinds must be in:Kind1,Kind2 or nin:Kind1,Kind2",
            "relationship_kinds",
        )
    named = [k.strip() for k in match.group(2).split(",")]
    unknown = [k for k in named if k not in known and k not in TRAVERSABLE_KINDS]
    if unknown:
        raise bad_request(
            f"unknown relationship kind {unknown[0]!r}; kinds in this graph: "
            f"{', '.join(sorted(known))}",
            "relationship_kinds",
        )
    if match.group(1) == "in":
        return named
    chosen = [k for k in TRAVERSABLE_KINDS if k not in named]
    if not chosen:
        raise bad_request("relationship_kinds leaves no kind to follow", "relationship_kinds")
    return chosen


async def find_shortest_paths(
    conn: Connection,
    index: PathIndex,
    start_node: str,
    end_node: str,
    relationship_kinds: str | None,
) -> wire.PathGraphResponse:
    # The request is checked before the index is read: a bad one never waits for a build.
    kinds = choose_kinds(await paths.read_kinds(conn), relationship_kinds)
    found = await store_graph.node_ids(conn, [start_node.upper(), end_node.upper()])
    start, end = found.get(start_node.upper()), found.get(end_node.upper())
    if start is None:
        raise not_found(f"no node with object id {start_node!r}", "start_node")
    if end is None:
        raise not_found(f"no node with object id {end_node!r}", "end_node")
    graph = await index.read(conn)
    edges = graph.search(start, end, graph.kind_mask(kinds)) if start != end else []
    if not edges:
        raise not_found(f"no path from {start_node} to {end_node}", "end_node")
    node_ids = sorted({n for s, e, _ in edges for n in (s, e)})
    names = {kind_id: name for name, kind_id in graph.kind_ids.items()}
    times = await paths.read_edge_times(conn, node_ids)
    nodes = {
        str(n.node_id): wire.PathNode(
            n.name,
            n.label,
            json.loads(n.kinds),
            n.object_id,
            n.is_tier_zero,
            False,
            n.updated_at,
        )
        for n in await paths.read_path_nodes(conn, node_ids)
    }
    return wire.PathGraphResponse(
        wire.PathGraph(
            nodes,
            [
                wire.PathEdge(str(s), str(e), names[k], names[k], times[(s, e, k)])
                for s, e, k in sorted(edges)
            ],
        )
    )


async def list_exposure(
    conn: Connection, index: PathIndex, object_id: str, page: Page
) -> wire.ExposureList:
    """The principals with a path to a domain's tier zero over the traversable kinds, by
    length then graph id, with one first step each; and the share of the domain's enabled
    users among them."""
    domain = await find_entity(conn, "domains", object_id)
    graph = await index.read(conn)
    exposure = graph.rank_exposure(
        await paths.read_tier_zero_ids(conn, domain.object_id),
        graph.kind_mask(TRAVERSABLE_KINDS),
        await paths.read_enabled_user_ids(conn, domain.object_id),
        page.skip,
        page.limit,
    )
    shown = {n.node_id for n in exposure.page} | {n.hop for n in exposure.page}
    nodes = {n.node_id: n for n in await paths.read_path_nodes(conn, sorted(shown))}
    names = {kind_id: name for name, kind_id in graph.kind_ids.items()}
    return wire.ExposureList(
        exposure.total,
        page.skip,
        page.limit,
        wire.UserExposure(
            exposure.enabled_users,
            exposure.exposed_users,
            exposure.exposed_users / exposure.enabled_users if exposure.enabled_users else 0.0,
        ),
        [
            wire.ExposedPrincipal(
                nodes[e.node_id].object_id,
                nodes[e.node_id].name,
                nodes[e.node_id].label,
                json.loads(nodes[e.node_id].kinds),
                e.length,
                wire.FirstHop(
                    nodes[e.hop].object_id,
                    nodes[e.hop].name,
                    nodes[e.hop].label,
                    names[e.hop_kind],
                ),
            )
            for e in exposure.page
        ],
    )
