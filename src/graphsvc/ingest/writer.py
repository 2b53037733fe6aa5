"""Writes a run's records in batches inside the caller's transaction, so memory stays bounded
however large the input; the transaction keeps the run all or nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from graphsvc.ingest.facts import FACT_KEYS
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
# Relationships a statement writes: the 1 GB collection's documents took 68.4 to 71.6 s with
# 20,000 against 75.0 and 75.2 s with 5,000 (alternated), 50,000 no better than 20,000.
EDGE_BATCH = 20_000
StatedFacts = Iterable[str]  # the groups of facts a record states (sharphound.FACT_GROUPS)


def merge_node(new: NodeRecord, old: NodeRecord | graph.StoredNode) -> NodeRecord:
    """Collectors repeat objects, sometimes as stubs: keep every kind seen and a real name
    over a bare id. Of the properties, the newer collection's win: a record that
    `replaces_properties` drops the ones of an older collection but for FACT_KEYS, and one
    that does not adds its own; two records of one collection add up. A record of an older
    collection than the one stored only adds what the stored one lacks. A property stated
    as null is cleared (`without_nulls`)."""
    name = new.name if new.name and new.name != new.object_id else old.name or new.name
    environment = new.environment_id or old.environment_id
    older: NodeRecord | graph.StoredNode = old
    newer: NodeRecord | graph.StoredNode = new
    if old.seen is not None and new.seen is not None and old.seen > new.seen:
        older, newer = new, old
    kept = older.properties
    if (
        isinstance(newer, NodeRecord)
        and newer.replaces_properties
        and (older.seen is None or newer.seen is None or older.seen < newer.seen)
    ):
        kept = {k: v for k, v in kept.items() if k in FACT_KEYS}
    replaces = new.replaces_properties or (isinstance(old, NodeRecord) and old.replaces_properties)
    seen = newer.seen or older.seen
    return NodeRecord(
        new.object_id,
        name,
        merge_kinds(new.kinds, old.kinds),
        {**kept, **newer.properties},
        environment,
        replaces,
        seen,
    )


# What the store holds (its columns' sizes, migration 0001); PostgreSQL refuses a NUL
# character in text and JSON.
MAX_OBJECT_ID = 512
MAX_NAME = 1024


def refuse_unstorable(source: str, object_ids: Iterable[str], names: Iterable[str] = ()) -> None:
    """An IngestError naming the first object id or name the store cannot hold, if any (the
    file's, not the database's, fault: a traceback or a database error otherwise)."""
    for object_id in object_ids:
        if len(object_id) > MAX_OBJECT_ID or "\x00" in object_id:
            raise IngestError(
                source,
                f"object id {object_id[:60]!r}... is longer than {MAX_OBJECT_ID} characters "
                "or holds a NUL character",
            )
    for name in names:
        if len(name) > MAX_NAME or "\x00" in name:
            raise IngestError(
                source,
                f"name {name[:60]!r}... is longer than {MAX_NAME} characters or holds a NUL "
                "character",
            )


def without_nulls(record: NodeRecord) -> NodeRecord:
    """The record as stored: a null property is not kept (as the reference keeps none, and
    so that a collected block's cleared value, ingest/facts.py, is gone)."""
    if None in record.properties.values():
        record.properties = {k: v for k, v in record.properties.items() if v is not None}
    return record


class GraphWriter:
    def __init__(
        self, conn: Connection, run_number: int, now: datetime, older_collections: bool
    ) -> None:
        """`older_collections`: whether an earlier run collected any node (`any_collected`).
        Only then can a record's groups of facts replace what an older collection stated
        (delete_stale_facts keeps the run's own relationships), and only then are they
        read: holding each record for its facts until its batch was stored took the 200 MB
        collection's first ingest from 12.9 to 13.6-14.7 s."""
        self.conn = conn
        self.run_number = run_number
        self.now = now
        self.older_collections = older_collections
        self.nodes: dict[str, NodeRecord] = {}
        self.edges: dict[tuple[str, str, str], EdgeRecord] = {}
        self.matched: list[MatchedEdge] = []
        self.deleted: set[str] = set()
        self.stub_names: dict[str, str] = {}  # names for nodes no file collects (trusted domains)
        self.skipped: Counter[str] = Counter()  # records of kinds not read, by producer and kind
        self.source = ""  # the document being read (run.py sets it)
        self.seen = now  # when that document's collection was made (run.py sets it)
        # The groups of facts the pending nodes' records stated, each record's kept only if
        # its node was collected before (store_batch): object id -> [(facts, when)].
        self.stated: dict[str, list[tuple[StatedFacts, datetime]]] = {}
        self.stated_before = False  # whether a record stated facts of a node stored before
        self.skipped_by_source: dict[str, Counter[str]] = {}  # the same, per document

    async def node(self, record: NodeRecord, facts: StatedFacts | None = None) -> None:
        """Store a collected object; `facts`: the groups of facts its record stated (those an
        older collection's relationships are replaced in), which a reader need not give
        unless `older_collections`."""
        if record.seen is None:
            record.seen = self.seen
        if facts is not None and self.older_collections:
            self.stated.setdefault(record.object_id, []).append((facts, record.seen))
        known = self.nodes.get(record.object_id)
        self.nodes[record.object_id] = record if known is None else merge_node(record, known)
        if len(self.nodes) >= NODE_BATCH:
            await self.write_batch(flush_edges=False)

    def state(self, object_id: str, facts: StatedFacts) -> None:
        """Say that the document states these groups of facts of an object whole without
        collecting the object itself (a group's members, an application's credentials)."""
        if self.older_collections:
            self.stated.setdefault(object_id, []).append((facts, self.seen))

    async def edge(self, record: EdgeRecord) -> None:
        await self.add_edges((record,))

    async def add_edges(self, records: Iterable[EdgeRecord]) -> None:
        """Edges in one call (a record's ACEs are a dozen): a coroutine per edge was a tenth
        of the ingest's Python time."""
        pending = self.edges
        seen = self.seen
        for record in records:
            if record.seen is None:
                record.seen = seen
            key = (record.start, record.kind, record.end)
            known = pending.get(key)
            if known is not None:
                record.properties = {**known.properties, **record.properties}
            pending[key] = record
            if len(pending) >= EDGE_BATCH:
                await self.write_batch()
                pending = self.edges

    def matched_edge(self, edge: MatchedEdge) -> None:
        self.matched.append(edge)

    def name_stub(self, object_id: str, name: str) -> None:
        """The name `object_id` gets if it is only ever referenced."""
        self.stub_names[object_id] = name

    def skip(self, what: str) -> None:
        """Count a record this version does not read, so that the run reports it."""
        self.skipped[what] += 1
        self.skipped_by_source.setdefault(self.source, Counter())[what] += 1

    def delete(self, object_id: str) -> None:
        self.deleted.add(object_id.upper())

    async def write_batch(self, flush_edges: bool = True) -> None:
        """Store the pending nodes (and edges, unless told not to)."""
        nodes, self.nodes = self.nodes, {}
        stated, self.stated = self.stated, {}
        edges: dict[tuple[str, str, str], EdgeRecord] = {}
        if flush_edges:
            edges, self.edges = self.edges, {}
        await self.store_batch(nodes, stated, edges)

    async def store_batch(
        self,
        nodes: dict[str, NodeRecord],
        stated: dict[str, list[tuple[StatedFacts, datetime]]],
        edges: dict[tuple[str, str, str], EdgeRecord],
    ) -> None:
        refuse_unstorable(self.source, [*nodes, *stated], (r.name for r in nodes.values()))
        stored = await graph.find_nodes(self.conn, [*nodes, *stated]) if nodes or stated else {}
        if nodes:
            records = [
                without_nulls(merge_node(r, stored[oid]) if oid in stored else r)
                for oid, r in nodes.items()
            ]
            try:
                await graph.upsert_nodes(
                    self.conn, records, self.run_number, self.now, kinds_only_grow=True
                )
            except graph.UnstorableText as refused:
                raise IngestError(self.source, str(refused)) from None
        # Only a node collected before can hold an older collection's facts: a first
        # collection (a whole new graph's ingest) states nothing to replace, nor does a
        # node only referenced so far (a stub: a group's member read before its own
        # record): those were most of the 1 GB collection's 1.6 million statements,
        # and the first ingest of it went from 88.8 to 75.6 s without them.
        said: dict[tuple[int, str], datetime] = {}
        for oid, statements in stated.items():
            if oid in stored and stored[oid].run_number is not None:
                for facts, seen in statements:
                    for fact in facts:
                        said[(stored[oid].id, fact)] = seen
        before = [(node_id, fact, seen) for (node_id, fact), seen in said.items()]
        if before:
            self.stated_before = True
            await graph.insert_stated_facts(self.conn, self.run_number, before)
        if edges:
            stubs: dict[str, str] = {}  # each endpoint's kind, should it be missing
            for e in edges.values():
                if stubs.get(e.start, "Base") == "Base":
                    stubs[e.start] = e.start_kind
                if stubs.get(e.end, "Base") == "Base":
                    stubs[e.end] = e.end_kind
                if e.owner is not None and e.owner not in stubs:
                    stubs[e.owner] = "Base"
            refuse_unstorable(self.source, stubs)
            ids = await graph.ensure_nodes(self.conn, stubs, self.now, self.stub_names)
            try:
                await graph.upsert_edges(
                    self.conn,
                    [
                        (
                            ids[e.start],
                            ids[e.end],
                            e.kind,
                            e.properties,
                            e.environment_id,
                            None if e.owner is None else ids[e.owner],
                            e.fact,
                            e.seen or self.now,
                        )
                        for e in edges.values()
                    ],
                    self.run_number,
                )
            except graph.UnstorableText as refused:
                raise IngestError(self.source, str(refused)) from None

    async def finish(self) -> None:
        await self.write_batch()
        for edge in self.matched:
            start = await self.resolve(edge.start, edge, "start")
            end = await self.resolve(edge.end, edge, "end")
            await self.edge(EdgeRecord(start, end, edge.kind, None, properties=edge.properties))
        await self.write_batch()
        if self.stated_before:
            await graph.delete_stale_facts(self.conn, self.run_number)
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
