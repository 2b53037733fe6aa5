"""The graph a Cypher query runs on: the path index's adjacency (graph/path_index.py), which
every traversal walks, and a table of every node's labels and properties, made once per
version of the graph and kept by the process (`NodeTables`), so that one version of the
graph serves both paths and queries.

Labels are each node's kinds as ingest stored them (`Base` on AD objects, `AZBase` on Azure
ones) and the label of each tag it is a member of (graphsvc/tags: `Tag_Tier_Zero`,
`Tag_Owned`...); its `system_tags` property holds `admin_tier_0` in Tier Zero and `owned` when
owned, as the reference's older tagging wrote them. Every node's `objectid` and `name` are its
columns', and `lastseen` is when it was last written. Tags change without a new version of
the graph (an analyst marks a node owned): the table follows them by the version of the
store's tags, read once each time the store's data version moves.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import numpy.typing as npt

from graphsvc.cypher.values import equals
from graphsvc.graph.path_index import node_dtype
from graphsvc.store import cypher as store
from graphsvc.store import paths as store_paths
from graphsvc.store import tags as store_tags
from graphsvc.store.db import Connection
from graphsvc.store.tags import OWNED_TAG_ID, TIER_ZERO_TAG_ID, tag_kind

if TYPE_CHECKING:
    from graphsvc.graph.path_index import GraphIndex
    from graphsvc.graph.paths import PathIndex
    from graphsvc.store.paths import GraphVersion

OBJECT_IDS_KEPT = 100_000  # object ids a node table keeps found (about 10 MB at most)


def iso_time(moment: datetime) -> str:
    """RFC 3339 with microseconds, as the other answers write times."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class NodeTable:
    """Every node of one version of the graph, by id (ids are positions): its labels, its
    tags and when it was last written, and a column for each property a query has read. A
    property is held only once a query reads it: its column is read from the store (one
    statement a chunk of nodes) before that query runs, and kept with the table.
    The whole property maps (`properties(n)`, `keys(n)`, `n[key]`, `n {.*}`) are read, once
    a version, by the first query that needs them."""

    version: GraphVersion
    ids: npt.NDArray[np.signedinteger[Any]]  # every node's id, ascending
    label_sets: list[tuple[str, ...]]  # the distinct sets of labels
    label_set_of: npt.NDArray[np.int32]  # by id: its set's position (-1: no node)
    by_label: dict[str, npt.NDArray[np.signedinteger[Any]]]  # label -> its nodes' ids, ascending
    updated: npt.NDArray[np.float64]  # by id: when last written, epoch seconds (NaN: never)
    kind_labels: KindLabels  # the labels of the nodes' kinds alone, which tags are added to
    tags: dict[int, tuple[int, ...]] = field(default_factory=dict)  # node -> its tags' ids
    tags_version: int = -1  # the store's (store/tags.py read_tags_version)
    tags_checked_at: int | None = None  # the data version the tags were last found current at
    columns: dict[str, Column] = field(default_factory=dict)
    texts: list[str | None] | None = None  # whole property maps as JSON text, once read
    parsed: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Object ids queries named as constants, found in the store: the node, or None.
    found_object_ids: dict[str, int | None] = field(default_factory=dict)

    async def object_ids(self, conn: Connection, wanted: frozenset[str]) -> dict[str, int]:
        """The nodes of the object ids a query names (those a node has), found in the store
        once a version: a query asked again with the same ids reads nothing (its statement
        was half of a one-hop query's time at 10,000 nodes)."""
        unknown = sorted(wanted - self.found_object_ids.keys())
        if unknown:
            found = await store.find_object_ids(conn, unknown)
            if len(self.found_object_ids) + len(unknown) > OBJECT_IDS_KEPT:
                self.found_object_ids.clear()
            for object_id in unknown:
                self.found_object_ids[object_id] = found.get(object_id)
        known = self.found_object_ids
        return {o: node for o in wanted if (node := known.get(o)) is not None}

    def exists(self, node: int) -> bool:
        return 0 <= node < self.label_set_of.size and self.label_set_of[node] >= 0

    def labels(self, node: int) -> tuple[str, ...]:
        return self.label_sets[int(self.label_set_of[node])]

    def value(self, node: int, key: str) -> Any:
        """A node's property, as Cypher reads it (None where absent): from its column, or for
        a key known only as the query runs (`n[key]`), from its whole map."""
        column = self.columns.get(key)
        return column.value(node) if column is not None else self.properties(node).get(key)

    def column(self, key: str) -> Column:
        """The column of `key`: read before the query ran, or (a key with a double quote,
        which the store's JSON paths cannot name) made from the whole maps, also before
        (`read_columns`)."""
        found = self.columns.get(key)
        if found is None:
            held: list[Any] = [None] * self.label_set_of.size
            for node in self.ids.tolist():
                held[node] = self.properties(node).get(key)
            present = np.array([v is not None for v in held], dtype=bool)
            kinds = {value_kind(v) for v in held if v is not None}
            found = self.columns[key] = Column.of(held, present, kinds)
        return found

    def properties(self, node: int) -> dict[str, Any]:
        """Every property of a node (the dict is shared: not to be changed). Only for a
        query that `needs_maps`: the table has read them for it."""
        found = self.parsed.get(node)
        if found is None:
            if self.texts is None:
                raise RuntimeError("a query read whole property maps it was not given")
            found = cypher_properties(
                self.texts[node],
                self.columns["objectid"].value(node),
                self.columns["name"].value(node),
                self.columns["lastseen"].value(node),
                self.system_tags(node),
            )
            self.parsed[node] = found
        return found

    def derived_column(self, key: str) -> Column:
        """A column the table makes without the store: `lastseen` from the times, and
        `system_tags` from the tags."""
        size = self.label_set_of.size
        held: list[Any] = [None] * size
        present = np.zeros(size, dtype=bool)
        if key == "lastseen":
            present = ~np.isnan(self.updated)
            for node in np.flatnonzero(present).tolist():
                held[node] = iso_time(datetime.fromtimestamp(float(self.updated[node]), UTC))
        else:
            for node in self.tags:
                held[node] = self.system_tags(node)
                present[node] = held[node] is not None
        return Column.of(held, present, {"string"} if present.any() else set())

    def system_tags(self, node: int) -> str | None:
        """`admin_tier_0` and `owned`, space-separated, as the node is in each (or None)."""
        return store_tags.system_tags(self.is_tier_zero(node), self.is_owned(node)) or None

    def is_tier_zero(self, node: int) -> bool:
        return TIER_ZERO_TAG_ID in self.tags.get(node, ())

    def is_owned(self, node: int) -> bool:
        return OWNED_TAG_ID in self.tags.get(node, ())

    def with_tags(self, version: int, members: Sequence[tuple[int, str, int]]) -> NodeTable:
        """This table with the tags' members (tag id, tag name, node) as they are at
        `version`: a table of its own, since queries may be reading this one in threads; it
        shares the columns but `system_tags`, which follows the tags."""
        kinds = self.kind_labels
        tags: dict[int, list[int]] = {}
        names: dict[int, str] = {}
        for tag_id, name, node in members:
            if 0 <= node < kinds.label_set_of.size and kinds.label_set_of[node] >= 0:
                tags.setdefault(node, []).append(tag_id)
                names[tag_id] = tag_kind(name)
        label_sets = list(kinds.label_sets)
        positions = {labels: at for at, labels in enumerate(label_sets)}
        label_set_of = kinds.label_set_of.copy()
        by_tag: dict[str, list[int]] = {}
        for node, tag_ids in tags.items():
            tag_ids.sort()
            tag_labels = tuple(names[t] for t in tag_ids)
            labels = (*kinds.label_sets[int(kinds.label_set_of[node])], *tag_labels)
            label_set_of[node] = positions.setdefault(labels, len(positions))
            if len(positions) > len(label_sets):
                label_sets.append(labels)
            for label in tag_labels:
                by_tag.setdefault(label, []).append(node)
        dtype = self.ids.dtype
        by_label = {**kinds.by_label}
        for label, nodes in by_tag.items():
            by_label[label] = np.array(sorted(nodes), dtype=dtype)
        columns = {k: v for k, v in self.columns.items() if k != "system_tags"}
        return replace(
            self,
            label_sets=label_sets,
            label_set_of=label_set_of,
            by_label=by_label,
            tags={node: tuple(ids) for node, ids in tags.items()},
            tags_version=version,
            columns=columns,
            parsed={},
        )


@dataclass(frozen=True)
class KindLabels:
    """The nodes' labels from their kinds alone (NodeTable's fields of the same names)."""

    label_sets: list[tuple[str, ...]]
    label_set_of: npt.NDArray[np.int32]
    by_label: dict[str, npt.NDArray[np.signedinteger[Any]]]


def cypher_properties(
    text: str | None,
    object_id: str | None,
    name: str | None,
    lastseen: str | None,
    tags: str | None,
) -> dict[str, Any]:
    """A node's properties as queries read them and answers show them: its stored JSON's,
    with `objectid`, `name`, `lastseen` and `system_tags` the table's (module docstring)."""
    parsed = json.loads(text) if text else {}
    found: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    for key, value in (
        ("objectid", object_id),
        ("name", name),
        ("lastseen", lastseen),
        ("system_tags", tags),
    ):
        found.pop(key, None)
        if value is not None:
            found[key] = value
    return found


EXACT_FLOAT = 2**53
COLUMN_KEYS = frozenset({"objectid", "name"})  # properties the store holds as columns
# Properties the table makes itself (graph.py's docstring), not read from the JSON text.
SPECIAL_KEYS = frozenset({"objectid", "name", "lastseen", "system_tags"})
WHOLE_MAPS = "\x00properties"  # the store's column of whole property maps (store/cypher.py)


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
    it); a node's value is held where `present[id]`. `values` by kind: booleans; floats (so
    that filters compare in one numpy pass), with which of them were integers; for strings,
    the UTF-8 bytes of every node's value end to end, node `id`'s ending at `ends[id]` (a
    name took about 80 bytes a node as a Python string, 26 so); else the values as objects.
    """

    kind: str
    values: npt.NDArray[Any]
    present: npt.NDArray[np.bool_]
    integral: npt.NDArray[np.bool_] | None = None
    ends: npt.NDArray[np.signedinteger[Any]] | None = None

    @classmethod
    def of(cls, held: list[Any], present: npt.NDArray[np.bool_], kinds: set[str]) -> Column:
        kind = kinds.pop() if len(kinds) == 1 else ("absent" if not kinds else "mixed")
        if kind == "number" and any(abs(v) > EXACT_FLOAT for v in held if v is not None):
            kind = "mixed"  # past 2**53 a float is not the integer: kept exact, node by node
        if kind == "number":
            values = np.array([0 if v is None else v for v in held], dtype=np.float64)
            integral = np.array([isinstance(v, int) for v in held], dtype=bool)
            return cls(kind, values, present, integral)
        if kind == "bool":
            return cls(kind, np.array([bool(v) for v in held], dtype=bool), present)
        if kind == "string":
            encoded = [b"" if v is None else v.encode("utf-8", "surrogatepass") for v in held]
            ends = np.cumsum([len(b) for b in encoded], dtype=np.int64)
            if ends.size and ends[-1] < 2**31:
                ends = ends.astype(np.int32)
            return cls(kind, np.frombuffer(b"".join(encoded), dtype=np.uint8), present, None, ends)
        return cls(kind, np.array(held, dtype=object), present)

    def value(self, node: int) -> Any:
        if not self.present[node]:
            return None
        if self.kind == "bool":
            return bool(self.values[node])
        if self.kind == "number":
            assert self.integral is not None
            number = float(self.values[node])
            return int(number) if self.integral[node] else number
        if self.kind == "string":
            assert self.ends is not None
            start = int(self.ends[node - 1]) if node else 0
            return (
                self.values[start : int(self.ends[node])].tobytes().decode("utf-8", "surrogatepass")
            )
        return self.values[node]

    def spans(self, nodes: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """Where each node's bytes start and end in a string column's `values`."""
        assert self.ends is not None
        ends = self.ends[nodes].astype(np.int64)
        return np.where(nodes > 0, self.ends[np.maximum(nodes - 1, 0)], 0).astype(np.int64), ends

    def values_of(self, nodes: npt.NDArray[Any]) -> list[Any]:
        """Many nodes' values at once: a string column's decoded in one loop over its bytes
        (4,000 names: 1.1 ms, against 2.5 node by node)."""
        if self.kind != "string":
            return [self.value(node) for node in nodes.tolist()]
        starts, ends = self.spans(nodes)
        text = memoryview(self.values.data)
        return [
            str(text[start:end], "utf-8", "surrogatepass") if present else None
            for start, end, present in zip(
                starts.tolist(), ends.tolist(), self.present[nodes].tolist(), strict=True
            )
        ]

    def has_affix(self, op: str, text: str, nodes: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
        """Whether each node's string STARTS WITH or ENDS WITH (`op`) `text`, in numpy
        passes over the bytes: UTF-8 is self-synchronizing, so bytes that begin or end a
        value's begin or end it at a code point. Nodes must hold a string. (Tier Zero's
        `objectid ENDS WITH` seeds over the 1 GB collection's 260,000 users took 0.84 s
        node by node.)"""
        wanted = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
        starts, ends = self.spans(nodes)
        found: npt.NDArray[np.bool_] = ends - starts >= wanted.size
        if wanted.size == 0:
            return found
        first = (starts if op == "starts with" else ends - wanted.size)[found]
        matched = np.zeros(first.size, dtype=bool)
        step = max(1, 4_000_000 // wanted.size)  # about 32 MB of positions a chunk
        for low in range(0, first.size, step):
            at = first[low : low + step, None] + np.arange(wanted.size)
            matched[low : low + step] = (self.values[at] == wanted).all(axis=1)
        found[found] = matched
        return found

    def compare_strings(self, op: str, text: str, nodes: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
        """Whether each node's string compared with `text` by `op` (=, <>, <, >, <=, >=) is
        true, in one numpy pass: UTF-8 bytes order as the code points do, which is how
        Cypher (and Python) order strings. Nodes must hold a string."""
        wanted = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
        starts, ends = self.spans(nodes)
        lengths = ends - starts
        order = np.where(lengths == wanted.size, 0, np.where(lengths < wanted.size, -1, 1))
        # Only as many bytes as the longest value holds are compared: past them, the lengths
        # above decide (a constant of a megabyte costs no more than a name).
        width = min(wanted.size, int(lengths.max()) if lengths.size else 0)
        wanted = wanted[:width]
        # Chunks of nodes whose first `width` bytes are compared at once, a byte past a
        # value's end as -1 (below every byte: a prefix orders first); about 8 MB a chunk.
        step = max(1, 4_000_000 // max(width, 1))
        positions = np.arange(width)
        for low in range(0, nodes.size, step):
            if width == 0 or self.values.size == 0:
                break
            part = slice(low, low + step)
            inside = positions < lengths[part, None]
            gathered = self.values[np.minimum(starts[part, None] + positions, self.values.size - 1)]
            head = np.where(inside, gathered.astype(np.int16), -1)
            differs = head != wanted
            found = differs.any(axis=1)
            first = differs.argmax(axis=1)
            below = head[np.arange(first.size), first] < wanted[first]
            order[part] = np.where(found, np.where(below, -1, 1), order[part])
        compared: npt.NDArray[np.bool_] = {
            "=": order == 0,
            "<>": order != 0,
            "<": order < 0,
            ">": order > 0,
            "<=": order <= 0,
            ">=": order >= 0,
        }[op]
        return compared


class ColumnMaker:
    """A column made from the store's (id, value) rows, chunk by chunk: for a property,
    each value as JSON text; the object id and the name as text."""

    def __init__(self, key: str, size: int) -> None:
        self.size, self.parse = size, key not in COLUMN_KEYS
        self.present = np.zeros(size, dtype=bool)
        self.held: list[Any] = [None] * size
        self.kinds: set[str] = set()

    def add(self, rows: list[Any]) -> None:
        present, held, kinds = self.present, self.held, self.kinds
        for node, value in decoded(rows) if self.parse else rows:
            if value is None or node >= self.size:  # past size: the next version has it
                continue
            present[node] = True
            held[node] = value
            kinds.add(value_kind(value))

    def made(self) -> Column:
        return Column.of(self.held, self.present, self.kinds)


def decoded(rows: list[Any]) -> Iterable[tuple[int, Any]]:
    """(id, JSON text) rows as (id, value), where a value is present. A chunk's texts are
    read as one JSON array, in one msgspec call: a property of the 1 GB collection's 437,000
    nodes took 0.08 to 0.13 s so, against 0.30 to 0.36 s through json.loads a text. Where
    msgspec refuses a text (a lone surrogate's escape, a number past a double's range, which
    json.loads reads), the chunk is read a text at a time."""
    present = [(node, text) for node, text in rows if text is not None]
    try:
        values = msgspec.json.decode(f"[{','.join(text for _, text in present)}]")
    except msgspec.DecodeError:
        values = [json.loads(text) for _, text in present]
    return zip((node for node, _ in present), values, strict=True)


@dataclass(frozen=True)
class Needs:
    """What a query reads of the nodes beyond their labels (service.query_needs): the
    properties by key, whether whole property maps, and the object ids its patterns and
    WHERE name as constants (found in the store, exactly, before it runs)."""

    keys: frozenset[str] = frozenset()
    maps: bool = False
    object_ids: frozenset[str] = frozenset()
    relationship_properties: bool = False


@dataclass
class QueryGraph:
    """What the executor reads: the index's adjacency and kinds, the node table, and the
    relationships' properties when the query reads any."""

    index: GraphIndex
    nodes: NodeTable
    kind_names: dict[int, str]
    edge_properties: dict[tuple[int, int, int], dict[str, Any]] | None = None
    object_ids: dict[str, int] = field(default_factory=dict)  # Needs.object_ids found

    def kind_id(self, name: str) -> int | None:
        return self.index.kind_ids.get(name)

    def node_of(self, object_id: str) -> int | None:
        """The node with this object id: one the query names as a constant was found in the
        store; any other is looked up in the index's hashes and checked in the objectid
        column (which the query then reads)."""
        if object_id in self.object_ids:
            return self.object_ids[object_id]
        node = self.index.object_ids.find(object_id)
        if node is None or not self.nodes.exists(node):
            return None
        return node if self.nodes.value(node, "objectid") == object_id else None

    def has_object_id(self, node: int, object_id: Any) -> bool:
        if isinstance(object_id, str) and object_id in self.object_ids:
            return self.object_ids[object_id] == node
        return equals(self.nodes.value(node, "objectid"), object_id) is True

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

    async def read(self, conn: Connection, paths: PathIndex, needs: Needs) -> QueryGraph:
        """The graph as it is now, with what the query needs of it: the index and the table
        of one version (read again, once, if an ingest committed while the table read the
        store)."""
        for _ in range(3):
            index = await paths.read(conn)
            async with self.lock:
                read_store = self.current is None or self.current.version != index.version
                if read_store:
                    self.current = await load_node_table(conn, index.version, index.size)
                assert self.current is not None
                table = self.current = await current_tags(conn, self.current, paths)
                read_store |= table.tags_checked_at is None
                read_store |= await read_columns(conn, table, needs)
                edges = None
                if needs.relationship_properties:
                    if self.edge_properties is None or self.edge_properties[0] != index.version:
                        self.edge_properties = (index.version, await load_edge_properties(conn))
                        read_store = True
                    edges = self.edge_properties[1]
            # Nothing read from the store since the index's version: nothing newer to fear
            # (the version's statement was most of a small query's time).
            if not read_store or table.version == await store_paths.read_graph_version(conn):
                kind_names = {v: k for k, v in index.kind_ids.items()}
                found = await table.object_ids(conn, needs.object_ids) if needs.object_ids else {}
                return QueryGraph(index, table, kind_names, edges, found)
        raise RuntimeError("the graph kept changing while a query read it")


async def current_tags(conn: Connection, table: NodeTable, paths: PathIndex) -> NodeTable:
    """The table with the tags as they are now: read again only when the store's data
    version has moved since they were last found current (and then only if the tags'
    version moved too). The table answered was found current at the data version known
    now, or (unknown, or no database: a CLI command) not at all."""
    data_version = paths.db.data_version() if paths.db is not None else None
    if data_version is not None and data_version == table.tags_checked_at:
        return table
    version = await store_tags.read_tags_version(conn)
    if version != table.tags_version:
        table = table.with_tags(version, await store_tags.read_all_members(conn))
    table.tags_checked_at = data_version
    return table


class TransactionGraph:
    """The graph as the caller's transaction sees it, for the Cypher seeds of tags at the
    end of an ingest, whose graph no other connection sees yet: built for it at the first
    query, never kept by the process. `edge_kinds`: the only relationship kinds its queries
    follow (None: any), so that a graph of a million nodes is not read whole for seeds that
    mostly match nodes alone."""

    def __init__(self, edge_kinds: Sequence[str] | None = None) -> None:
        self.edge_kinds = edge_kinds
        self.index: GraphIndex | None = None
        self.table: NodeTable | None = None

    async def read(self, conn: Connection, needs: Needs) -> QueryGraph:
        from graphsvc.graph.path_index import build_index

        if self.index is None or self.table is None:
            version = await store_paths.read_graph_version(conn)
            self.index = await build_index(conn, version, self.edge_kinds)
            table = await load_node_table(conn, version, self.index.size)
            version_of_tags = await store_tags.read_tags_version(conn)
            self.table = table.with_tags(version_of_tags, await store_tags.read_all_members(conn))
        await read_columns(conn, self.table, needs)
        edges = await load_edge_properties(conn) if needs.relationship_properties else None
        found = await self.table.object_ids(conn, needs.object_ids) if needs.object_ids else {}
        kind_names = {v: k for k, v in self.index.kind_ids.items()}
        return QueryGraph(self.index, self.table, kind_names, edges, found)


async def read_columns(conn: Connection, table: NodeTable, needs: Needs) -> bool:
    """The columns the query reads that the table lacks, and the whole maps if it reads
    them (a key with a double quote, which SQLite's JSON paths cannot name, is read from
    the maps). True: it read the store."""
    read_store = False
    maps = needs.maps or any('"' in key for key in needs.keys - COLUMN_KEYS)
    wanted = needs.keys | (SPECIAL_KEYS if maps else frozenset())
    for key in sorted(wanted - table.columns.keys()):
        if key in SPECIAL_KEYS - COLUMN_KEYS:
            table.columns[key] = table.derived_column(key)
            continue
        if '"' in key and key not in COLUMN_KEYS:
            continue
        maker = ColumnMaker(key, table.label_set_of.size)
        read_store = True
        async for rows in store.read_node_column(conn, key):
            maker.add(rows)
        table.columns[key] = maker.made()
    if maps and table.texts is None:
        texts: list[str | None] = [None] * table.label_set_of.size
        async for rows in store.read_node_column(conn, WHOLE_MAPS):
            for node, text in rows:
                if node < len(texts):
                    texts[node] = text
        table.texts = texts
        read_store = True
    for key in needs.keys - COLUMN_KEYS:
        if '"' in key:
            table.column(key)
    return read_store


async def load_node_table(conn: Connection, version: GraphVersion, size: int) -> NodeTable:
    """The table without tags (`with_tags` adds them)."""
    ids: list[int] = []
    updated = np.full(size, np.nan, dtype=np.float64)
    label_set_of = np.full(size, -1, dtype=np.int32)
    label_sets: dict[tuple[str, ...], int] = {}
    parsed_kinds: dict[str, tuple[str, ...]] = {}  # a few distinct texts for a million nodes
    members: dict[str, list[int]] = {}
    async for rows in store.read_node_chunks(conn):
        for node, kinds, moment in rows:
            if node >= size:  # written after the index was read: the next version has it
                continue
            labels = parsed_kinds.get(kinds)
            if labels is None:
                labels = parsed_kinds[kinds] = tuple(json.loads(kinds))
            position = label_sets.setdefault(labels, len(label_sets))
            label_set_of[node] = position
            for label in labels:
                members.setdefault(label, []).append(node)
            ids.append(node)
            if moment is not None:
                if moment.tzinfo is None:
                    moment = moment.replace(tzinfo=UTC)
                updated[node] = moment.timestamp()
    by_label = {label: np.array(nodes, dtype=node_dtype(size)) for label, nodes in members.items()}
    return NodeTable(
        version,
        np.array(ids, dtype=node_dtype(size)),  # 4 bytes a node below 2**31 nodes
        list(label_sets),
        label_set_of,
        by_label,
        updated,
        KindLabels(list(label_sets), label_set_of, by_label),
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
