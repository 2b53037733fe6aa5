"""Membership: every enabled selector's selection made again, and each tag's members from
them (graphsvc/tags). The whole graph is tagged at the end of every ingest run and requested
analysis, in its transaction; one selector is selected again when it changes, in the
request's transaction, so that a mark is seen at once."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from graphsvc.cypher import syntax
from graphsvc.cypher.expressions import walk
from graphsvc.cypher.graph import TransactionGraph
from graphsvc.cypher.kinds import MACROS
from graphsvc.cypher.parse import parse
from graphsvc.cypher.runtime import Caps
from graphsvc.errors import ApiError
from graphsvc.store import tags as store
from graphsvc.store.db import Connection
from graphsvc.store.tags import Seed, SelectorRow
from graphsvc.tags.selection import (
    CYPHER_SEED,
    EXPANSION_OF_TYPE,
    CypherGraphs,
    select_nodes,
    select_or_keep,
)

# What a Cypher seed may build while the whole graph is tagged (an ingest has no server's
# settings): the settings' defaults but ten times the rows, since a seed may select every
# user of a large domain; and how long it may run, since no request can cancel it (a seed
# accepted on a small graph can take hours on a large one, holding the ingest's write).
TAGGING_CAPS = Caps(1_000_000, 10_000, 1024 * 2**20)
TAGGING_SECONDS = 30.0


async def tag_graph(conn: Connection, now: datetime) -> None:
    """Select again for every enabled selector, on the graph as this transaction sees it,
    and make every tag's members."""
    selectors = await store.list_enabled_selectors(conn)
    graphs = TransactionGraph(
        followed_kinds(s for selector, _ in selectors for s in selector.seeds)
    )
    await store.lock_tags(conn)
    await store.delete_disabled_selector_nodes(conn)
    for selector, tag_type in selectors:
        await select_again(conn, graphs.read, selector, tag_type, TAGGING_CAPS, now)
    await store.rebuild_members(conn)


def followed_kinds(seeds: Iterable[Seed]) -> list[str] | None:
    """The relationship kinds the Cypher seeds' patterns name (the macros' kinds for a
    macro); None when one follows any kind. Tier Zero's defaults name two, so the graph
    their queries run on holds those edges only (a seed that does not parse selects
    nothing: it names none)."""
    kinds: set[str] = set()
    for seed in seeds:
        if seed.type != CYPHER_SEED:
            continue
        try:
            query = parse(seed.value)
        except ApiError:
            continue
        for single in query.parts:
            for clause in single.clauses:
                for part in walk(clause):
                    if isinstance(part, syntax.RelationshipPattern):
                        if not part.types:
                            return None
                        for name in part.types:
                            kinds.update(MACROS.get(name, (name,)))
    return sorted(kinds)


async def select_again(
    conn: Connection,
    graphs: CypherGraphs,
    selector: SelectorRow,
    tag_type: int,
    caps: Caps,
    now: datetime,
) -> None:
    """The selector's selection made again on the whole graph (kept as it was where a seed
    fails: see `select_or_keep`)."""
    expansion = EXPANSION_OF_TYPE[tag_type]
    selected = await select_or_keep(
        conn, graphs, selector.seeds, expansion, caps, selector.name, TAGGING_SECONDS
    )
    if selected is not None:
        await store.replace_selector_nodes(conn, selector, selected, now)


async def retag_selector(
    conn: Connection,
    graphs: CypherGraphs,
    selector: SelectorRow,
    tag_type: int,
    caps: Caps,
    now: datetime,
) -> None:
    """After a selector's change, in the request that made it: its selection made again (a
    seed that fails refuses the request with its error) or dropped (disabled), and the
    members."""
    if selector.disabled_at is None:
        expansion = EXPANSION_OF_TYPE[tag_type]
        selected = await select_nodes(conn, graphs, selector.seeds, expansion, caps)
        await store.replace_selector_nodes(conn, selector, selected, now)
    else:
        await store.delete_selector_nodes(conn, selector.id)
    await store.rebuild_members(conn)
