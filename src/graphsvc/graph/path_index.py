"""The in-memory index shortest paths are searched on (graph/paths.py): every edge twice,
as compressed adjacency arrays (numpy), by start to search forward and by end to walk back
from the target along the shortest paths, and every node's object id, hashed, so that a
request's ends are found without asking the store. Node ids are the store's ids, used as
array positions; kinds are filtered at search time by a mask over kind ids. Imported when
the first search needs it, so that a process that never searches does not load numpy.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from graphsvc.store import paths
from graphsvc.store.db import Connection
from graphsvc.store.paths import GraphVersion

Array = npt.NDArray[np.int64]
HASH = np.dtype("<u8")  # an object id's hash (object_id_digest)


@dataclass(frozen=True)
class Adjacency:
    """One direction of the graph: node `i`'s edges are `offsets[i]:offsets[i + 1]` of
    `others` (the node at the far end) and `kinds` (the edge's kind id)."""

    offsets: Array
    others: npt.NDArray[np.signedinteger[Any]]
    kinds: npt.NDArray[np.signedinteger[Any]]

    @classmethod
    def build(
        cls,
        near: npt.NDArray[Any],
        far: npt.NDArray[Any],
        kinds: npt.NDArray[np.signedinteger[Any]],
        size: int,
    ) -> Adjacency:
        """From parallel columns of the edges' near ends, far ends and kinds (the far ends and
        kinds kept in the columns' types)."""
        order = np.argsort(near, kind="stable")
        offsets = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(np.bincount(near, minlength=size), out=offsets[1:])
        return cls(offsets, far[order], kinds[order])

    def step(self, nodes: Array) -> tuple[Array, Array, Array]:
        """Every edge of `nodes`: (the node it leaves from, the node at its far end, kind)."""
        starts, ends = self.offsets[nodes], self.offsets[nodes + 1]
        counts = ends - starts
        total = int(counts.sum())
        if total == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        # Positions starts[i] .. ends[i] - 1 for every i, without a Python loop.
        positions = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(total)
        return (
            np.repeat(nodes, counts),
            self.others[positions].astype(np.int64),
            self.kinds[positions].astype(np.int64),
        )


def object_id_digest(object_id: str) -> bytes:
    """8 bytes of the object id's BLAKE2b: the same in every process (unlike Python's
    `hash`), read as one little-endian uint64."""
    return hashlib.blake2b(object_id.encode(), digest_size=8).digest()


@dataclass(frozen=True)
class ObjectIds:
    """The nodes by object id: the hashes of their object ids, sorted, and the node of each.

    12 bytes a node, where a SID alone is 45. Two object ids can share a hash: `find` gives
    a node whose object id has the asked one's hash, which its caller confirms
    (graph/paths.py)."""

    hashes: npt.NDArray[np.uint64]
    nodes: npt.NDArray[np.signedinteger[Any]]

    @classmethod
    def build(cls, hashes: npt.NDArray[np.uint64], nodes: npt.NDArray[Any]) -> ObjectIds:
        order = np.argsort(hashes, kind="stable")
        return cls(hashes[order], nodes[order])

    def find(self, object_id: str) -> int | None:
        """The node whose object id hashes as `object_id`; None: no node has that object id."""
        # A numpy scalar: a Python int past 2**63 made searchsorted convert the whole array
        # (1.1 ms a search at a million nodes, against 3 us).
        wanted = np.frombuffer(object_id_digest(object_id), dtype=HASH)[0]
        at = int(np.searchsorted(self.hashes, wanted))
        if at < self.hashes.size and self.hashes[at] == wanted:
            return int(self.nodes[at])
        return None


@dataclass(frozen=True)
class GraphIndex:
    version: GraphVersion
    size: int  # node ids are below this
    forward: Adjacency
    backward: Adjacency
    kind_ids: dict[str, int]
    principals: npt.NDArray[np.bool_]  # the collected users, computers and groups
    object_ids: ObjectIds

    def kind_mask(self, kinds: Sequence[str]) -> npt.NDArray[np.bool_]:
        mask = np.zeros(max(self.kind_ids.values(), default=0) + 1, dtype=bool)
        for kind in kinds:
            if kind in self.kind_ids:
                mask[self.kind_ids[kind]] = True
        return mask

    def search(
        self, start: int, end: int, allowed: npt.NDArray[np.bool_]
    ) -> list[tuple[int, int, int]]:
        """The edges (start, end, kind id) of every shortest path from `start` to `end` over
        kinds `allowed`; empty when there is none.

        A search from both ends, one whole level at a time on the side with the smaller
        frontier, until they meet: a search from the start alone visited most of the graph
        within the path's length (10.8 ms a path at 100,000 nodes, bench/paths.py). The
        meeting gives the length; the paths are then walked from the middle layer back to
        the start and on to the end."""
        if start == end:
            return []
        from_start = np.full(self.size, -1, dtype=np.int32)
        to_end = np.full(self.size, -1, dtype=np.int32)
        from_start[start] = to_end[end] = 0
        ahead = np.array([start], dtype=np.int64)
        behind = np.array([end], dtype=np.int64)
        forward_level = backward_level = 0
        length = -1
        while ahead.size and behind.size:
            if ahead.size <= behind.size:
                forward_level += 1
                _, reached, kinds = self.forward.step(ahead)
                reached = reached[allowed[kinds]]
                ahead = np.unique(reached[from_start[reached] < 0])
                from_start[ahead] = forward_level
                met = ahead[to_end[ahead] >= 0]
            else:
                backward_level += 1
                _, reached, kinds = self.backward.step(behind)
                reached = reached[allowed[kinds]]
                behind = np.unique(reached[to_end[reached] < 0])
                to_end[behind] = backward_level
                met = behind[from_start[behind] >= 0]
            if met.size:
                length = int((from_start[met] + to_end[met]).min())
                break
        if length < 0:
            return []
        # A layer where both distances are known (the levels searched add up to the length).
        middle = min(forward_level, length)
        layer = np.flatnonzero((from_start == middle) & (to_end == length - middle))
        edges: list[tuple[int, int, int]] = []
        back = layer
        for depth in range(middle, 0, -1):
            targets, sources, kinds = self.backward.step(back)
            keep = allowed[kinds] & (from_start[sources] == depth - 1)
            sources, targets, kinds = sources[keep], targets[keep], kinds[keep]
            edges += zip(sources.tolist(), targets.tolist(), kinds.tolist(), strict=True)
            back = np.unique(sources)
        on = layer
        for remaining in range(length - middle, 0, -1):
            sources, targets, kinds = self.forward.step(on)
            keep = allowed[kinds] & (to_end[targets] == remaining - 1)
            sources, targets, kinds = sources[keep], targets[keep], kinds[keep]
            edges += zip(sources.tolist(), targets.tolist(), kinds.tolist(), strict=True)
            on = np.unique(targets)
        return edges

    def distances_to(
        self, targets: Array, allowed: npt.NDArray[np.bool_]
    ) -> tuple[npt.NDArray[np.int32], Array, Array]:
        """For every node, the length of its shortest path to any of `targets` over kinds
        `allowed` (-1 without one), and the node and kind of one first step of such a path
        (-1 for the targets and the nodes without a path): a search back from all targets
        at once."""
        distance = np.full(self.size, -1, dtype=np.int32)
        hop = np.full(self.size, -1, dtype=np.int64)
        hop_kind = np.full(self.size, -1, dtype=np.int64)
        frontier = np.unique(targets)
        distance[frontier] = 0
        level = 0
        while frontier.size:
            level += 1
            ends, starts, kinds = self.backward.step(frontier)
            keep = allowed[kinds] & (distance[starts] < 0)
            starts, ends, kinds = starts[keep], ends[keep], kinds[keep]
            reached, first = np.unique(starts, return_index=True)
            distance[reached] = level
            hop[reached] = ends[first]
            hop_kind[reached] = kinds[first]
            frontier = reached
        return distance, hop, hop_kind

    def paths_between(
        self, starts: Sequence[int], targets: Sequence[int], allowed: npt.NDArray[np.bool_],
        limit: int,
    ) -> SetPaths:  # fmt: skip
        """Shortest paths from each start to the targets nearest it: one search back from
        all targets at once gives every node's distance, then each start's paths are walked
        down the distances, the starts nearest first (then by id), until `limit` paths. A
        start that is a target has none. Two edges of different kinds between the same
        nodes make two paths, as in Cypher."""
        ends = np.unique(np.array(targets, dtype=np.int64))
        distance, _, _ = self.distances_to(ends, allowed)
        firsts = np.unique(np.array(starts, dtype=np.int64))
        firsts = firsts[firsts < self.size]
        reaching = firsts[distance[firsts] > 0]
        reaching = reaching[np.lexsort((reaching, distance[reaching]))]
        found: list[list[tuple[int, int, int]]] = []
        for start in reaching.tolist():
            trail: list[tuple[int, int, int]] = []
            # Depth first, each entry a node, the edge that led to it, and its depth.
            stack: list[tuple[int, tuple[int, int, int] | None, int]] = [(start, None, 0)]
            while stack:
                node, edge, depth = stack.pop()
                if edge is not None:
                    del trail[depth - 1 :]
                    trail.append(edge)
                if distance[node] == 0:
                    if len(found) == limit:
                        return SetPaths(found, int(reaching.size), True)
                    found.append(list(trail))
                    continue
                _, ahead, kinds = self.forward.step(np.array([node], dtype=np.int64))
                keep = allowed[kinds] & (distance[ahead] == distance[node] - 1)
                steps = sorted(zip(ahead[keep].tolist(), kinds[keep].tolist(), strict=True))
                stack += [(n, (node, n, k), depth + 1) for n, k in reversed(steps)]
        return SetPaths(found, int(reaching.size), False)

    def rank_exposure(
        self,
        targets: Sequence[int],
        allowed: npt.NDArray[np.bool_],
        enabled_users: Sequence[int],
        skip: int,
        limit: int,
    ) -> Exposure:
        """The principals with a path to `targets` (not themselves targets), by the length
        of their shortest path then id: their number, one page of them, and how many of
        `enabled_users` are among them."""
        distance, hop, hop_kind = self.distances_to(np.array(targets, dtype=np.int64), allowed)
        exposed = np.flatnonzero((distance > 0) & self.principals)
        exposed = exposed[np.lexsort((exposed, distance[exposed]))]
        page = exposed[skip : skip + limit]
        users = np.array(enabled_users, dtype=np.int64)
        return Exposure(
            int(exposed.size),
            [ExposedNode(int(n), int(distance[n]), int(hop[n]), int(hop_kind[n])) for n in page],
            int(users.size),
            int((distance[users] > 0).sum()) if users.size else 0,
        )


@dataclass(frozen=True)
class SetPaths:
    """Paths between two sets: each as its edges (start, end, kind id) from its start on,
    how many starts have a path, and whether there were more paths than asked for."""

    paths: list[list[tuple[int, int, int]]]
    reaching: int
    truncated: bool


@dataclass(frozen=True)
class ExposedNode:
    node_id: int
    length: int  # of its shortest path to tier zero
    hop: int  # the node its first step reaches
    hop_kind: int  # that step's kind id


@dataclass(frozen=True)
class Exposure:
    total: int
    page: list[ExposedNode]
    enabled_users: int
    exposed_users: int


async def build_index(
    conn: Connection, version: GraphVersion, edge_kinds: Sequence[str] | None = None
) -> GraphIndex:
    """The index of the graph at `version`, read in chunks (its caller checks that no
    ingest committed meanwhile); the hashing and the sorting run off the event loop.

    The edges are gathered into columns as narrow as the ids allow (4 + 4 + 2 bytes an edge),
    from chunks of 50,000 rows, each made one flat array by `np.fromiter`. Side by side on
    300,000 nodes and 2.8 million relationships (ScaleGraph bulk loaded; tracemalloc for the
    peak), against a list of per-chunk int64 arrays from chunks of 200,000 rows: the peak
    fell from 78 to 36 bytes a relationship, the build from 3.10 to 2.35 s on SQLite and
    from 4.91 to 3.58 s on PostgreSQL.

    Every node's object id is read and hashed for `ObjectIds`: on the same graph in SQLite,
    the build went from 5.07 to 5.81 s (medians of 3, alternated, the machine busy with
    other work), for one statement less in every request that finds a path.

    `edge_kinds`: only the edges of those kinds (an index for queries that follow no
    other); None: every edge."""
    kind_ids = await paths.read_kinds(conn)
    nodes = NodeColumns()
    async for rows in paths.read_node_chunks(conn):
        await asyncio.to_thread(nodes.append, rows)
    node_ids, hashes, principal_ids = nodes.filled()
    largest = int(node_ids.max(initial=0))
    kept = None if edge_kinds is None else [kind_ids[k] for k in edge_kinds if k in kind_ids]
    columns = EdgeColumns(
        await paths.count_edges(conn, kept),
        node_dtype(largest + 1),
        kind_dtype(max(kind_ids.values(), default=0)),
    )
    async for rows in paths.read_edge_chunks(conn, kept):
        columns.append(rows)

    def assemble() -> GraphIndex:
        starts, ends, kinds = columns.filled()
        # An edge to a node added after the nodes were read (an ingest meanwhile: the build
        # is then repeated) must not fall outside the arrays.
        size = 1 + max(largest, int(starts.max(initial=0)), int(ends.max(initial=0)))
        principals = np.zeros(size, dtype=bool)
        principals[principal_ids] = True
        return GraphIndex(
            version,
            size,
            Adjacency.build(starts, ends, kinds, size),
            Adjacency.build(ends, starts, kinds, size),
            kind_ids,
            principals,
            ObjectIds.build(hashes, node_ids.astype(node_dtype(size))),
        )

    return await asyncio.to_thread(assemble)


def node_dtype(size: int) -> type[np.signedinteger[Any]]:
    return np.int32 if size < 2**31 else np.int64


def kind_dtype(largest: int) -> type[np.signedinteger[Any]]:
    # Kind ids fit 16 bits unless an extension registers tens of thousands of kinds.
    return np.int16 if largest < 2**15 else np.int32


class NodeColumns:
    """The nodes' ids, the hashes of their object ids, and the ids of the principals, chunk
    by chunk."""

    def __init__(self) -> None:
        self.ids: list[npt.NDArray[np.int64]] = []
        self.hashes: list[npt.NDArray[np.uint64]] = []
        self.principals: list[npt.NDArray[np.int64]] = []

    def append(self, rows: Sequence[Sequence[Any]]) -> None:
        """Rows of (id, object id, whether it is a principal)."""
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        self.ids.append(ids)
        self.hashes.append(hashes_of(row[1] for row in rows))
        flags = np.fromiter((bool(row[2]) for row in rows), dtype=bool, count=len(rows))
        self.principals.append(ids[flags])

    def filled(
        self,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
        return (
            np.concatenate([np.zeros(0, dtype=np.int64), *self.ids]),
            np.concatenate([np.zeros(0, dtype=np.uint64), *self.hashes]),
            np.concatenate([np.zeros(0, dtype=np.int64), *self.principals]),
        )


def hashes_of(object_ids: Iterable[str]) -> npt.NDArray[np.uint64]:
    # The digests joined and read as one array: 1.5 us an object id, where making each an
    # int for np.fromiter took 2.2.
    return np.frombuffer(b"".join([object_id_digest(o) for o in object_ids]), dtype=HASH)


class EdgeColumns:
    """The edges' start, end and kind ids, appended chunk by chunk into arrays sized from a
    count read first (grown if an ingest added edges since: the build is then repeated)."""

    def __init__(
        self, expected: int, nodes: type[np.signedinteger[Any]], kinds: type[np.signedinteger[Any]]
    ) -> None:
        self.count = 0
        self.starts = np.zeros(expected, dtype=nodes)
        self.ends = np.zeros(expected, dtype=nodes)
        self.kinds = np.zeros(expected, dtype=kinds)

    def append(self, rows: Sequence[Sequence[int]]) -> None:
        """Rows of (edge id, start, end, kind)."""
        # One flat array through fromiter: a third of the time of np.array on the rows.
        flat = np.fromiter((v for row in rows for v in row), dtype=np.int64, count=4 * len(rows))
        block = flat.reshape(-1, 4)
        end = self.count + len(block)
        if end > self.starts.size:
            grown = max(end, 2 * self.starts.size)
            self.starts, self.ends, self.kinds = (
                np.resize(a, grown) for a in (self.starts, self.ends, self.kinds)
            )
        self.starts[self.count : end] = block[:, 1]
        self.ends[self.count : end] = block[:, 2]
        self.kinds[self.count : end] = block[:, 3]
        self.count = end

    def filled(self) -> tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any]]:
        n = self.count
        return self.starts[:n], self.ends[:n], self.kinds[:n]
