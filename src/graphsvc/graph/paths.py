"""Shortest paths (`GET /api/v2/graphs/shortest-path`): every shortest path between two
objects, found by breadth-first search on an in-memory index of the graph
(graph/path_index.py).

The index follows the version the answer cache follows: the store's data version
(`Database.data_version`, moved by every commit that can change an answer, known to the
process without a statement). A request at the data version the index was last found
current at runs no statement for it: a path found costs two, its nodes and its edges; the
kinds asked for are checked against the index's, and the ends are found in it by their
object ids. At another data version, the index is checked once against the graph's version
(store/paths.py GraphVersion), and built again only when the graph has changed, so an
answer is never made from two versions of the graph, and a change made by any process is
seen by the first request that knows of it.

Who builds, and writes the files (graph/index_files.py). A build, and the writing of its
files with the removal of the versions before it, is one task of the process's `PathIndex`
(the builder), on a connection of its own, begun by the first request that needs it and
awaited by it and by the requests after it; no request handler reads or writes a file. A
request cut off by its timeout leaves the build running for the next. Under `serve
--workers`, each worker's builder takes the folder's lock: the first builds and writes the
version, the others then read what it wrote. The builder is not the process that moved the
version (the ingester, `graphsvc ingest`, another machine's server): each ingest would
then pay a build, 8 to 19 s and about 140 MB at a million nodes, whether or not a path is ever
asked of that graph, and a server on another machine could not use the files anyway.
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
from graphsvc.store import tags as store_tags
from graphsvc.store.db import Connection, Database
from graphsvc.store.paging import Page
from graphsvc.store.paths import GraphVersion

if TYPE_CHECKING:
    from graphsvc.graph.path_index import GraphIndex

# The reference's traversable kinds (its PathfindingRelationshipsMatchFrontend, the list its
# UI's path filter shows; docs/reference-ad.md §8b) and the three its documentation adds
# (CrossForestTrust, WriteAltSecurityIdentities, WritePublicInformation), the default of a
# search.
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
    "CrossForestTrust", "WriteAltSecurityIdentities", "WritePublicInformation",
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
    """The process's index, and the data version it was last found current at.

    With a database (the server), a request at another data version awaits the builder: a
    task of the index's own, on a connection of its own, one at a time, that reads the
    graph's version and keeps the index or obtains the graph's (`refresh`). While the data
    version is unknown (PostgreSQL's listener lost), every request awaits the builder.
    Without a database (a CLI command), the graph's version is read and the index obtained
    on the caller's connection.

    With a folder, the index is kept there as files (graph/index_files.py), read by every
    process of the machine using the same store instead of building its own, into one
    sealed copy in memory that they share."""

    def __init__(self, db: Database | None = None, folder: Path | None = None) -> None:
        self.db = db
        self.folder = folder
        self.current: GraphIndex | None = None
        self.current_at: int | None = None  # the data version `current` was found current at
        self.builder: asyncio.Task[GraphIndex] | None = None

    async def read(self, conn: Connection) -> GraphIndex:
        """The index of the graph as it is at this call, or later."""
        if self.db is None:
            version = await paths.read_graph_version(conn)
            if self.current is None or self.current.version != version:
                self.current = await self.obtain(conn, version)
            return self.current
        data_version = self.db.data_version()
        found = self.found_current(data_version)
        if found is not None:
            return found
        earlier = self.builder
        if earlier is not None and not earlier.done():
            # Begun before this request: the graph it read may be older than this request.
            with contextlib.suppress(Exception):  # failed: this request begins another
                await asyncio.shield(earlier)
            found = self.found_current(data_version)
            if found is not None:
                return found
        builder = self.builder
        if builder is None or builder is earlier:  # none begun since this request came
            builder = self.builder = asyncio.create_task(self.refresh(self.db, data_version))
        return await asyncio.shield(builder)

    def found_current(self, data_version: int | None) -> GraphIndex | None:
        """The index, if it was found current at `data_version` (None, unknown: never)."""
        if data_version is None or data_version != self.current_at:
            return None
        return self.current

    async def stop(self) -> None:
        """Cancel a build still running (the server is stopping)."""
        if self.builder is not None and not self.builder.done():
            self.builder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.builder

    async def refresh(self, db: Database, data_version: int | None) -> GraphIndex:
        """The index of the graph now, found current at `data_version` (read before the
        graph's version: the graph read is that version's or later).

        The data version also moves for writes that change no graph (a user, a token, a
        SAML provider): for those, the graph's version is read, once per move, and the index
        kept. That read took 0.016 ms on SQLite and 0.09 ms on PostgreSQL (the median of
        2,000 in a loop, on this project's 2-core machine), where a build took 8 s (SQLite)
        to 19 s (PostgreSQL) at a million nodes."""
        async with db.reading() as own:
            version = await paths.read_graph_version(own)
            if self.current is None or self.current.version != version:
                index = await self.obtain(own, version)
            else:
                index = self.current
        self.current, self.current_at = index, data_version
        return index

    async def obtain(self, conn: Connection, version: GraphVersion) -> GraphIndex:
        """The index at `version` or later: from the folder when another process (or an
        earlier start) wrote it, else built, and written there for the others (the versions
        written before it removed)."""
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


def parse_kind_filter(relationship_kinds: str | None) -> tuple[str, list[str]] | None:
    """`in` or `nin` and the kinds a filter names; None without one."""
    if relationship_kinds is None or relationship_kinds == "":
        return None
    match = KIND_FILTER.fullmatch(relationship_kinds.strip())
    if match is None:
        raise bad_request(
            "relationship_kinds must be in:Kind1,Kind2 or nin:Kind1,Kind2",
            "relationship_kinds",
        )
    return match.group(1), [k.strip() for k in match.group(2).split(",")]


def choose_kinds(known: dict[str, int], kind_filter: tuple[str, list[str]] | None) -> list[str]:
    """The kinds a search follows: the traversable ones, or `in`/`nin` a list of them."""
    if kind_filter is None:
        return list(TRAVERSABLE_KINDS)
    how, named = kind_filter
    unknown = [k for k in named if k not in known and k not in TRAVERSABLE_KINDS]
    if unknown:
        raise bad_request(
            f"unknown relationship kind {unknown[0]!r}; kinds in this graph: "
            f"{', '.join(sorted(known))}",
            "relationship_kinds",
        )
    if how == "in":
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
    """On an index found current at the data version, the statements are the two that read
    the nodes and edges of the paths found; none when an end is no node's object id; one,
    which nodes the object ids name, when there is no path."""
    # A malformed filter is refused before the index is read: it never waits for a build.
    kind_filter = parse_kind_filter(relationship_kinds)
    graph = await index.read(conn)
    allowed = graph.kind_mask(choose_kinds(graph.kind_ids, kind_filter))
    asked = start_node.upper(), end_node.upper()
    start, end = graph.object_ids.find(asked[0]), graph.object_ids.find(asked[1])
    if start is None:
        raise not_found(f"no node with object id {start_node!r}", "start_node")
    if end is None:
        raise not_found(f"no node with object id {end_node!r}", "end_node")
    edges = graph.search(start, end, allowed)
    nodes = await paths.read_path_nodes(conn, path_node_ids(edges)) if edges else []
    found_ends = {n.node_id: n.object_id for n in nodes if n.node_id in (start, end)}
    if (found_ends.get(start), found_ends.get(end)) != asked:
        # No path, or an end found by its hash is another node's (two object ids can share
        # one): the store says which nodes the object ids name.
        named = await store_graph.node_ids(conn, asked)
        if asked[0] not in named:
            raise not_found(f"no node with object id {start_node!r}", "start_node")
        if asked[1] not in named:
            raise not_found(f"no node with object id {end_node!r}", "end_node")
        if (named[asked[0]], named[asked[1]]) != (start, end):
            start, end = named[asked[0]], named[asked[1]]
            # A node the index does not hold was added since its graph: none of its paths.
            held = max(start, end) < graph.size
            edges = graph.search(start, end, allowed) if held else []
            nodes = await paths.read_path_nodes(conn, path_node_ids(edges)) if edges else []
    if not edges:
        raise not_found(f"no path from {start_node} to {end_node}", "end_node")
    answered_nodes, answered_edges = await path_answer(conn, graph, nodes, sorted(edges))
    return wire.PathGraphResponse(wire.PathGraph(answered_nodes, answered_edges))


async def path_answer(
    conn: Connection,
    graph: GraphIndex,
    nodes: list[paths.PathNode],
    edges: list[tuple[int, int, int]],
) -> tuple[dict[str, wire.PathNode], list[wire.PathEdge]]:
    """The nodes and edges (in this order) of paths, as the answers show them."""
    names = {kind_id: name for name, kind_id in graph.kind_ids.items()}
    times = await paths.read_edge_times(conn, path_node_ids(edges))
    return (
        {
            str(n.node_id): wire.PathNode(
                n.name,
                n.label,
                [*json.loads(n.kinds), *n.tag_labels],
                n.object_id,
                n.is_tier_zero,
                n.is_owned,
                n.updated_at,
                store_tags.system_tags(n.is_tier_zero, n.is_owned),
            )
            for n in nodes
        },
        [wire.PathEdge(str(s), str(e), names[k], names[k], times[(s, e, k)]) for s, e, k in edges],
    )


async def node_set(
    conn: Connection, tag: str | None, object_ids: str | None, which: str
) -> list[int]:
    """The node ids of one side of paths-between: a tag's members, or object ids
    (comma-separated); exactly one of the two."""
    tag_parameter, nodes_parameter = f"{which}_tag", f"{which}_nodes"
    if (tag is None) == (object_ids is None):
        raise bad_request(
            f"give {tag_parameter} (a tag's id or name: owned, tier-zero...) or "
            f"{nodes_parameter} (object ids, comma-separated), one of the two",
            tag_parameter,
        )
    if tag is not None:
        found = await store_tags.find_tag_by_reference(conn, tag)
        if found is None:
            known = ", ".join(t.name for t in await store_tags.list_tags(conn))
            raise not_found(f"no tag {tag!r}; the tags: {known}", tag_parameter)
        return await store_tags.read_member_ids(conn, found.id)
    asked = [o.strip().upper() for o in (object_ids or "").split(",") if o.strip()]
    if not asked or len(asked) > MOST_NAMED_NODES:
        raise bad_request(
            f"{nodes_parameter} must name 1 to {MOST_NAMED_NODES} object ids", nodes_parameter
        )
    named = await store_graph.node_ids(conn, asked)
    unknown = [o for o in asked if o not in named]
    if unknown:
        raise not_found(f"no node with object id {unknown[0]!r}", nodes_parameter)
    return list(named.values())


MOST_NAMED_NODES = 10_000  # object ids one side of paths-between may list


async def find_paths_between(
    conn: Connection,
    index: PathIndex,
    start_tag: str | None,
    start_nodes: str | None,
    end_tag: str | None,
    end_nodes: str | None,
    relationship_kinds: str | None,
    page: Page,
) -> wire.PathSetResponse:
    """Shortest paths from each of a set of objects (a tag's members, or object ids) to the
    nearest of another set, on the index: the starts nearest first, at most `limit` paths
    (page.limit); the kinds as shortest-path takes them."""
    if page.skip:
        raise bad_request(
            "skip is not taken: the paths come the nearest starts first, `limit` says how many",
            "skip",
        )
    kind_filter = parse_kind_filter(relationship_kinds)
    starts = await node_set(conn, start_tag, start_nodes, "start")
    ends = await node_set(conn, end_tag, end_nodes, "end")
    graph = await index.read(conn)
    allowed = graph.kind_mask(choose_kinds(graph.kind_ids, kind_filter))
    held = [n for n in ends if n < graph.size]  # a node added since the index's graph: none
    found = graph.paths_between(starts, held, allowed, page.limit)
    edges = sorted({edge for path in found.paths for edge in path})
    position = {edge: at for at, edge in enumerate(edges)}
    nodes = await paths.read_path_nodes(conn, path_node_ids(edges)) if edges else []
    answered_nodes, answered_edges = await path_answer(conn, graph, nodes, edges)
    return wire.PathSetResponse(
        wire.PathSet(
            answered_nodes,
            answered_edges,
            [[position[edge] for edge in path] for path in found.paths],
            found.reaching,
            found.truncated,
        )
    )


def path_node_ids(edges: list[tuple[int, int, int]]) -> list[int]:
    return sorted({n for s, e, _ in edges for n in (s, e)})


async def list_exposure(
    conn: Connection, index: PathIndex, object_id: str, page: Page
) -> wire.ExposureList:
    """The principals with a path to a domain's tier zero over the traversable kinds, by
    length then graph id, with one first step each; and the share of the domain's enabled
    users among them."""
    domain = await find_entity(conn, "domains", object_id)
    targets = await paths.read_tier_zero_ids(conn, domain.object_id)
    users = await paths.read_enabled_user_ids(conn, domain.object_id)
    return await exposure_answer(conn, await index.read(conn), targets, users, page)


async def list_tag_exposure(
    conn: Connection, index: PathIndex, tag_id: int, page: Page
) -> wire.ExposureList:
    """The principals with a path to a tag's members (a label of high-value objects, say),
    as a domain's exposure lists them; the share of every domain's enabled users among
    them."""
    tag = await store_tags.find_tag(conn, tag_id)
    if tag is None:
        raise not_found(f"no asset group tag with id {tag_id}", "asset_group_tag_id")
    targets = await store_tags.read_member_ids(conn, tag.id)
    users = await paths.read_enabled_user_ids(conn, None)
    return await exposure_answer(conn, await index.read(conn), targets, users, page)


async def exposure_answer(
    conn: Connection, graph: GraphIndex, targets: list[int], users: list[int], page: Page
) -> wire.ExposureList:
    exposure = graph.rank_exposure(
        [t for t in targets if t < graph.size],
        graph.kind_mask(TRAVERSABLE_KINDS),
        [u for u in users if u < graph.size],
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
                [*json.loads(nodes[e.node_id].kinds), *nodes[e.node_id].tag_labels],
                e.length,
                wire.FirstHop(
                    nodes[e.hop].object_id,
                    nodes[e.hop].name,
                    nodes[e.hop].label,
                    names[e.hop_kind],
                ),
                nodes[e.node_id].is_tier_zero,
                nodes[e.node_id].is_owned,
                store_tags.system_tags(nodes[e.node_id].is_tier_zero, nodes[e.node_id].is_owned),
            )
            for e in exposure.page
        ],
    )
