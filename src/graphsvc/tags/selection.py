"""What a selector selects: the nodes of its seeds, expanded as its tag's type says, by the
reference's rules (its datapipe's asset-group-tag selection):

- children (a tier or a label): a group's members at any depth, an OU's or container's
  contents, an Entra group's members, what a subscription, resource group or management
  group contains, the principals holding an Entra role; each child expanded the same way;
- parents (a tier): the OUs above a node (through OUs), the GPOs linked to those OUs or to
  the node itself, and, for a node whose access list is not protected, the containers
  above it; for an Azure node, the subscriptions, resource groups and management groups
  above it, and for a service principal the application it runs as.

Each node is selected in an environment: the seed's it came from (a domain or tenant is
its own), so that one member of two domains' admin groups is in both domains' tier zero.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from graphsvc.cypher.answer import collect
from graphsvc.cypher.graph import Needs, QueryGraph
from graphsvc.cypher.parse import parse
from graphsvc.cypher.runtime import Caps, Run
from graphsvc.cypher.service import query_needs, run_to_end
from graphsvc.errors import ApiError
from graphsvc.store import tags as store
from graphsvc.store.db import Connection
from graphsvc.store.tags import NodeFacts, Seed, Selected

log = logging.getLogger(__name__)

OBJECT_ID_SEED, CYPHER_SEED = 1, 2
SEED, CHILD, PARENT = 1, 2, 3  # a selected node's source
NO_EXPANSION, ALL, CHILDREN, PARENTS = 0, 1, 2, 3
EXPANSION_OF_TYPE = {1: ALL, 2: CHILDREN, 3: NO_EXPANSION}  # by tag type: tier, label, owned
AD_BASE, AZURE_BASE = "Base", "AZBase"

# (a node of one of these kinds, has as children the far ends of these edges, inbound?)
CHILD_RULES = (
    (("Group",), ("MemberOf",), True),
    (("OU", "Container"), ("Contains",), False),
    (("AZGroup",), ("AZMemberOf",), True),
    (("AZResourceGroup", "AZManagementGroup", "AZSubscription"), ("AZContains",), False),
    (("AZRole",), ("AZHasRole", "AZRoleEligible"), True),
)
AZURE_PARENT_KINDS = ("AZSubscription", "AZResourceGroup", "AZManagementGroup")

CypherGraphs = Callable[[Connection, Needs], Awaitable[QueryGraph]]
Pair = tuple[int, str]  # a node and the environment it is selected in


@dataclass
class Selection:
    """One selection's state: what is selected, and what is known of the nodes met."""

    conn: Connection
    facts: dict[int, NodeFacts]
    selected: dict[Pair, int]  # -> source
    kind_ids: dict[tuple[str, ...], list[int]]

    async def learn(self, node_ids: Iterable[int]) -> None:
        unknown = {n for n in node_ids if n not in self.facts}
        if unknown:
            self.facts.update(await store.read_node_facts(self.conn, unknown))

    async def kinds(self, names: tuple[str, ...]) -> list[int]:
        found = self.kind_ids.get(names)
        if found is None:
            found = self.kind_ids[names] = await store.find_kind_ids(self.conn, names)
        return found

    def has(self, node: int, *kinds: str) -> bool:
        facts = self.facts.get(node)
        return facts is not None and any(k in facts.kinds for k in kinds)

    async def step(
        self, pairs: Iterable[Pair], edge_kinds: tuple[str, ...], inbound: bool
    ) -> list[Pair]:
        """The far ends (in the near end's environment) of the edges of these kinds."""
        by_node: dict[int, set[str]] = {}
        for node, environment in pairs:
            by_node.setdefault(node, set()).add(environment)
        found = await store.read_neighbours(
            self.conn, list(by_node), await self.kinds(edge_kinds), inbound
        )
        await self.learn(far for _, far in found)
        return [(far, env) for near, far in found for env in sorted(by_node[near])]

    def add(self, pairs: Iterable[Pair], source: int) -> list[Pair]:
        """Select the pairs not selected yet; those."""
        added = []
        for pair in pairs:
            if pair not in self.selected:
                self.selected[pair] = source
                added.append(pair)
        return added


async def seed_nodes(
    conn: Connection,
    graphs: CypherGraphs,
    seeds: Iterable[Seed],
    caps: Caps,
    seconds: float | None = None,
) -> list[int]:
    """The nodes the seeds name: an object id's node (none for an id no node has), and
    every node a Cypher seed's answer holds (in its paths too). `seconds`: the most a
    Cypher seed may run (none: until the request that asked is cancelled)."""
    seeds = list(seeds)
    found: dict[int, None] = {}
    object_ids = [s.value for s in seeds if s.type == OBJECT_ID_SEED]
    if object_ids:
        nodes = await store.find_object_ids(conn, object_ids)
        for value in object_ids:
            node = nodes.get(value, nodes.get(value.upper()))
            if node is not None:
                found[node] = None
    for seed in seeds:
        if seed.type == CYPHER_SEED:
            query = parse(seed.value)
            graph = await graphs(conn, query_needs(query, {}))
            deadline = None if seconds is None else time.monotonic() + seconds
            result = await run_to_end(query, Run(graph, {}, caps, deadline=deadline))
            found.update(collect(result).nodes)
    return list(found)


async def select_nodes(
    conn: Connection,
    graphs: CypherGraphs,
    seeds: Iterable[Seed],
    expansion: int,
    caps: Caps,
    seconds: float | None = None,
) -> list[Selected]:
    """What the seeds select under the expansion: seeds first, then children, then parents
    (`seconds`: as `seed_nodes` takes it)."""
    selection = Selection(conn, {}, {}, {})
    nodes = await seed_nodes(conn, graphs, seeds, caps, seconds)
    await selection.learn(nodes)
    seeded = selection.add(
        ((n, selection.facts[n].environment_id) for n in nodes if n in selection.facts), SEED
    )
    expanded = list(seeded)
    if expansion in (ALL, CHILDREN):
        expanded += await add_children(selection, seeded)
    if expansion in (ALL, PARENTS):
        await add_parents(selection, expanded)
    return [Selected(node, env, source) for (node, env), source in selection.selected.items()]


async def add_children(selection: Selection, seeded: list[Pair]) -> list[Pair]:
    children: list[Pair] = []
    frontier = seeded
    while frontier:
        reached: list[Pair] = []
        for kinds, edge_kinds, inbound in CHILD_RULES:
            near = [
                p for p in frontier
                if selection.has(p[0], AD_BASE, AZURE_BASE) and selection.has(p[0], *kinds)
            ]  # fmt: skip
            if near:
                reached += await selection.step(near, edge_kinds, inbound)
        entities = [p for p in reached if selection.has(p[0], AD_BASE, AZURE_BASE)]
        frontier = selection.add(entities, CHILD)
        children += frontier
    return children


async def climb(
    selection: Selection, start: list[Pair], edge_kinds: tuple[str, ...], through: str
) -> list[Pair]:
    """Every node above the start over inbound edges of these kinds, through nodes of the
    kind `through` only."""
    reached: list[Pair] = []
    seen = set(start)
    frontier = start
    while frontier:
        found = [
            p for p in await selection.step(frontier, edge_kinds, True)
            if p not in seen and selection.has(p[0], through)
        ]  # fmt: skip
        seen.update(found)
        reached += found
        frontier = found
    return reached


async def add_parents(selection: Selection, expanded: list[Pair]) -> None:
    ad = [p for p in expanded if selection.has(p[0], AD_BASE)]
    if ad:
        units = await climb(selection, ad, ("Contains",), "OU")
        selection.add(units, PARENT)
        linked = await selection.step([*ad, *units], ("GPLink",), True)
        selection.add((p for p in linked if selection.has(p[0], "GPO")), PARENT)
        unprotected = [p for p in ad if selection.facts[p[0]].acl_protected is False]
        selection.add(await climb(selection, unprotected, ("Contains",), "Container"), PARENT)
    azure = [p for p in expanded if selection.has(p[0], AZURE_BASE)]
    if azure:
        above = await climb(selection, azure, ("AZContains",), AZURE_BASE)
        selection.add((p for p in above if selection.has(p[0], *AZURE_PARENT_KINDS)), PARENT)
        principals = [p for p in azure if selection.has(p[0], "AZServicePrincipal")]
        runs_as = await selection.step(principals, ("AZRunsAs",), True)
        selection.add((p for p in runs_as if selection.has(p[0], "AZApp")), PARENT)


async def select_or_keep(
    conn: Connection,
    graphs: CypherGraphs,
    seeds: Iterable[Seed],
    expansion: int,
    caps: Caps,
    selector_name: str,
    seconds: float,
) -> list[Selected] | None:
    """`select_nodes`, or None where a Cypher seed fails on this graph (a query past the
    caps or past `seconds`, say): logged, and the selector's earlier selection is kept."""
    try:
        return await select_nodes(conn, graphs, seeds, expansion, caps, seconds)
    except ApiError as exc:
        log.warning("selector %r not applied to this graph: %s", selector_name, exc.message)
        return None
