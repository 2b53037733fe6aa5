"""Data: ingest collector files, and the schema extensions they are counted by."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import msgspec

from graphsvc import wire
from graphsvc.cli.common import emit, fail, load_settings, read_store, run_command_transaction
from graphsvc.errors import ApiError, bad_request, not_found
from graphsvc.graph import extensions, nodes
from graphsvc.graph.entities import ENTITY_KINDS, ENTITY_LISTS, build_list_reader
from graphsvc.graph.nodes import ENVIRONMENT_TYPES
from graphsvc.store import db as database
from graphsvc.store import graph
from graphsvc.store.paging import Page, SortKey

if TYPE_CHECKING:
    from graphsvc.ingest.sources import Progress, Source


class IngestProgress:
    """A progress bar on a terminal; elsewhere a plain line per file and every few seconds."""

    def __init__(self, total: int) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.bar = (
            click.progressbar(length=self.total, label="ingesting", file=sys.stderr)
            if sys.stderr.isatty()
            else None
        )
        self.last_line = time.monotonic()  # the first line comes after five seconds

    def __call__(self, source: Source) -> Progress:
        if self.bar is None:
            click.echo(f"reading {source.label} ({source.size:,} bytes)", err=True)

        def advance(count: int) -> None:
            self.done += count
            if self.bar is not None:
                self.bar.update(count)
            elif time.monotonic() - self.last_line > 5:
                self.last_line = time.monotonic()
                click.echo(f"  {100 * self.done // self.total}% of the input read", err=True)

        return advance

    def close(self) -> None:
        if self.bar is not None:
            self.bar.render_finish()


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def ingest(paths: tuple[Path, ...], as_json: bool) -> None:
    """Load collector output as one run: SharpHound and AzureHound JSON, OpenGraph JSON,
    SharpHound zips, and folders of these."""
    # Here, not at the top: the ingest (and numpy) were a third of `graphsvc find`'s start.
    from graphsvc.ingest.records import IngestError
    from graphsvc.ingest.run import cyclic_collector_paused, ingest_files
    from graphsvc.ingest.sources import Archives, IngestLimits, expand

    settings = load_settings()
    limits = IngestLimits(settings.max_zip_entries, settings.max_ingest_documents)
    try:
        with Archives() as archives:
            total = sum(s.size for s in expand(list(paths), archives, limits=limits))
    except IngestError as exc:
        fail(str(exc))
    progress = IngestProgress(total)
    try:
        with cyclic_collector_paused():
            result = run_command_transaction(
                settings,
                lambda conn: ingest_files(
                    conn,
                    paths,
                    progress,
                    limits=limits,
                    citrix_rdp_support=settings.citrix_rdp_support,
                    cache_mb=settings.ingest_cache_mb,
                ),
            )
    finally:
        progress.close()
    environments = [
        {"type": ENVIRONMENT_TYPES[e.label], "name": e.name, "id": e.object_id}
        for e in result.environments
    ]
    lines = [
        f"run {result.run_id}: {result.nodes} nodes, {result.edges} edges from "
        f"{len(result.files)} file(s)",
        *(f"  {e['type']} {e['name']}: {e['id']}" for e in environments),
        *(f"  not read: {n} record(s) of {what}" for what, n in result.skipped.items()),
    ]
    emit(
        as_json,
        {
            "run_id": result.run_id,
            "files": result.files,
            "nodes": result.nodes,
            "edges": result.edges,
            "created_at": result.created_at,
            "environments": environments,
            "skipped": result.skipped,
        },
        "\n".join(lines),
    )


@click.command()
@click.argument("text")
@click.option("--kind", default=None, help="Only nodes of this kind: Computer, User, AZTenant...")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 100))
@click.option("--json", "as_json", is_flag=True)
def find(text: str, kind: str | None, limit: int, as_json: bool) -> None:
    """Find nodes by object id or by a part of their name; prints their object ids."""

    async def work(conn: database.Connection) -> wire.PagedSearchResults:
        return await nodes.search(conn, text, kind, Page(0, limit))

    found = read_store(load_settings(), work)
    lines = [f"{n.objectid}  {n.type:<14} {n.name}" for n in found.data]
    if found.count > len(found.data):
        lines.append(f"... {found.count - len(found.data)} more; narrow the text or --kind")
    emit(as_json, found, "\n".join(lines) or f"nothing matches {text!r}")


@click.command()
@click.argument("start", required=False)
@click.argument("end", required=False)
@click.option("--from-tag", default=None, help="Start from a tag's members (owned...).")
@click.option("--to-tag", default=None, help="End at a tag's members (tier-zero...).")
@click.option(
    "--kinds",
    default=None,
    help="in:Kind1,Kind2 or nin:Kind1,Kind2 (default: the traversable kinds)",
)
@click.option(
    "--limit",
    default=100,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="With a tag: the most paths.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the API's answer.")
def path(
    start: str | None,
    end: str | None,
    from_tag: str | None,
    to_tag: str | None,
    kinds: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Every shortest path from START to END (object ids, or names), as
    GET /api/v2/graphs/shortest-path finds them, one a line. With --from-tag instead of
    START, or --to-tag instead of END (or both), the shortest paths from each start to the
    nearest end, as GET /api/v2/graphs/paths-between finds them:
    `graphsvc path --from-tag owned --to-tag tier-zero`."""
    from graphsvc.graph.paths import PathIndex, find_paths_between, find_shortest_paths

    given = [start, end]
    if from_tag is not None and end is None:  # `path --from-tag owned END`
        given = [None, start]
    for value, tag, what in ((given[0], from_tag, "START"), (given[1], to_tag, "END")):
        if (value is None) == (tag is None):
            option = "--from-tag" if what == "START" else "--to-tag"
            raise click.UsageError(f"give {what} or {option}, one of the two")
    settings = load_settings()
    ends: list[str] = []

    async def work(conn: database.Connection) -> wire.PathGraphResponse | wire.PathSetResponse:
        for text, what in ((given[0], "START"), (given[1], "END")):
            if text is not None:
                ends.append((await find_named_node(conn, text, what)).object_id)
        index = PathIndex(folder=settings.resolved_path_index_folder())
        if from_tag is None and to_tag is None:
            return await find_shortest_paths(conn, index, ends[0], ends[1], kinds)
        named = iter(ends)
        start_nodes = None if from_tag is not None else next(named)
        end_nodes = None if to_tag is not None else next(named)
        return await find_paths_between(
            conn, index, from_tag, start_nodes, to_tag, end_nodes, kinds, Page(0, limit)
        )

    found = read_store(settings, work)
    if isinstance(found, wire.PathSetResponse):
        emit(as_json, found, describe_path_set(found.data))
    else:
        emit(as_json, found, describe_paths(found.data, *ends))


def describe_path_set(found: wire.PathSet) -> str:
    """The paths between two sets, one a line, as the answer lists them."""
    if not found.paths:
        return "no path"
    names = {key: node.label for key, node in found.nodes.items()}
    lines = [
        f"{len(found.paths)}{' (first)' if found.truncated else ''} shortest path(s) from "
        f"{found.reaching} start(s):"
    ]
    for number, path in enumerate(found.paths, 1):
        edges = [found.edges[at] for at in path]
        steps = "".join(f" -{e.kind}-> {names[e.target]}" for e in edges)
        lines.append(f"  {number}. {names[edges[0].source]}{steps}")
    if found.truncated:
        lines.append("  ... more: --limit")
    return "\n".join(lines)


async def find_named_node(conn: database.Connection, text: str, what: str) -> graph.StoredNode:
    """The node `text` names: by its object id, or the one node so named (any case); a name
    several nodes have is refused with them (their object ids tell them apart)."""
    found = await graph.find_nodes(conn, [text.upper()])
    if found:
        return found[text.upper()]
    named = await graph.find_nodes_by_name(conn, text, most=NAMESAKES_SHOWN + 1)
    if len(named) == 1:
        return named[0]
    if not named:
        raise not_found(
            f"no node has the object id or the name {text!r} (`graphsvc find {text}` searches "
            "by part of a name)",
            what,
        )
    shown = "".join(
        f"\n  {n.object_id}  {n.kinds[0]:<14} {n.name}" for n in named[:NAMESAKES_SHOWN]
    )
    more = "\n  ..." if len(named) > NAMESAKES_SHOWN else ""
    raise bad_request(f"several nodes are named {text!r}; give one's object id:{shown}{more}", what)


MOST_PATHS_PRINTED = 100  # --json gives them all
NAMESAKES_SHOWN = 10  # of a name several nodes have


def describe_paths(graph: wire.PathGraph, start: str, end: str) -> str:
    """The shortest paths, one a line, each from the start to the end, and how many there
    are (the first MOST_PATHS_PRINTED, in the order of their steps' kinds and names)."""
    by_object = {node.objectId: key for key, node in graph.nodes.items()}
    names = {key: node.label for key, node in graph.nodes.items()}
    leaving: dict[str, list[wire.PathEdge]] = {}
    for edge in graph.edges:
        leaving.setdefault(edge.source, []).append(edge)
    for edges in leaving.values():
        edges.sort(key=lambda e: (e.kind, names[e.target]))
    first, last = by_object[start], by_object[end]
    ways: dict[str, int] = {last: 1}

    def count(node: str) -> int:  # the answer's edges make no cycle: all its paths are shortest
        if node not in ways:
            ways[node] = 0
            ways[node] = sum(count(e.target) for e in leaving.get(node, []))
        return ways[node]

    lines: list[str] = []
    trail: list[wire.PathEdge] = []
    lengths: list[int] = []  # every path's, the same: they are the shortest

    def walk(node: str) -> None:
        if len(lines) == MOST_PATHS_PRINTED:
            return
        if node == last:
            lengths.append(len(trail))
            steps = "".join(f" -{e.kind}-> {names[e.target]}" for e in trail)
            lines.append(f"  {len(lines) + 1}. {names[first]}{steps}")
            return
        for edge in leaving.get(node, []):
            trail.append(edge)
            walk(edge.target)
            trail.pop()

    walk(first)
    total = count(first)
    heading = (
        f"{total} shortest path(s) of {lengths[0]} step(s) from {names[first]} to {names[last]}:"
    )
    if total > len(lines):
        lines.append(f"  ... {total - len(lines)} more: --json gives them all")
    return "\n".join([heading, *lines])


@click.command()
@click.argument("domain", required=False)
@click.option("--tag", default=None, help="Instead of a domain's tier zero: a tag's members.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--json", "as_json", is_flag=True, help="Print the API's answer.")
def exposure(domain: str | None, tag: str | None, limit: int, as_json: bool) -> None:
    """Who has a path to DOMAIN's tier zero (its object id or name), shortest first, and the share
    of its enabled users who do, as GET /api/v2/domains/{object_id}/exposure answers; with
    --tag, who has a path to a tag's members (GET /api/v2/asset-group-tags/{id}/exposure)."""
    from graphsvc.graph.paths import PathIndex, list_exposure, list_tag_exposure
    from graphsvc.store.tags import find_tag_by_reference, list_tags

    if (domain is None) == (tag is None):
        raise click.UsageError("give DOMAIN or --tag, one of the two")
    settings = load_settings()

    async def work(conn: database.Connection) -> wire.ExposureList:
        index = PathIndex(folder=settings.resolved_path_index_folder())
        if tag is not None:
            found = await find_tag_by_reference(conn, tag)
            if found is None:
                known = ", ".join(t.name for t in await list_tags(conn))
                raise not_found(f"no tag {tag!r}; the tags: {known}", "--tag")
            return await list_tag_exposure(conn, index, found.id, Page(0, limit))
        assert domain is not None
        domain_id = (await find_named_node(conn, domain, "DOMAIN")).object_id
        return await list_exposure(conn, index, domain_id, Page(0, limit))

    found = read_store(settings, work)
    users = found.users
    target = "tier zero" if tag is None else f"the members of {tag}"
    lines = [
        f"{users.exposed} of {users.enabled} enabled users ({100 * users.share:.1f}%) have a "
        f"path to {target}; {found.count} principals in all:",
        *(
            f"  {e.length}  {e.name} ({e.label}) -{e.firstHop.kind}-> {e.firstHop.name}"
            for e in found.data
        ),
    ]
    if found.count > len(found.data):
        lines.append(f"  ... {found.count - len(found.data)} more; see --limit")
    emit(as_json, found, "\n".join(lines))


LIST_NAMES = sorted({entry.path for entry in ENTITY_LISTS})


@click.command("list")
@click.argument("name", metavar="LIST", type=click.Choice(LIST_NAMES))
@click.argument("entity")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--json", "as_json", is_flag=True, help="Print the API's answer.")
def entity_list(name: str, entity: str, limit: int, as_json: bool) -> None:
    """An entity's LIST (admin-users, rdp-users, sessions, controllers, members...), as
    GET /api/v2/{kind}/{object_id}/{list} answers it, with the right each principal holds
    and the group it comes through; ENTITY is an object id or a name."""
    shown: list[str] = []

    async def work(conn: database.Connection) -> wire.PagedRelatedNodeList:
        node = await find_named_node(conn, entity, "ENTITY")
        # A list of the entity's own kind before the one every AD object has (base).
        found = sorted(
            (e for e in ENTITY_LISTS if e.path == name and ENTITY_KINDS[e.segment] in node.kinds),
            key=lambda e: e.segment == "base",
        )
        if not found:
            own = sorted({e.path for e in ENTITY_LISTS if ENTITY_KINDS[e.segment] in node.kinds})
            raise bad_request(
                f"{node.name} ({node.kinds[0]}) has no {name} list; its lists: "
                f"{', '.join(own) or 'none'}",
                "LIST",
            )
        shown.append(node.name)
        by_name = [SortKey("name", False), SortKey("objectid", False)]
        return await build_list_reader(found[0])(conn, node.object_id, by_name, Page(0, limit))

    listed = read_store(load_settings(), work)
    lines = [f"{listed.count} in {name} of {shown[0]}:"]
    for row in listed.data:
        holds = ", ".join(
            h.kind + ("" if h.through is None else f" through {h.through.name}") for h in row.holds
        )
        lines.append(
            f"  {row.objectID}  {row.label:<14} {row.name}" + (f"  ({holds})" if holds else "")
        )
    if listed.count > len(listed.data):
        lines.append(f"  ... {listed.count - len(listed.data)} more; see --limit")
    emit(as_json, listed, "\n".join(lines))


@click.command()
@click.option("--json", "as_json", is_flag=True)
def domains(as_json: bool) -> None:
    """The AD domains and Azure tenants data exists for, with their ids."""
    listed = read_store(load_settings(), nodes.list_available_domains)
    lines = [
        f"{d.id}  {d.type:<17} {d.name}{'' if d.collected else '  (referred to only)'}"
        for d in listed.data
    ]
    emit(as_json, listed.data, "\n".join(lines) or "no domains or tenants yet")


@click.group()
def schema() -> None:
    """Graph schema extensions and their environment kinds."""


@schema.command("list")
@click.option("--json", "as_json", is_flag=True)
def schema_list(as_json: bool) -> None:
    """Extensions and environment kinds, with the ids the API asks for."""
    from graphsvc.store.extensions import list_extensions

    registered = read_store(load_settings(), list_extensions)
    data: list[dict[str, Any]] = [
        {
            "id": x.id,
            "name": x.name,
            "display_name": x.display_name,
            "version": x.version,
            "builtin": x.is_builtin,
            "environment_kinds": [
                {"id": env.kind_id, "name": env.kind, "source_kind": env.source_kind}
                for env in x.environments
            ],
        }
        for x in registered
    ]
    lines = []
    for x in data:
        lines.append(f"extension {x['id']}: {x['name']} ({x['display_name']}, {x['version']})")
        lines += [f"  environment kind {k['id']}: {k['name']}" for k in x["environment_kinds"]]
    emit(as_json, data, "\n".join(lines))


@schema.command("register")
@click.argument("definition", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
def schema_register(definition: Path, as_json: bool) -> None:
    """Register an OpenGraph schema extension from a JSON file:
    {"name", "display_name", "version", "node_kinds": [...], "relationship_kinds": [...],
    "environment_kinds": [{"kind": ..., "source_kind": ...}]}."""
    try:
        spec = msgspec.json.decode(definition.read_bytes(), type=wire.ExtensionDefinition)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        fail(f"{definition}: not an extension definition ({exc})")

    async def work(conn: database.Connection) -> int:
        try:
            return await extensions.register_extension(conn, spec)
        except ApiError as exc:  # named by the file, which is what the user passed
            raise ApiError(exc.status, exc.message, str(definition)) from None

    extension_id = run_command_transaction(load_settings(), work)
    emit(
        as_json,
        {"id": extension_id, "name": spec.name},
        f"extension {spec.name} registered: id {extension_id}",
    )


@click.command("clear-database")
@click.option("--all", "whole_graph", is_flag=True, help="Every collected node and relationship.")
@click.option(
    "--source-kind",
    "source_kinds",
    multiple=True,
    help="The nodes of a source kind, by name (Base, AZBase, an OpenGraph source kind) or "
    "number; 0 or Sourceless: the nodes of none. Repeatable.",
)
@click.option(
    "--relationships",
    multiple=True,
    help="Every relationship of a kind (HasSession). Repeatable.",
)
@click.option("--ingest-history", is_flag=True, help="The upload jobs that have ended.")
@click.option(
    "--data-quality-history", is_flag=True, help="Every data-quality statistic and aggregation."
)
@click.option("--yes", is_flag=True, help="Delete without asking first.")
@click.option("--json", "as_json", is_flag=True)
def clear_database(
    whole_graph: bool,
    source_kinds: tuple[str, ...],
    relationships: tuple[str, ...],
    ingest_history: bool,
    data_quality_history: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Delete collected data as POST /api/v2/clear-database does: at once, in one
    transaction, audited; asks first unless --yes."""
    from graphsvc.graph import clearing

    parts = [
        "every collected node and relationship" if whole_graph else "",
        f"the nodes of source kind(s) {', '.join(source_kinds)}" if source_kinds else "",
        f"the relationships of kind(s) {', '.join(relationships)}" if relationships else "",
        "the ended upload jobs" if ingest_history else "",
        "the data-quality history" if data_quality_history else "",
    ]
    asked = [part for part in parts if part]
    if not asked:
        fail(
            "nothing to delete: give --all, --source-kind, --relationships, --ingest-history "
            "or --data-quality-history"
        )
    if not yes:
        click.confirm(f"Delete {'; '.join(asked)}?", abort=True, err=True)

    async def work(conn: database.Connection) -> list[str]:
        known = {k.name: k.id for k in (await clearing.list_source_kinds(conn)).data.kinds}
        ids = []
        for given in source_kinds:
            if given.isdigit():
                ids.append(int(given))
            elif given in known:
                ids.append(known[given])
            else:
                names = ", ".join(sorted(known))
                raise ApiError(400, f"no source kind {given!r} (known: {names})", "--source-kind")
        body = wire.ClearDatabaseRequest(
            deleteCollectedGraphData=whole_graph,
            deleteSourceKinds=ids,
            deleteRelationships=list(relationships),
            deleteFileIngestHistory=ingest_history,
            deleteDataQualityHistory=data_quality_history,
        )
        checked = await clearing.check_clearing(conn, body)
        return await clearing.clear(conn, checked, clearing.wire_options(body))

    done = run_command_transaction(load_settings(), work)
    emit(as_json, {"deleted": done}, f"deleted: {', '.join(done)}")
