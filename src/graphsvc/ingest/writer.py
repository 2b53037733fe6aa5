"""Writes a run's records in batches inside the caller's transaction, so memory stays bounded
however large the input; the transaction keeps the run all or nothing."""

from __future__ import annotations

from datetime import datetime

from graphsvc.ingest.records import (
    EdgeRecord,
    Endpoint,
    IngestError,
    MatchedEdge,
    NodeRecord,
    merge_kinds,
)
from graphsvc.store import graph
from graphsvc.store.db import Connection

NODE_BATCH = 2000
EDGE_BATCH = 5000


def merge_node(new: NodeRecord, old: NodeRecord | graph.StoredNode) -> NodeRecord:
    """Collectors repeat objects, sometimes as stubs: keep every kind and property seen, a real
    name over a bare id, and the newest values."""
    name = new.name if new.name and new.name != new.object_id else old.name or new.name
    environment = new.environment_id or old.environment_id
    return NodeRecord(
        new.object_id,
        name,
        merge_kinds(new.kinds, old.kinds),
        {**old.properties, **new.properties},
        environment,
    )


class GraphWriter:
    def __init__(self, conn: Connection, run_id: str, now: datetime) -> None:
        self.conn = conn
        self.run_id = run_id
        self.now = now
        self.nodes: dict[str, NodeRecord] = {}
        self.edges: dict[tuple[str, str, str], EdgeRecord] = {}
        self.matched: list[MatchedEdge] = []
        self.deleted: set[str] = set()

    async def node(self, record: NodeRecord) -> None:
        known = self.nodes.get(record.object_id)
        self.nodes[record.object_id] = record if known is None else merge_node(record, known)
        if len(self.nodes) >= NODE_BATCH:
            await self.flush_nodes()

    async def edge(self, record: EdgeRecord) -> None:
        key = (record.start, record.kind, record.end)
        known = self.edges.get(key)
        if known is not None:
            record.properties = {**known.properties, **record.properties}
        self.edges[key] = record
        if len(self.edges) >= EDGE_BATCH:
            await self.flush_nodes()
            await self.flush_edges()

    def matched_edge(self, edge: MatchedEdge) -> None:
        self.matched.append(edge)

    def delete(self, object_id: str) -> None:
        self.deleted.add(object_id.upper())

    async def flush_nodes(self) -> None:
        if not self.nodes:
            return
        stored = await graph.find_nodes(self.conn, self.nodes)
        records = [
            merge_node(r, stored[oid]) if oid in stored else r for oid, r in self.nodes.items()
        ]
        await graph.upsert_nodes(self.conn, records, self.run_id, self.now)
        self.nodes.clear()

    async def flush_edges(self) -> None:
        if not self.edges:
            return
        stubs: dict[str, str] = {}
        for e in self.edges.values():
            for oid, kind in ((e.start, e.start_kind), (e.end, e.end_kind)):
                if stubs.get(oid, "Base") == "Base":
                    stubs[oid] = kind
        ids = await graph.ensure_nodes(self.conn, stubs, self.now)
        await graph.upsert_edges(
            self.conn,
            [
                graph.EdgeRow(ids[e.start], ids[e.end], e.kind, e.properties, e.environment_id)
                for e in self.edges.values()
            ],
            self.run_id,
            self.now,
        )
        self.edges.clear()

    async def finish(self) -> None:
        await self.flush_nodes()
        await self.flush_edges()
        for edge in self.matched:
            start = await self.resolve(edge.start, edge, "start")
            end = await self.resolve(edge.end, edge, "end")
            await self.edge(EdgeRecord(start, end, edge.kind, None, properties=edge.properties))
        await self.flush_edges()
        if self.deleted:
            await graph.delete_nodes(self.conn, sorted(self.deleted))

    async def resolve(self, endpoint: Endpoint, edge: MatchedEdge, side: str) -> str:
        """The object id of the one stored node an OpenGraph endpoint names."""
        if endpoint.match_by == "id":
            found = await graph.find_nodes(self.conn, [endpoint.value.upper()])
            candidates = list(found.values())
        elif endpoint.match_by == "name":
            candidates = await graph.find_nodes_by_name(self.conn, endpoint.value)
        else:
            key, value = endpoint.matchers[0]
            candidates = [
                n
                for n in await graph.find_nodes_by_property(self.conn, key, value)
                if all(n.properties.get(k) == v for k, v in endpoint.matchers)
            ]
        if endpoint.kind is not None:
            candidates = [n for n in candidates if endpoint.kind in n.kinds]
        where = f"{edge.element}.{side}"
        kind_note = f" of kind {endpoint.kind}" if endpoint.kind else ""
        if not candidates:
            raise IngestError(edge.source, f"no node{kind_note} with {endpoint.describe()}", where)
        if len(candidates) > 1:
            raise IngestError(
                edge.source, f"more than one node{kind_note} has {endpoint.describe()}", where
            )
        return candidates[0].object_id
