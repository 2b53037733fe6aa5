"""Patterns matched on the graph: MATCH's, a WHERE's pattern predicates and pattern
comprehensions share `compile_pattern`.

A pattern is walked from one of its nodes (`choose_start`: a node already bound, else one
found by its object id or name, else the one whose labels have the fewest nodes) outwards,
one relationship at a time along the index's adjacency; a variable-length relationship is
walked depth first as a trail (no relationship twice, as Cypher matches), a shortest path
breadth first. Every relationship of one MATCH is distinct (`USED`). The WHERE's conjuncts
are tested as soon as their variables are bound, so that a filter on the first node prunes
before any walk.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from graphsvc.cypher import syntax
from graphsvc.cypher.errors import semantic_error, type_error
from graphsvc.cypher.expressions import by_identity, walk
from graphsvc.cypher.values import Node, Path, Rel, equals, type_name

if TYPE_CHECKING:
    from graphsvc.cypher.expressions import Compiler

Row = dict[str, Any]
Matches = Callable[[Row], Iterator[Row]]
HIDDEN = "\x00"  # the prefix of the names a match keeps in a row while it is made
MATCH_STATE = ("\x00node", "\x00rels")  # those kept only while one pattern is matched
USED = "\x00used"  # a row's relationships matched so far by its MATCH (kept to its end)


def pattern_variables(pattern: syntax.PatternPath) -> frozenset[str]:
    names = {e.variable for e in pattern.elements if e.variable is not None}
    if pattern.variable is not None:
        names.add(pattern.variable)
    return frozenset(names)


@by_identity
def free_variables(expr: syntax.Expr) -> frozenset[str]:
    """The variables an expression reads, those its patterns name included (a pattern
    predicate `(b)-->()` reads b)."""
    names = set()
    for part in walk(expr):
        if isinstance(part, syntax.Variable):
            names.add(part.name)
        elif (
            isinstance(part, syntax.NodePattern | syntax.RelationshipPattern | syntax.PatternPath)
            and part.variable is not None
        ):
            names.add(part.variable)
    return frozenset(names)


@dataclass
class Conjunct:
    """One AND-ed part of a WHERE, and the variables it needs bound."""

    test: Callable[[Row], bool]
    needs: frozenset[str]
    expr: syntax.Expr


def split_conjuncts(expr: syntax.Expr | None) -> list[syntax.Expr]:
    if expr is None:
        return []
    if isinstance(expr, syntax.Binary) and expr.op == "and":
        return split_conjuncts(expr.left) + split_conjuncts(expr.right)
    return [expr]


def pattern_map(
    compiler: Compiler, properties: syntax.MapExpr | syntax.Parameter | None, scope: frozenset[str]
) -> Callable[[Row], Any] | None:
    """A pattern's property map compiled; one given as a parameter must be a map (a null
    would otherwise ask nothing and match every node)."""
    if properties is None:
        return None
    compiled = compiler.compile(properties, scope)
    if isinstance(properties, syntax.Parameter):
        given = compiler.run.parameters[properties.name]
        if not isinstance(given, dict):
            raise type_error(
                properties.at,
                f"a pattern's property map ${properties.name} must be a map, "
                f"got {type_name(given)}",
            )
    return compiled


class NodeTest:
    """What a node pattern asks of the node bound to it: labels, inline properties, and
    being the node already bound to its variable. An inline `objectid` whose value the row
    before the pattern gives is also how the node is found: through the index's hashes of
    the object ids, not by testing every node."""

    def __init__(
        self,
        compiler: Compiler,
        pattern: syntax.NodePattern,
        scope: frozenset[str],
        outer: frozenset[str],
    ) -> None:
        self.variable = pattern.variable
        self.labels = pattern.labels
        self.properties = pattern_map(compiler, pattern.properties, scope)
        self.graph = compiler.run.graph
        self.object_id: Callable[[Row], Any] | None = None
        if isinstance(pattern.properties, syntax.MapExpr):
            for key, value in pattern.properties.items:
                if key == "objectid" and free_variables(value) <= outer:
                    self.object_id = compiler.compile(value, outer)

    def found(self, row: Row) -> list[int]:
        """The node with the object id the pattern names (none, or one)."""
        assert self.object_id is not None
        wanted = self.object_id(row)
        if not isinstance(wanted, str):
            return []
        node = self.graph.node_of(wanted)
        return [] if node is None else [node]

    def accepts(self, node: int, row: Row) -> bool:
        nodes = self.graph.nodes
        if self.labels:
            held = nodes.labels(node)
            if not all(label in held for label in self.labels):
                return False
        if self.properties is not None:
            wanted = self.properties(row)
            for key, value in (wanted or {}).items():
                if key == "objectid":
                    if not self.graph.has_object_id(node, value):
                        return False
                elif equals(nodes.value(node, key), value) is not True:
                    return False
        if self.variable is not None and self.variable in row:
            bound = row[self.variable]
            return isinstance(bound, Node) and bound.id == node
        return True


class RelTest:
    """What a relationship pattern asks: its kinds, direction, properties and length."""

    def __init__(
        self, compiler: Compiler, pattern: syntax.RelationshipPattern, scope: frozenset[str]
    ) -> None:
        graph = compiler.run.graph
        self.variable = pattern.variable
        self.direction = pattern.direction
        self.length = pattern.length
        kinds = [graph.kind_id(t) for t in expand_macros(pattern.types)]
        self.kinds: frozenset[int] | None = (
            frozenset(k for k in kinds if k is not None) if pattern.types else None
        )
        # The kinds as a mask by kind id: a node's relationships of those kinds kept in one
        # numpy pass (local admins by group at 10,000 nodes: 17.5 ms to 15.2).
        self.kind_mask = (
            graph.index.kind_mask(expand_macros(pattern.types)) if pattern.types else None
        )
        self.properties = pattern_map(compiler, pattern.properties, scope)
        self.graph = graph
        self.run = compiler.run

    def steps(self, node: int, reverse: bool) -> Iterator[tuple[int, Rel]]:
        """Each relationship the pattern allows at `node` and its far end; `reverse`: walking
        the pattern from its right to its left."""
        direction = self.direction
        if reverse and direction != "both":
            direction = "in" if direction == "out" else "out"
        if direction in ("out", "both"):
            others, found = self.of_kinds(*self.graph.out_edges(node))
            for other, kind in zip(others, found, strict=True):
                yield other, Rel(node, kind, other)
        if direction in ("in", "both"):
            others, found = self.of_kinds(*self.graph.in_edges(node))
            loops_seen = direction == "both"  # a self-loop: met as an out-edge just above
            for other, kind in zip(others, found, strict=True):
                if not (loops_seen and other == node):
                    yield other, Rel(other, kind, node)

    def of_kinds(self, others: Any, found: Any) -> tuple[list[int], list[int]]:
        """The relationships (far ends and kinds) of the pattern's kinds."""
        self.run.heavy(found.size)  # a domain's Contains: every object it holds
        if self.kind_mask is not None and found.size:
            keep = self.kind_mask[found]
            others, found = others[keep], found[keep]
        return others.tolist(), found.tolist()

    def accepts(self, rel: Rel, row: Row) -> bool:
        if self.properties is None:
            return True
        wanted = self.properties(row) or {}
        held = self.graph.rel_properties(rel.start, rel.kind, rel.end)
        return all(equals(held.get(k), v) is True for k, v in wanted.items())


def expand_macros(types: tuple[str, ...]) -> tuple[str, ...]:
    """The reference's kind macros, each the list of traversable kinds it names; as the
    reference does, a macro replaces the whole list it is in."""
    from graphsvc.cypher.kinds import MACROS

    for name in types:
        if name in MACROS:
            return MACROS[name]
    return types


def compile_pattern(
    compiler: Compiler,
    pattern: syntax.PatternPath,
    scope: frozenset[str],
    conjuncts: list[Conjunct] | None,
) -> Matches:
    """A function from a row to the rows extending it with each match of the pattern.
    `conjuncts` are the WHERE parts to test as their variables are bound (they are removed
    from the list as they are placed)."""
    inner = scope | pattern_variables(pattern)
    elements = pattern.elements
    node_tests = [NodeTest(compiler, e, inner, scope) for e in elements[0::2]]  # type: ignore[arg-type]
    rel_tests = [RelTest(compiler, e, inner) for e in elements[1::2]]  # type: ignore[arg-type]
    for _test, element in zip(rel_tests, elements[1::2], strict=True):
        if element.variable is not None and element.variable in scope:
            raise semantic_error(
                element.at,
                f"relationship variable `{element.variable}` is already bound: "
                "a pattern cannot match a bound relationship again",
            )
    if pattern.shortest is not None:
        return compile_shortest(compiler, pattern, scope, node_tests, rel_tests, conjuncts)

    start = choose_start(compiler, pattern, scope, node_tests)
    # The order nodes are bound in: from the start rightwards, then leftwards.
    order = [(i, i - 1, False) for i in range(start + 1, len(node_tests))]
    order += [(i, i, True) for i in range(start - 1, -1, -1)]
    bound_after: list[frozenset[str]] = []
    names = set(scope)
    for position in [start] + [i for i, _, _ in order]:
        if node_tests[position].variable is not None:
            names.add(node_tests[position].variable)  # type: ignore[arg-type]
        if position != start:
            step = next(o for o in order if o[0] == position)
            if rel_tests[step[1]].variable is not None:
                names.add(rel_tests[step[1]].variable)  # type: ignore[arg-type]
        bound_after.append(frozenset(names))
    # A WHERE part on the path variable is left to the MATCH's end, where the path is made.
    placed: list[list[Conjunct]] = [[] for _ in bound_after]
    for conjunct in list(conjuncts or []):
        for level, bound in enumerate(bound_after):
            if conjunct.needs <= bound:
                placed[level].append(conjunct)
                assert conjuncts is not None
                conjuncts.remove(conjunct)
                break
    run = compiler.run
    start_test = node_tests[start]
    # A free start's candidates, tested a whole column at a time: those of its rarest label
    # left by its inline properties and the WHERE parts the columns decide, then by its other
    # labels. `start_tested`: they passed its whole node test, not to be tested again.
    candidates: Any = ()
    start_tested = False
    if start_test_is_free(start_test, scope):
        start_pattern = elements[2 * start]
        assert isinstance(start_pattern, syntax.NodePattern)
        candidates, start_tested, placed[0] = tested_nodes(
            compiler, start_test, start_pattern, placed[0]
        )
        if len(node_tests) == 1 and pattern.variable is None and start_tested and not placed[0]:
            return SingleNodes(run, start_test.variable, candidates)
        candidates = candidates.tolist()

    def extend(row: Row, level: int) -> Iterator[Row]:
        if level == len(order):
            if pattern.variable is not None:
                row = {**row, pattern.variable: path_of(row, len(node_tests))}
            yield {k: v for k, v in row.items() if not k.startswith(MATCH_STATE)}
            return
        position, rel_index, reverse = order[level]
        here = row[f"{HIDDEN}node{position + 1 if reverse else position - 1}"]
        test_node, test_rel = node_tests[position], rel_tests[rel_index]
        used = row.get(USED, frozenset())
        for far, walked in walk_relationship(run, test_rel, here, reverse, used, row):
            if not test_node.accepts(far, row):
                continue
            rels = tuple(reversed(walked)) if reverse else walked  # left to right
            grown = {
                **row,
                f"{HIDDEN}node{position}": far,
                f"{HIDDEN}rels{rel_index}": rels,
                USED: used.union(rels),
            }
            if test_node.variable is not None:
                grown[test_node.variable] = Node(far)
            if test_rel.variable is not None:
                grown[test_rel.variable] = rels[0] if test_rel.length is None else list(rels)
            if all(c.test(grown) for c in placed[level + 1]):
                yield from extend(grown, level + 1)

    def matches(row: Row) -> Iterator[Row]:
        if start_test.variable is not None and start_test.variable in row:
            bound = row[start_test.variable]
            if bound is None:
                return
            if not isinstance(bound, Node):
                raise semantic_error(pattern.at, f"variable `{start_test.variable}` is not a node")
            nodes: Any = (bound.id,)
        elif start_test.object_id is not None:
            nodes = start_test.found(row)
        else:
            nodes = candidates
        for node in nodes:
            run.tick()
            if not start_tested and not start_test.accepts(node, row):
                continue
            grown = {**row, f"{HIDDEN}node{start}": node}
            if start_test.variable is not None:
                grown[start_test.variable] = Node(node)
            if all(c.test(grown) for c in placed[0]):
                yield from extend(grown, 0)

    return matches


class SingleNodes:
    """The matches of a pattern of one free node whose every test the columns made: its
    nodes, known before any row comes (so that `count` needs no row)."""

    def __init__(self, run: Any, variable: str | None, nodes: Any) -> None:
        self.run, self.variable, self.nodes = run, variable, nodes

    def __call__(self, row: Row) -> Iterator[Row]:
        tick, variable = self.run.tick, self.variable
        for node in self.nodes.tolist():
            tick()
            yield row if variable is None else {**row, variable: Node(node)}


def with_labels(compiler: Compiler, candidates: Any, labels: Iterable[str]) -> Any:
    """The candidates that carry every one of `labels`, in one pass over their label sets."""
    labels = tuple(labels)
    if not labels:
        return candidates
    nodes = compiler.run.graph.nodes
    allowed = np.array([all(label in held for label in labels) for held in nodes.label_sets])
    return candidates[allowed[nodes.label_set_of[candidates]]]


def tested_nodes(
    compiler: Compiler, test: NodeTest, pattern: syntax.NodePattern, conjuncts: list[Conjunct]
) -> tuple[Any, bool, list[Conjunct]]:
    """A free node pattern's candidates (an array), tested a whole column at a time: those
    of its rarest label, left by its inline properties and the WHERE parts the columns
    decide, then by its other labels: (the nodes left, whether they passed its whole node
    test, the WHERE parts left to test node by node)."""
    rarest = rarest_label(compiler, test)
    nodes = compiler.run.graph.nodes
    if rarest is None:
        candidates = nodes.ids
    else:
        candidates = nodes.by_label.get(rarest, np.zeros(0, dtype=np.int64))
    other_labels = [label for label in test.labels if label != rarest]
    if pattern.properties is not None or conjuncts or other_labels:
        compiler.run.heavy(candidates.size)  # a pass over them: none for a label's count
    kept, tested, remaining = filter_columns(compiler, pattern, candidates, conjuncts)
    return with_labels(compiler, kept, other_labels), tested, remaining


def describe_pattern(pattern: syntax.PatternPath) -> str:
    parts = []
    for element in pattern.elements:
        if isinstance(element, syntax.NodePattern):
            labels = "".join(f":{label}" for label in element.labels)
            parts.append(
                f"({element.variable or ''}{labels}{' {..}' if element.properties else ''})"
            )
        else:
            types = "|".join(element.types)
            length = ""
            if element.length is not None:
                high = "" if element.length.maximum is None else element.length.maximum
                length = f"*{element.length.minimum}..{high}"
            inner = f"[{element.variable or ''}{':' + types if types else ''}{length}]"
            left = "<-" if element.direction == "in" else "-"
            right = "->" if element.direction == "out" else "-"
            parts.append(f"{left}{inner}{right}")
    text = "".join(parts)
    if pattern.shortest is not None:
        text = ("shortestPath" if pattern.shortest == "one" else "allShortestPaths") + f"({text})"
    return f"{pattern.variable} = {text}" if pattern.variable else text


def path_of(row: Row, node_count: int) -> Path:
    """The path of a match, left to right, from the nodes and relationships it bound."""
    nodes = [row[f"{HIDDEN}node0"]]
    rels: list[Rel] = []
    for index in range(node_count - 1):
        current = nodes[-1]
        for rel in row[f"{HIDDEN}rels{index}"]:
            current = rel.end if rel.start == current else rel.start
            rels.append(rel)
            nodes.append(current)
    return Path(tuple(nodes), tuple(rels))


def walk_relationship(
    run: Any, test: RelTest, node: int, reverse: bool, used: frozenset[Rel], row: Row
) -> Iterator[tuple[int, tuple[Rel, ...]]]:
    """The far ends the relationship pattern reaches from `node`, each with the
    relationships walked (one, or a trail for a variable length; in walking order)."""
    if test.length is None:
        for far, rel in test.steps(node, reverse):
            if rel not in used and test.accepts(rel, row):
                yield far, (rel,)
        return
    low, high = test.length.minimum, test.length.maximum
    if low == 0:
        yield node, ()
    # Depth first with a stack of the steps still to take at each depth, not recursion: a
    # trail can be thousands of relationships long (the sample collection's are).
    trail: list[Rel] = []
    on_trail: set[Rel] = set()
    pending = [test.steps(node, reverse)]
    while pending:
        step = next(pending[-1], None)
        if step is None:
            pending.pop()
            if trail:
                on_trail.discard(trail.pop())
            continue
        run.tick()
        far, rel = step
        if rel in on_trail or rel in used or not test.accepts(rel, row):
            continue
        trail.append(rel)
        on_trail.add(rel)
        if len(trail) >= low:
            yield far, tuple(trail)
        if high is None or len(trail) < high:
            pending.append(test.steps(far, reverse))
        else:
            on_trail.discard(trail.pop())


def choose_start(
    compiler: Compiler,
    pattern: syntax.PatternPath,
    scope: frozenset[str],
    tests: list[NodeTest],
) -> int:
    """The node of the pattern to walk from: a bound one, else the one with the fewest
    candidates."""
    for position, test in enumerate(tests):
        if test.variable is not None and test.variable in scope:
            return position
    for position, test in enumerate(tests):
        if test.object_id is not None:
            return position
    sizes = [candidate_count(compiler, t) for t in tests]
    return sizes.index(min(sizes))


def candidate_count(compiler: Compiler, test: NodeTest) -> int:
    nodes = compiler.run.graph.nodes
    rarest = rarest_label(compiler, test)
    if rarest is None:
        return int(nodes.ids.size)
    found = nodes.by_label.get(rarest)
    return 0 if found is None else int(found.size)


def rarest_label(compiler: Compiler, test: NodeTest) -> str | None:
    """The label of the test that the fewest nodes carry (None: it names none)."""
    if not test.labels:
        return None
    by_label = compiler.run.graph.nodes.by_label
    return min(test.labels, key=lambda label: by_label[label].size if label in by_label else 0)


def compile_shortest(
    compiler: Compiler,
    pattern: syntax.PatternPath,
    scope: frozenset[str],
    node_tests: list[NodeTest],
    rel_tests: list[RelTest],
    conjuncts: list[Conjunct] | None,
) -> Matches:
    """shortestPath and allShortestPaths: for each start the pattern allows, a breadth-first
    walk to every end it allows; one path (or every shortest path) to each end reached."""
    if len(rel_tests) != 1:
        raise semantic_error(
            pattern.at, "a shortest path pattern has exactly one relationship: (a)-[*]->(b)"
        )
    rel = rel_tests[0]
    low = rel.length.minimum if rel.length is not None else 1
    high = rel.length.maximum if rel.length is not None else 1
    if low > 1:
        raise semantic_error(pattern.at, "a shortest path's minimum length is 0 or 1")
    first, last = node_tests
    run = compiler.run
    every = pattern.shortest == "all"
    first_element, last_element = pattern.elements[0], pattern.elements[-1]
    assert isinstance(first_element, syntax.NodePattern)
    assert isinstance(last_element, syntax.NodePattern)
    first_candidates, first_tested = tested_candidates(compiler, first, first_element, scope)
    last_candidates, last_tested = tested_candidates(compiler, last, last_element, scope)

    def allowed(test: NodeTest, row: Row, candidates: list[int], tested: bool) -> list[int]:
        """The nodes the end's pattern allows: its bound node, the node its object id
        names, or its candidates (tested a column at a time where they could be)."""
        if test.variable is not None and test.variable in row:
            value = row[test.variable]
            found: Any = (value.id,) if isinstance(value, Node) else ()
        elif test.object_id is not None:
            found = test.found(row)
        elif tested:
            return candidates
        else:
            found = candidates
        return [n for n in found if test.accepts(n, row)]

    def matches(row: Row) -> Iterator[Row]:
        ends = set(allowed(last, row, last_candidates, last_tested))
        if not ends:
            return
        starts = allowed(first, row, first_candidates, first_tested)
        for produced, path in enumerate(all_shortest(starts, ends, row), 1):
            if produced > run.caps.paths:
                raise run.too_many_paths()
            grown = dict(row)
            if first.variable is not None:
                grown[first.variable] = Node(path.nodes[0])
            if last.variable is not None:
                grown[last.variable] = Node(path.nodes[-1])
            if rel.variable is not None:
                grown[rel.variable] = list(path.rels)
            if pattern.variable is not None:
                grown[pattern.variable] = path
            yield grown

    def one_to_one(start: int, end: int) -> Iterator[Path]:
        """The path index's search from both ends at once (graph/path_index.py), which
        visits a fraction of what a search from the start alone does."""
        if start == end:
            if low == 0:
                yield Path((start,), ())
            return
        index = run.graph.index
        run.heavy(index.size)  # a search's levels are whole arrays
        kinds = list(rel.kinds) if rel.kinds is not None else list(index.kind_ids.values())
        allowed = np.zeros(max(index.kind_ids.values(), default=0) + 1, dtype=bool)
        allowed[kinds] = True
        parents: dict[int, list[Rel]] = {}
        for near, far, kind in index.search(start, end, allowed):
            parents.setdefault(far, []).append(Rel(near, kind, far))
        if end not in parents:  # no path
            return
        for path in paths_back(run, parents, start, end, every):
            if high is None or len(path.rels) <= high:
                yield path

    def many_to_one(starts: list[int], end: int) -> Iterator[Path]:
        """One shortest path from each start to one end: the path index's search back from
        the end over every node at once (numpy), then each start's path read off the first
        steps it found, the nearest starts first (every Kerberoastable user to a group at
        100,000 nodes: 595 ms, where a search in Python from the end took most of it)."""
        index = run.graph.index
        run.heavy(index.size)
        kinds = list(rel.kinds) if rel.kinds is not None else list(index.kind_ids.values())
        mask = np.zeros(max(index.kind_ids.values(), default=0) + 1, dtype=bool)
        mask[kinds] = True
        distance, hop, hop_kind = index.distances_to(np.array([end], dtype=np.int64), mask)
        found = np.array(starts, dtype=np.int64)
        found = found[(distance[found] >= max(low, 1)) & (found != end)]
        if high is not None:
            found = found[distance[found] <= high]
        found = found[np.lexsort((found, distance[found]))]
        for start in found.tolist():
            run.tick()
            nodes, rels, node = [start], [], start
            while node != end:
                step, kind = int(hop[node]), int(hop_kind[node])
                rels.append(Rel(node, kind, step))
                nodes.append(step)
                node = step
            yield Path(tuple(nodes), tuple(rels))
        if low == 0 and end in starts:
            yield Path((end,), ())

    def all_shortest(starts: list[int], ends: set[int], row: Row) -> Iterator[Path]:
        """Searched from the side with fewer nodes: from a domain's admins back to every
        user is one search, not one a user."""
        if len(starts) == len(ends) == 1 and rel.direction == "out" and rel.properties is None:
            yield from one_to_one(starts[0], next(iter(ends)))
            return
        if len(ends) >= len(starts):
            for start in starts:
                run.tick()
                yield from shortest_paths(run, rel, start, ends, low, high, every, row, False)
            return
        if len(ends) == 1 and not every and rel.direction == "out" and rel.properties is None:
            yield from many_to_one(starts, next(iter(ends)))
            return
        wanted = set(starts)
        for end in ends:
            run.tick()
            for path in shortest_paths(run, rel, end, wanted, low, high, every, row, True):
                yield Path(path.nodes[::-1], path.rels[::-1])

    return matches


def tested_candidates(
    compiler: Compiler, test: NodeTest, element: syntax.NodePattern, scope: frozenset[str]
) -> tuple[list[int], bool]:
    """A shortest path end's candidates, and whether they were tested already: filtered by
    its properties and labels a column at a time, where it is free (none where it is not:
    the row gives it)."""
    if not start_test_is_free(test, scope):
        return [], False
    kept, tested, _ = tested_nodes(compiler, test, element, [])
    return kept.tolist(), tested


def shortest_paths(
    run: Any,
    rel: RelTest,
    start: int,
    ends: set[int],
    low: int,
    high: int | None,
    every: bool,
    row: Row,
    reverse: bool,
) -> Iterator[Path]:
    """From `start`, level by level, the shortest paths to each of `ends` it reaches (the
    pattern's relationship walked against its direction when `reverse`: the paths then lead
    from `start` back, as the caller turns them)."""
    if low == 0 and start in ends:
        yield Path((start,), ())
    parents: dict[int, list[Rel]] = {start: []}
    frontier = [start]
    depth = 0
    while frontier and (high is None or depth < high):
        depth += 1
        reached: dict[int, list[Rel]] = {}
        for node in frontier:
            for far, found in rel.steps(node, reverse):
                run.tick()
                if far in parents or not rel.accepts(found, row):
                    continue
                reached.setdefault(far, []).append(found)
        parents.update(reached)
        frontier = list(reached)
        for end in frontier:
            if end in ends and end != start:
                yield from paths_back(run, parents, start, end, every)


def paths_back(
    run: Any, parents: dict[int, list[Rel]], start: int, end: int, every: bool
) -> Iterator[Path]:
    """The shortest paths from start to end, walked back along the parents (one, or all)."""

    def back(node: int) -> Iterator[tuple[list[int], list[Rel]]]:
        if node == start:
            yield [start], []
            return
        choices = parents[node] if every else parents[node][:1]
        for rel in choices:
            run.tick()
            previous = rel.start if rel.end == node else rel.end
            for nodes, rels in back(previous):
                yield [*nodes, node], [*rels, rel]

    for nodes, rels in back(end):
        yield Path(tuple(nodes), tuple(rels))


# --- filters on a whole property column ---------------------------------------------------

ORDERINGS = {"<": np.less, ">": np.greater, "<=": np.less_equal, ">=": np.greater_equal}
FLIPPED = {"=": "=", "<>": "<>", "<": ">", ">": "<", "<=": ">=", ">=": "<="}
AFFIXES = ("starts with", "ends with")  # `v.key OP constant` tests a column decides


def start_test_is_free(test: NodeTest, scope: frozenset[str]) -> bool:
    """A start taken from its label (or every node), not from a bound variable or an
    object id: its candidates are many, and worth filtering a column at a time."""
    return test.object_id is None and (test.variable is None or test.variable not in scope)


def filter_columns(
    compiler: Compiler,
    pattern: syntax.NodePattern,
    candidates: Any,
    conjuncts: list[Conjunct],
) -> tuple[Any, bool, list[Conjunct]]:
    """A node pattern's candidates (an array) filtered, a whole property column at a time,
    by its inline properties and by the WHERE parts that compare one of its properties with
    a constant: (the candidates left, whether the inline properties were all tested so, the
    WHERE parts left to test node by node). A filter the columns cannot decide exactly (a
    property of mixed types, say) is left to the node-by-node test."""
    nodes = compiler.run.graph.nodes
    masks = []
    properties_tested = pattern.properties is None
    if isinstance(pattern.properties, syntax.MapExpr):
        found = [
            column_test(compiler, nodes.column(key), "=", value, candidates)
            for key, value in pattern.properties.items
        ]
        if all(mask is not None for mask in found):
            masks += found
            properties_tested = True
    remaining = []
    for conjunct in conjuncts:
        mask = conjunct_test(compiler, conjunct, pattern.variable, candidates)
        if mask is None:
            remaining.append(conjunct)
        else:
            masks.append(mask)
    if not masks:
        return candidates, properties_tested, remaining
    keep = masks[0]
    for mask in masks[1:]:
        keep &= mask
    return candidates[keep], properties_tested, remaining


def property_key(expr: syntax.Expr, variable: str | None) -> str | None:
    """The key `expr` reads when it is `variable.key`; None for anything else."""
    if (
        isinstance(expr, syntax.Property)
        and isinstance(expr.subject, syntax.Variable)
        and expr.subject.name == variable
    ):
        return expr.key
    return None


def conjunct_test(compiler: Compiler, conjunct: Conjunct, variable: str | None, ids: Any) -> Any:
    """The mask of the candidates a WHERE part keeps, or None when it is not one the
    columns decide: `v.key`, `NOT v.key`, `v.key IS [NOT] NULL`, `v.key OP constant` (OP a
    comparison, STARTS WITH or ENDS WITH)."""
    expr = conjunct.expr
    if variable is None or conjunct.needs != {variable}:
        return None
    nodes = compiler.run.graph.nodes

    def key_of(part: syntax.Expr) -> str | None:
        return property_key(part, variable)

    true = syntax.Literal(True, at=expr.at)
    if key_of(expr) is not None:
        if nodes.column(key_of(expr)).kind not in ("bool", "absent"):  # type: ignore[arg-type]
            return None  # not a boolean: the node-by-node test refuses it, saying so
        return column_test(compiler, nodes.column(key_of(expr)), "=", true, ids)  # type: ignore[arg-type]
    if isinstance(expr, syntax.Unary) and expr.op == "not" and key_of(expr.operand) is not None:
        false = syntax.Literal(False, at=expr.at)
        return column_test(compiler, nodes.column(key_of(expr.operand)), "=", false, ids)  # type: ignore[arg-type]
    if isinstance(expr, syntax.IsNull) and key_of(expr.operand) is not None:
        present = nodes.column(key_of(expr.operand)).present[ids]  # type: ignore[arg-type]
        return present if expr.negated else ~present
    if isinstance(expr, syntax.Binary) and expr.op in AFFIXES and key_of(expr.left) is not None:
        return affix_test(compiler, nodes.column(key_of(expr.left)), expr.op, expr.right, ids)  # type: ignore[arg-type]
    if isinstance(expr, syntax.Binary) and expr.op in FLIPPED:
        if key_of(expr.left) is not None and is_constant(expr.right):
            return column_test(compiler, nodes.column(key_of(expr.left)), expr.op, expr.right, ids)  # type: ignore[arg-type]
        if key_of(expr.right) is not None and is_constant(expr.left):
            op = FLIPPED[expr.op]
            return column_test(compiler, nodes.column(key_of(expr.right)), op, expr.left, ids)  # type: ignore[arg-type]
    return None


def affix_test(compiler: Compiler, column: Any, op: str, constant: syntax.Expr, ids: Any) -> Any:
    """The mask of `ids` whose value STARTS WITH or ENDS WITH (`op`) the constant: true
    only of two strings, as Cypher tests (null otherwise); None when the column cannot say
    (mixed types)."""
    if not is_constant(constant) or column.kind == "mixed":
        return None
    value = compiler.compile(constant, frozenset())({})
    mask = np.zeros(len(ids), dtype=bool)
    if isinstance(value, str) and column.kind == "string":
        present = column.present[ids]
        mask[present] = column.has_affix(op, value, ids[present])
    return mask


def is_constant(expr: syntax.Expr) -> bool:
    """A literal, a parameter, or a signed number (`-1`)."""
    if isinstance(expr, syntax.Unary) and expr.op in ("-", "+"):
        operand = expr.operand
        return isinstance(operand, syntax.Literal) and type(operand.value) in (int, float)
    return isinstance(expr, syntax.Literal | syntax.Parameter)


def column_test(compiler: Compiler, column: Any, op: str, constant: syntax.Expr, ids: Any) -> Any:
    """The mask of `ids` whose value compared with the constant is true, as Cypher compares
    (a null, or values of different types but numbers, are not true; `<>` between different
    types is); None when the column cannot say (mixed types, a list...)."""
    if not is_constant(constant):
        return None
    value = compiler.compile(constant, frozenset())({})
    none = np.zeros(len(ids), dtype=bool)
    if value is None:
        return none
    kind = {bool: "bool", int: "number", float: "number", str: "string"}.get(type(value))
    if kind is None or column.kind == "mixed":
        return None
    if column.kind == "absent":
        return none
    present = column.present[ids]
    if kind != column.kind:
        return present if op == "<>" else none
    if kind == "number" and isinstance(value, float) and math.isnan(value):
        return present if op == "<>" else none
    if kind == "string":
        mask = none.copy()
        mask[present] = column.compare_strings(op, value, ids[present])
        return mask
    held = column.values[ids[present]]  # absent values are placeholders, never compared
    if op == "=":
        found = held == value
    elif op == "<>":
        found = held != value
    elif kind == "bool":
        found = ORDERINGS[op](held.astype(np.int8), int(value))
    else:
        found = ORDERINGS[op](held, value)
    mask = none.copy()
    mask[present] = np.asarray(found, dtype=bool)
    return mask
