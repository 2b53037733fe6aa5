"""The graph a Cypher query runs on: the path index's adjacency (graph/path_index.py), which
every traversal walks, and a table of every node's labels and properties, made once per
version of the graph and kept by the process (`NodeTables`), so that one version of the
graph serves both paths and queries.

Labels are each node's kinds as ingest stored them (`Base` on AD objects, `AZBase` on Azure
ones) and `Tag_Tier_Zero` on the nodes of a domain's tier zero, whose `system_tags` property
is then `admin_tier_0`, as the reference's. Every node's `objectid` and `name` are its
columns', and `lastseen` is when it was last written.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from graphsvc.store import cypher as store
from graphsvc.store import paths as store_paths
from graphsvc.store.db import Connection

if TYPE_CHECKING:
    from graphsvc.graph.path_index import GraphIndex
    from graphsvc.graph.paths import PathIndex
    from graphsvc.store.paths import GraphVersion

TIER_ZERO_LABEL = "Tag_Tier_Zero"
TIER_ZERO_TAG = "admin_tier_0"


def iso_time(moment: datetime) -> str:
    """RFC 3339 with microseconds, as the other answers write times."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class NodeTable:
    """Every node of one version of the graph, by id (ids are positions; a position no node
    has holds None). Properties are kept as the store's JSON text and parsed when a query
    first reads them."""

    version: GraphVersion
    ids: npt.NDArray[np.int64]  # every node's id, ascending
    object_ids: list[str | None]
    names: list[str | None]
    label_sets: list[tuple[str, ...]]  # the distinct sets of labels
    label_set_of: npt.NDArray[np.int32]  # by id: its set's position (-1: no node)
    by_label: dict[str, npt.NDArray[np.int64]]  # label -> its nodes' ids, ascending
    texts: list[str | None]  # properties as JSON text
    updated: list[datetime | None]
    tier_zero: npt.NDArray[np.bool_]
    parsed: dict[int, dict[str, Any]] = field(default_factory=dict)
    columns: dict[str, Column] = field(default_factory=dict)

    def exists(self, node: int) -> bool:
        return 0 <= node < len(self.names) and self.names[node] is not None

    def labels(self, node: int) -> tuple[str, ...]:
        return self.label_sets[int(self.label_set_of[node])]

    def properties(self, node: int) -> dict[str, Any]:
        """Every property of a node, as Cypher reads them (the dict is shared: not to be
        changed)."""
        found = self.parsed.get(node)
        if found is None:
            text = self.texts[node]
            found = json.loads(text) if text else {}
            if not isinstance(found, dict):
                found = {}
            found["objectid"] = self.object_ids[node]
            found["name"] = self.names[node]
            moment = self.updated[node]
            if moment is not None:
                found["lastseen"] = iso_time(moment)
            if self.tier_zero[node]:
                found["system_tags"] = TIER_ZERO_TAG
            self.parsed[node] = found
        return found

    def column(self, key: str) -> Column:
        """One property of every node, as an array by id, made when a query first filters
        on it (one pass over the properties' JSON, kept with the table)."""
        found = self.columns.get(key)
        if found is not None:
            return found
        size = len(self.names)
        present = np.zeros(size, dtype=bool)
        held: list[Any] = [None] * size
        kinds: set[str] = set()
        for node in self.ids.tolist():
            parsed = self.parsed.get(node)
            if parsed is None and key not in SPECIAL_KEYS:
                text = self.texts[node]
                loaded = json.loads(text) if text else {}
                value = loaded.get(key) if isinstance(loaded, dict) else None
            else:
                value = self.properties(node).get(key)
            if value is None:
                continue
            present[node] = True
            held[node] = value
            kinds.add(value_kind(value))
        kind = kinds.pop() if len(kinds) == 1 else ("absent" if not kinds else "mixed")
        if kind == "number" and any(abs(v) > EXACT_FLOAT for v in held if v is not None):
            kind = "mixed"  # past 2**53 a float is not the integer: tested node by node
        values: npt.NDArray[Any]
        if kind == "number":
            values = np.array([0 if v is None else v for v in held], dtype=np.float64)
        elif kind == "bool":
            values = np.array([bool(v) for v in held], dtype=bool)
        else:
            values = np.array(held, dtype=object)
        found = Column(kind, values, present)
        self.columns[key] = found
        return found


EXACT_FLOAT = 2**53
# Properties the table makes itself (graph.py's docstring), not read from the JSON text.
SPECIAL_KEYS = frozenset({"objectid", "name", "lastseen", "system_tags"})


def value_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "other"


@dataclass(frozen=True)
class Column:
    """A property of every node: `kind` is the type every value has ("bool", "number",
    "string"), or "mixed" (filters on it are tested node by node), or "absent" (no node has
    it); `values[id]` is a node's value where `present[id]`."""

    kind: str
    values: npt.NDArray[Any]
    present: npt.NDArray[np.bool_]


@dataclass
class QueryGraph:
    """What the executor reads: the index's adjacency and kinds, the node table, and the
    relationships' properties when the query reads any."""

    index: GraphIndex
    nodes: NodeTable
    kind_names: dict[int, str]
    edge_properties: dict[tuple[int, int, int], dict[str, Any]] | None = None

    def kind_id(self, name: str) -> int | None:
        return self.index.kind_ids.get(name)

    def out_edges(self, node: int) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """The far ends and kinds of the node's outgoing relationships."""
        return adjacent(self.index.forward, node)

    def in_edges(self, node: int) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        return adjacent(self.index.backward, node)

    def rel_properties(self, start: int, kind: int, end: int) -> dict[str, Any]:
        if self.edge_properties is None:
            return {}
        return self.edge_properties.get((start, kind, end), {})


def adjacent(adjacency: Any, node: int) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    if node + 1 >= adjacency.offsets.size:  # added after the index was built: no edges
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    low, high = int(adjacency.offsets[node]), int(adjacency.offsets[node + 1])
    return adjacency.others[low:high], adjacency.kinds[low:high]


class NodeTables:
    """The process's node table, made again when the path index's graph changes."""

    def __init__(self) -> None:
        self.current: NodeTable | None = None
        self.edge_properties: tuple[GraphVersion, dict[tuple[int, int, int], Any]] | None = None
        self.lock = asyncio.Lock()

    async def read(
        self, conn: Connection, paths: PathIndex, with_edge_properties: bool
    ) -> QueryGraph:
        """The graph as it is now: the index and the table of one version (read again,
        once, if an ingest committed between the two)."""
        for _ in range(3):
            index = await paths.read(conn)
            async with self.lock:
                if self.current is None or self.current.version != index.version:
                    self.current = await load_node_table(conn, index.version, index.size)
                table = self.current
                edges = None
                if with_edge_properties:
                    if self.edge_properties is None or self.edge_properties[0] != index.version:
                        self.edge_properties = (index.version, await load_edge_properties(conn))
                    edges = self.edge_properties[1]
            if table.version == await store_paths.read_graph_version(conn):
                kind_names = {v: k for k, v in index.kind_ids.items()}
                return QueryGraph(index, table, kind_names, edges)
        raise RuntimeError("the graph kept changing while a query read it")


async def load_node_table(conn: Connection, version: GraphVersion, size: int) -> NodeTable:
    ids: list[int] = []
    object_ids: list[str | None] = [None] * size
    names: list[str | None] = [None] * size
    texts: list[str | None] = [None] * size
    updated: list[datetime | None] = [None] * size
    tier_zero = np.zeros(size, dtype=bool)
    label_set_of = np.full(size, -1, dtype=np.int32)
    label_sets: dict[tuple[str, ...], int] = {}
    members: dict[str, list[int]] = {}
    async for rows in store.read_node_chunks(conn):
        for node, object_id, name, kinds, properties, moment, zero in rows:
            if node >= size:  # written after the index was read: the next version has it
                continue
            labels = tuple(json.loads(kinds))
            if zero:
                labels = (*labels, TIER_ZERO_LABEL)
                tier_zero[node] = True
            position = label_sets.setdefault(labels, len(label_sets))
            label_set_of[node] = position
            for label in labels:
                members.setdefault(label, []).append(node)
            ids.append(node)
            object_ids[node], names[node], texts[node] = object_id, name, properties
            updated[node] = moment
    return NodeTable(
        version,
        np.array(ids, dtype=np.int64),
        object_ids,
        names,
        list(label_sets),
        label_set_of,
        {label: np.array(nodes, dtype=np.int64) for label, nodes in members.items()},
        texts,
        updated,
        tier_zero,
    )


async def load_edge_properties(conn: Connection) -> dict[tuple[int, int, int], Any]:
    found: dict[tuple[int, int, int], Any] = {}
    async for rows in store.read_edge_property_chunks(conn):
        for _, start, end, kind, properties, moment in rows:
            parsed = json.loads(properties) if properties else {}
            if not isinstance(parsed, dict):
                parsed = {}
            parsed["lastseen"] = iso_time(moment)
            found[(start, kind, end)] = parsed
    return found
