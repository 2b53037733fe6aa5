"""The `asset-group-tags` routes: tags, their selectors, members and history, as the
reference's (graphsvc/tags says what they mean).

A change of selectors is applied in its request: the selector's selection is made again on
the graph as it is, and the tag's members with it, so that the answer after it (Cypher's
`Tag_Owned`, a path's `isOwnedObject`) already shows it. Tier Zero's default selectors may
only be enabled or disabled (those the reference lets be), and Tier Zero and Owned are
neither renamed nor deleted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from msgspec import UNSET

from graphsvc import wire
from graphsvc.accounts.permissions import Caller
from graphsvc.cypher.graph import Needs, QueryGraph
from graphsvc.cypher.parse import parse
from graphsvc.cypher.service import CypherEngine
from graphsvc.errors import ApiError, bad_request, conflict, forbidden, not_found
from graphsvc.logs import audit
from graphsvc.store import tags as store
from graphsvc.store.db import Connection
from graphsvc.store.filters import Filter
from graphsvc.store.paging import Page, SortKey
from graphsvc.store.tags import (
    OWNED_TAG_ID,
    TIER_ZERO_TAG_ID,
    MemberRow,
    Seed,
    SelectorRow,
    TagRow,
)
from graphsvc.tags.selection import CYPHER_SEED, CypherGraphs, select_nodes
from graphsvc.tags.tagging import retag_selector

TIER, LABEL, OWNED = 1, 2, 3
SYSTEM_TAGS = (TIER_ZERO_TAG_ID, OWNED_TAG_ID)
SEARCH_LIMIT = 50  # of each kind of result, as the reference's
PREVIEW_MOST = 10_000  # members a preview answers


def engine_graphs(engine: CypherEngine) -> CypherGraphs:
    """The committed graph, as the process's Cypher engine holds it: a request that changes
    a selector changes no node."""

    async def read(conn: Connection, needs: Needs) -> QueryGraph:
        return await engine.tables.read(conn, engine.paths, needs)

    return read


def tag_answer(tag: TagRow, counts: wire.TagCounts | None = None) -> wire.Tag:
    return wire.Tag(
        tag.id,
        tag.type,
        tag.name,
        tag.description,
        tag.created_at,
        tag.created_by,
        tag.updated_at,
        tag.updated_by,
        None,
        None,
        tag.position,
        tag.require_certify,
        tag.analysis_enabled,
        tag.glyph,
        UNSET if counts is None else counts,
    )


def selector_answer(selector: SelectorRow, members: int | None = None) -> wire.Selector:
    return wire.Selector(
        selector.id,
        selector.tag_id,
        selector.name,
        selector.description,
        selector.auto_certify,
        selector.is_default,
        selector.allow_disable,
        selector.created_at,
        selector.created_by,
        selector.updated_at,
        selector.updated_by,
        selector.disabled_at,
        selector.disabled_by,
        [wire.Seed(s.type, s.value) for s in selector.seeds],
        UNSET if members is None else wire.SelectorCounts(members),
    )


def member_answer(row: MemberRow, tag_id: int) -> wire.Member:
    return wire.Member(
        row.node_id,
        row.object_id,
        row.environment_id,
        row.primary_kind,
        row.name,
        tag_id,
        UNSET if row.source is None else row.source,
    )


async def actor_email(conn: Connection, caller: Caller) -> str | None:
    email = await conn.fetchval(
        "SELECT email_address FROM users WHERE id = $1", caller.principal.user_id
    )
    return None if email is None else str(email)


async def record(
    conn: Connection, caller: Caller, action: str, target: str, tag_id: int, now: datetime
) -> None:
    """A change, in the tags' history and the audit log."""
    email = await actor_email(conn, caller)
    await store.insert_history(conn, now, caller.principal.user_id, email, action, target, tag_id)
    audit(f"tags.{action}", f"{action} {target!r} (tag {tag_id})", tag_id=tag_id)


async def existing_tag(
    conn: Connection, tag_id: int, context: str = "asset_group_tag_id"
) -> TagRow:
    tag = await store.find_tag(conn, tag_id)
    if tag is None:
        raise not_found(f"no asset group tag with id {tag_id}", context)
    return tag


async def tag_to_change(
    conn: Connection, tag_id: int, context: str = "asset_group_tag_id"
) -> TagRow:
    """The tag, held for this transaction's change (store/tags.py `lock_tags`)."""
    await store.lock_tags(conn)
    return await existing_tag(conn, tag_id, context)


TAG_NAME = re.compile(r"[A-Za-z0-9 _]+")
LEGACY_TAG = re.compile(r"[a-z0-9_]+")


def checked_text(value: str, field: str) -> str:
    """Free text (a description, a Cypher seed): any but a NUL, which PostgreSQL cannot
    store."""
    if "\x00" in value:
        raise bad_request(f"{field} must not contain a NUL character", field)
    return value


def checked_name(
    value: str,
    field: str,
    pattern: re.Pattern[str] = TAG_NAME,
    allowed: str = "letters, digits, spaces and _ only",
) -> str:
    """A name of the pattern's characters only (a tag's, by default), once trimmed of
    spaces (a newline or another control character is refused, never dropped)."""
    name = value.strip(" ")
    if not pattern.fullmatch(name):
        raise bad_request(f"{field} must be {allowed}, not empty: {value!r}", field)
    return name


def checked_selector_name(value: str, field: str = "name") -> str:
    name = value.strip()
    if not name or not name.isprintable():
        raise bad_request(f"a selector's {field} must be printable text, not empty", field)
    return name


async def existing_selector(conn: Connection, tag: TagRow, selector_id: int) -> SelectorRow:
    selector = await store.find_selector(conn, selector_id)
    if selector is None or selector.tag_id != tag.id:
        raise not_found(
            f"selector {selector_id} is not part of asset group tag {tag.id}",
            "asset_group_tag_selector_id",
        )
    return selector


# --- tags ------------------------------------------------------------------------------------


async def list_tags(
    conn: Connection, counts: bool, filters: Sequence[Filter]
) -> wire.TagListResponse:
    tags = await store.list_tags(conn, filters)
    if not counts:
        return wire.TagListResponse(wire.TagList([tag_answer(t) for t in tags]))
    selectors = await store.count_selectors(conn)
    members = await store.count_members(conn)
    answered = []
    for tag in tags:
        s = selectors.get(tag.id, store.SelectorCounts())
        numbers = wire.TagCounts(
            s.selectors, s.custom, s.default, s.disabled, members.get(tag.id, 0)
        )
        answered.append(tag_answer(tag, numbers))
    return wire.TagListResponse(wire.TagList(answered))


async def get_tag(conn: Connection, tag_id: int) -> wire.TagOneResponse:
    return wire.TagOneResponse(wire.TagOne(tag_answer(await existing_tag(conn, tag_id))))


def legacy_name(name: str) -> str:
    return name.strip().lower().replace(" ", "_")


async def create_tag(
    conn: Connection, caller: Caller, body: wire.CreateTagRequest
) -> wire.TagResponse:
    """A label (graphsvc keeps one tier, Tier Zero, and one Owned tag)."""
    if body.type != LABEL:
        raise bad_request(
            "only labels (type 2) can be created: Tier Zero is the one tier, Owned the one "
            "owned tag",
            "type",
        )
    name = checked_name(body.name, "name")
    return await add_label(conn, caller, name, body.description, legacy_name(name))


async def add_label(
    conn: Connection, caller: Caller, name: str, description: str, legacy_tag: str
) -> wire.TagResponse:
    """A label of this name and older tag, both checked."""
    description = checked_text(description, "description")
    await store.lock_tags(conn)
    for text, field in ((name, "name"), (legacy_tag, "tag")):
        taken = await store.tag_taking(conn, text)
        if taken is not None:
            raise conflict(
                f"the {field} {text!r} is too close to the tag {taken.name!r} (tag "
                f"{taken.legacy_tag!r}): names that differ only in case, spaces or _ would "
                "share one Cypher label",
                field,
            )
    now = datetime.now(UTC)
    tag_id = await store.insert_tag(
        conn, LABEL, name, description, legacy_tag, caller.principal.user_id, now
    )
    await record(conn, caller, "CreateTag", name, tag_id, now)
    return wire.TagResponse(tag_answer(await existing_tag(conn, tag_id)))


async def update_tag(
    conn: Connection, caller: Caller, tag_id: int, body: wire.UpdateTagRequest
) -> wire.TagResponse:
    tag = await tag_to_change(conn, tag_id)
    if body.name is UNSET and body.description is UNSET:
        raise bad_request("no valid fields specified: name or description", "body")
    name = tag.name if body.name is UNSET else checked_name(body.name, "name")
    if name != tag.name:
        if tag.id in SYSTEM_TAGS:
            raise bad_request(f"{tag.name} cannot be renamed", "name")
        taken = await store.tag_taking(conn, name, other_than=tag.id)
        if taken is not None:
            raise conflict(
                f"the name {name!r} is too close to the tag {taken.name!r} (tag "
                f"{taken.legacy_tag!r}): names that differ only in case, spaces or _ would "
                "share one Cypher label",
                "name",
            )
    description = (
        tag.description
        if body.description is UNSET
        else checked_text(body.description, "description")
    )
    now = datetime.now(UTC)
    await store.update_tag(conn, tag.id, name, description, caller.principal.user_id, now)
    await store.move_tags_version(conn)  # a renamed tag is a new label in Cypher
    await record(conn, caller, "UpdateTag", name, tag.id, now)
    return wire.TagResponse(tag_answer(await existing_tag(conn, tag.id)))


async def delete_tag(conn: Connection, caller: Caller, tag_id: int) -> None:
    tag = await tag_to_change(conn, tag_id)
    if tag.id in SYSTEM_TAGS:
        raise forbidden(f"{tag.name} cannot be deleted", "system_tag")
    now = datetime.now(UTC)
    await store.delete_tag(conn, tag.id, caller.principal.user_id, now)
    await record(conn, caller, "DeleteTag", tag.name, tag.id, now)


async def search_tags(conn: Connection, body: wire.TagSearchRequest) -> wire.TagSearchResponse:
    """Tags of the type (a label search covers Owned too) whose name holds the text, their
    selectors whose name does, and their members whose name or object id does."""
    text = checked_text(body.query, "query").strip().upper()
    if len(text) < 3:
        raise bad_request("query must hold at least 3 characters besides spaces", "query")
    types = {LABEL, OWNED} if body.tag_type == LABEL else {body.tag_type}
    tags = [t for t in await store.list_tags(conn) if t.type in types]
    if body.asset_group_tag_id is not UNSET:
        tags = [t for t in tags if t.id == body.asset_group_tag_id]
    found_tags = [t for t in tags if text in t.name.upper()][:SEARCH_LIMIT]
    selectors: list[wire.Selector] = []
    members: list[wire.Member] = []
    for tag in tags:
        for selector in await store.list_tag_selectors(conn, tag.id):
            if text in selector.name.upper() and len(selectors) < SEARCH_LIMIT:
                selectors.append(selector_answer(selector))
        for field in ("name", "object_id"):
            _, rows = await store.list_members(
                conn, tag.id, None, (), [Filter(field, "~eq", text)],
                [SortKey("name", False)], 0, SEARCH_LIMIT,
            )  # fmt: skip
            members += [member_answer(r, tag.id) for r in rows]
    unique = {(m.asset_group_tag_id, m.id): m for m in members}
    ordered = sorted(unique.values(), key=lambda m: (m.name, m.id))[:SEARCH_LIMIT]
    return wire.TagSearchResponse(
        wire.TagSearchResults([tag_answer(t) for t in found_tags], selectors, ordered)
    )


# --- members ---------------------------------------------------------------------------------


async def list_tag_members(
    conn: Connection,
    tag_id: int,
    environments: list[str],
    filters: Sequence[Filter],
    sort: Sequence[SortKey],
    page: Page,
) -> wire.PagedMembers:
    tag = await existing_tag(conn, tag_id)
    total, rows = await store.list_members(
        conn, tag.id, None, environments, filters, sort, page.skip, page.limit
    )
    members = [member_answer(r, tag.id) for r in rows]
    return wire.PagedMembers(total, page.skip, page.limit, wire.MemberList(members))


async def count_tag_members(
    conn: Connection, tag_id: int, environments: list[str]
) -> wire.MemberCountsResponse:
    tag = await existing_tag(conn, tag_id)
    counts = await store.count_members_by_kind(conn, tag.id, None, environments)
    return wire.MemberCountsResponse(wire.MemberCounts(sum(counts.values()), counts))


async def get_tag_member(conn: Connection, tag_id: int, member_id: int) -> wire.MemberInfoResponse:
    tag = await existing_tag(conn, tag_id)
    row = await store.find_member(conn, tag.id, member_id)
    if row is None:
        raise not_found(f"node {member_id} is not a member of tag {tag.id}", "member_id")
    selectors = await store.list_member_selectors(conn, tag.id, member_id)
    return wire.MemberInfoResponse(
        wire.MemberOne(
            wire.MemberInfo(
                row.node_id,
                row.object_id,
                row.environment_id,
                row.primary_kind,
                row.name,
                tag.id,
                row.properties,
                [selector_answer(s) for s in selectors],
            )
        )
    )


# --- selectors -------------------------------------------------------------------------------


def checked_seeds(given: Sequence[wire.Seed]) -> list[Seed]:
    """The seeds, all of one type; a Cypher seed one graphsvc runs (a 400 says why not)."""
    if len({s.type for s in given}) > 1:
        raise bad_request("a selector's seeds must all be of one type", "seeds")
    for seed in given:
        checked_text(seed.value, "seeds")
        if not seed.value.strip():
            raise bad_request("a seed's value must not be empty", "seeds")
        if seed.type == CYPHER_SEED:
            try:
                parse(seed.value)
            except ApiError as exc:
                raise bad_request(f"cypher is invalid: {exc.message}", "seeds") from exc
    return [Seed(s.type, s.value.strip()) for s in given]


def checked_auto_certify(tag: TagRow, auto_certify: int) -> int:
    if auto_certify != 0 and tag.type != TIER:
        raise bad_request("auto certify only available for privilege zones", "auto_certify")
    return auto_certify


async def list_selectors(
    conn: Connection,
    tag_id: int,
    counts: bool,
    filters: Sequence[Filter],
    sort: Sequence[SortKey],
    page: Page,
) -> wire.PagedSelectors:
    tag = await existing_tag(conn, tag_id)
    total, rows = await store.list_selectors(conn, tag.id, filters, sort, page.skip, page.limit)
    numbers = await store.count_selector_members(conn, tag.id) if counts else {}
    selectors = [selector_answer(s, numbers.get(s.id, 0) if counts else None) for s in rows]
    return wire.PagedSelectors(total, page.skip, page.limit, wire.SelectorList(selectors))


async def get_selector(conn: Connection, tag_id: int, selector_id: int) -> wire.SelectorOneResponse:
    tag = await existing_tag(conn, tag_id)
    selector = await existing_selector(conn, tag, selector_id)
    return wire.SelectorOneResponse(wire.SelectorOne(selector_answer(selector)))


async def create_selector(
    conn: Connection,
    engine: CypherEngine,
    caller: Caller,
    tag_id: int,
    body: wire.CreateSelectorRequest,
) -> wire.SelectorResponse:
    tag = await tag_to_change(conn, tag_id)
    seeds = checked_seeds(body.seeds)
    auto_certify = checked_auto_certify(tag, body.auto_certify)
    name = checked_selector_name(body.name)
    description = checked_text(body.description, "description")
    selector = await add_selector(conn, engine, caller, tag, name, description, seeds, auto_certify)
    return wire.SelectorResponse(selector_answer(selector))


async def add_selector(
    conn: Connection,
    engine: CypherEngine,
    caller: Caller,
    tag: TagRow,
    name: str,
    description: str,
    seeds: list[Seed],
    auto_certify: int,
) -> SelectorRow:
    """A selector added to the tag (held: `tag_to_change`) and applied; the one added."""
    if await store.selector_name_taken(conn, tag.id, name):
        raise conflict(f"tag {tag.name!r} has a selector named {name!r} already", "name")
    now = datetime.now(UTC)
    selector_id = await store.insert_selector(
        conn, tag.id, name, description, auto_certify, seeds, caller.principal.user_id, now
    )
    selector = await store.find_selector(conn, selector_id)
    assert selector is not None
    await retag_selector(conn, engine_graphs(engine), selector, tag.type, engine.caps, now)
    await record(conn, caller, "CreateSelector", name, tag.id, now)
    return selector


async def update_selector(
    conn: Connection,
    engine: CypherEngine,
    caller: Caller,
    tag_id: int,
    selector_id: int,
    body: wire.UpdateSelectorRequest,
) -> wire.SelectorResponse:
    tag = await tag_to_change(conn, tag_id)
    selector = await existing_selector(conn, tag, selector_id)
    given = {
        name
        for name in ("name", "description", "seeds", "auto_certify", "disabled")
        if getattr(body, name) is not UNSET
    }
    if not given:
        raise bad_request("no valid fields specified", "body")
    if selector.is_default and given - {"auto_certify", "disabled"}:
        raise forbidden("a default selector may only be enabled, disabled or certified", "default")
    now = datetime.now(UTC)
    changed = SelectorRow(
        selector.id,
        selector.tag_id,
        selector.name if body.name is UNSET else checked_selector_name(body.name),
        selector.description
        if body.description is UNSET
        else checked_text(body.description, "description"),
        selector.auto_certify
        if body.auto_certify is UNSET
        else checked_auto_certify(tag, body.auto_certify),
        selector.is_default,
        selector.allow_disable,
        selector.created_at,
        selector.created_by,
        now,
        caller.principal.user_id,
        selector.disabled_at,
        selector.disabled_by,
        selector.seeds if body.seeds is UNSET else checked_seeds(body.seeds),
    )
    if changed.name != selector.name and await store.selector_name_taken(
        conn, tag.id, changed.name, other_than=selector.id
    ):
        raise conflict(f"tag {tag.name!r} has a selector named {changed.name!r} already", "name")
    if body.disabled is True and selector.disabled_at is None:
        if not selector.allow_disable:
            raise forbidden(f"selector {selector.name!r} cannot be disabled", "disabled")
        changed = replace_disabled(changed, now, caller.principal.user_id)
    elif body.disabled is False:
        changed = replace_disabled(changed, None, None)
    await store.update_selector(conn, changed)
    await retag_selector(conn, engine_graphs(engine), changed, tag.type, engine.caps, now)
    await record(conn, caller, "UpdateSelector", changed.name, tag.id, now)
    return wire.SelectorResponse(selector_answer(changed))


def replace_disabled(selector: SelectorRow, at: datetime | None, by: str | None) -> SelectorRow:
    return replace(selector, disabled_at=at, disabled_by=by)


async def delete_selector(conn: Connection, caller: Caller, tag_id: int, selector_id: int) -> None:
    tag = await tag_to_change(conn, tag_id)
    selector = await existing_selector(conn, tag, selector_id)
    if selector.is_default:
        raise forbidden("a default selector cannot be deleted (it may be disabled)", "default")
    await remove_selector(conn, caller, tag, selector)
    await store.rebuild_members(conn)


async def remove_selector(
    conn: Connection, caller: Caller, tag: TagRow, selector: SelectorRow
) -> None:
    """Delete the selector (its tag held); the caller rebuilds the members."""
    now = datetime.now(UTC)
    await store.delete_selector(conn, selector.id)
    await record(conn, caller, "DeleteSelector", selector.name, tag.id, now)


async def list_selector_members(
    conn: Connection,
    tag_id: int,
    selector_id: int,
    environments: list[str],
    filters: Sequence[Filter],
    sort: Sequence[SortKey],
    page: Page,
) -> wire.PagedMembers:
    tag = await existing_tag(conn, tag_id)
    selector = await existing_selector(conn, tag, selector_id)
    if selector.disabled_at is not None:
        raise conflict("selector is disabled", "asset_group_tag_selector_id")
    total, rows = await store.list_members(
        conn, tag.id, selector.id, environments, filters, sort, page.skip, page.limit
    )
    members = [member_answer(r, tag.id) for r in rows]
    return wire.PagedMembers(total, page.skip, page.limit, wire.MemberList(members))


async def count_selector_members(
    conn: Connection, tag_id: int, selector_id: int, environments: list[str]
) -> wire.MemberCountsResponse:
    tag = await existing_tag(conn, tag_id)
    selector = await existing_selector(conn, tag, selector_id)
    counts = await store.count_members_by_kind(conn, tag.id, selector.id, environments)
    return wire.MemberCountsResponse(wire.MemberCounts(sum(counts.values()), counts))


async def preview_selectors(
    conn: Connection, engine: CypherEngine, limit: int | None, body: wire.PreviewRequest
) -> wire.PreviewResponse:
    """What seeds would select under an expansion, written nowhere."""
    if limit is not None and not 1 <= limit <= PREVIEW_MOST:
        raise bad_request(f"limit must be 1 to {PREVIEW_MOST}", "limit")
    seeds = checked_seeds(body.seeds)
    selected = await select_nodes(conn, engine_graphs(engine), seeds, body.expansion, engine.caps)
    shown = selected[: 200 if limit is None else limit]
    facts = await store.read_member_rows(conn, [s.node_id for s in shown])
    members = [
        wire.PreviewMember(
            s.node_id, row.object_id, row.environment_id, row.primary_kind, row.name, s.source
        )
        for s in shown
        if (row := facts.get(s.node_id)) is not None
    ]
    return wire.PreviewResponse(wire.PreviewMembers(members))


# --- history ---------------------------------------------------------------------------------


def history_answer(total: int, rows: list[store.HistoryRow], page: Page) -> wire.PagedHistory:
    records = [
        wire.HistoryRecord(
            r.id, r.created_at, r.actor, r.email, r.action, r.target, r.asset_group_tag_id,
            r.environment_id, r.note,
        )
        for r in rows
    ]  # fmt: skip
    return wire.PagedHistory(total, page.skip, page.limit, wire.HistoryRecords(records))


async def list_history(
    conn: Connection, filters: Sequence[Filter], sort: Sequence[SortKey], page: Page
) -> wire.PagedHistory:
    total, rows = await store.list_history(conn, filters, None, sort, page.skip, page.limit)
    return history_answer(total, rows, page)


async def search_history(
    conn: Connection, page: Page, body: wire.HistorySearchRequest
) -> wire.PagedHistory:
    text = checked_text(body.query, "query").strip()
    if len(text) < 3:
        raise bad_request("query must hold at least 3 characters besides spaces", "query")
    total, rows = await store.list_history(
        conn, (), text, [SortKey("created_at", True)], page.skip, page.limit
    )
    return history_answer(total, rows, page)
