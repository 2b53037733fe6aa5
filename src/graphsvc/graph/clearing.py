"""Clearing the database: the reference's `POST /api/v2/clear-database` and the source kinds
it names nodes by (`GET /api/v2/graphs/source-kinds`), for the route and `graphsvc
clear-database` alike.

The reference queues the graph's part for its pipeline and answers before it runs; here
every part is done in the caller's transaction, so the answer says it is done, nothing is
half deleted if it fails, and no reader sees half of it: the graph's version moves with the
commit (store/paths.py), the path index and every kept answer with it. It holds the ingest
lease (uploads/lease.py): refused while an ingest runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from graphsvc import wire
from graphsvc.errors import bad_request
from graphsvc.logs import audit
from graphsvc.store import clearing
from graphsvc.store import tags as store_tags
from graphsvc.store.db import Connection
from graphsvc.uploads.lease import without_ingest

SOURCELESS = "Sourceless"
NOTHING_SELECTED = "please select something to delete"  # the reference's words
NOT_COMBINED = (
    "deleteCollectedGraphData may not be combined with deleteSourceKinds or deleteRelationships"
)


@dataclass(frozen=True)
class Clearing:
    """A clear-database request, checked: the source kinds by name."""

    whole_graph: bool
    source_kinds: tuple[str, ...]
    sourceless: bool
    relationships: tuple[str, ...]
    ingest_history: bool
    data_quality_history: bool
    asset_group_selectors: tuple[int, ...] = ()  # the tags whose own selectors to delete

    @property
    def graph(self) -> bool:
        return self.whole_graph or self.sourceless or bool(self.source_kinds or self.relationships)


async def list_source_kinds(conn: Connection) -> wire.SourceKindListResponse:
    """The source kinds by name, then the nodes of none (0, "Sourceless"), as the reference
    lists them."""
    kinds = [wire.SourceKind(k.id, k.name) for k in await clearing.list_source_kinds(conn)]
    kinds.append(wire.SourceKind(clearing.SOURCELESS_ID, SOURCELESS))
    return wire.SourceKindListResponse(wire.SourceKindList(kinds))


async def check_clearing(conn: Connection, body: wire.ClearDatabaseRequest) -> Clearing:
    if not (
        body.deleteCollectedGraphData
        or body.deleteSourceKinds
        or body.deleteRelationships
        or body.deleteFileIngestHistory
        or body.deleteDataQualityHistory
        or body.deleteAssetGroupSelectors
    ):
        raise bad_request(NOTHING_SELECTED, "body")
    if body.deleteCollectedGraphData and (body.deleteSourceKinds or body.deleteRelationships):
        raise bad_request(NOT_COMBINED, "body")
    groups = tuple(dict.fromkeys(body.deleteAssetGroupSelectors))
    for group in groups:
        if await store_tags.find_tag(conn, group) is None:
            raise bad_request(
                f"no asset group {group} (GET /api/v2/asset-groups lists them)",
                "deleteAssetGroupSelectors",
            )
    known = {kind.id: kind.name for kind in await clearing.list_source_kinds(conn)}
    names = []
    for kind_id in dict.fromkeys(body.deleteSourceKinds):
        if kind_id != clearing.SOURCELESS_ID and kind_id not in known:
            raise bad_request(
                f"failure building delete request: requested source kind id {kind_id} not "
                "found (GET /api/v2/graphs/source-kinds lists them)",
                "deleteSourceKinds",
            )
        if kind_id != clearing.SOURCELESS_ID:
            names.append(known[kind_id])
    relationships = tuple(dict.fromkeys(body.deleteRelationships))
    kinds = await clearing.list_kind_names(conn)
    for name in relationships:
        if name not in kinds:
            raise bad_request(
                f"no relationship kind {name!r} (names are case-sensitive: HasSession)",
                "deleteRelationships",
            )
    return Clearing(
        body.deleteCollectedGraphData,
        tuple(names),
        clearing.SOURCELESS_ID in body.deleteSourceKinds,
        relationships,
        body.deleteFileIngestHistory,
        body.deleteDataQualityHistory,
        groups,
    )


async def clear(conn: Connection, asked: Clearing, options: dict[str, object]) -> list[str]:
    """Delete what `asked` names; what was deleted, in the reference's words."""
    async with without_ingest(
        conn, "clear-database", "an ingest is under way: clear the database when it has ended"
    ):
        return await clear_now(conn, asked, options)


async def clear_now(conn: Connection, asked: Clearing, options: dict[str, object]) -> list[str]:
    now = datetime.now(UTC)
    audit("data.delete_requested", "clearing the database", options=options)
    done = []
    if asked.whole_graph:
        await clearing.delete_whole_graph(conn)
        done.append("collected graph data")
    if asked.source_kinds or asked.sourceless:
        if asked.source_kinds:
            await clearing.delete_nodes_of_kinds(conn, asked.source_kinds)
        if asked.sourceless:
            every = [kind.name for kind in await clearing.list_source_kinds(conn)]
            await clearing.delete_nodes_of_no_kind(conn, every)
        await clearing.forget_source_kinds(conn, asked.source_kinds)
        done.append("collected graph data")
    if asked.relationships:
        await clearing.delete_relationships_of_kinds(conn, asked.relationships)
        done.append(", ".join(asked.relationships))
    if asked.graph:
        await clearing.record_graph_clearing(conn, "; ".join(done), now)
    if asked.ingest_history:
        await clearing.delete_ended_upload_jobs(conn)
        done.append("file ingest history")
    if asked.data_quality_history:
        await clearing.delete_data_quality_history(conn)
        done.append("data quality history")
    if asked.asset_group_selectors:
        # The selectors people added (Owned's marks, a label's); the defaults stay.
        await store_tags.lock_tags(conn)
        await store_tags.delete_custom_selectors(conn, asked.asset_group_selectors)
        await store_tags.rebuild_members(conn)
        done.append("custom asset group selectors")
    for part in dict.fromkeys(done):
        audit("data.deleted", f"deleted {part}", delete_request_successful=part)
    return list(dict.fromkeys(done))


async def clear_database(conn: Connection, body: wire.ClearDatabaseRequest) -> None:
    """The route's handler: answered 204, no body."""
    asked = await check_clearing(conn, body)
    await clear(conn, asked, wire_options(body))


def wire_options(body: wire.ClearDatabaseRequest) -> dict[str, object]:
    """The request's options by the reference's names, for the audit log."""
    return {name: getattr(body, name) for name in body.__struct_fields__}
