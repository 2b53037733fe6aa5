"""The reference's older `asset-groups` routes, which its clients and pentest tools still call
to mark objects owned or high value (the legacy BloodHound CE client, C2 integrations,
command-line tools): each asset group is a tag seen the older way, not a second store of
marks. "Admin Tier Zero" (tag `admin_tier_0`) is Tier Zero, "Owned" (`owned`) is Owned,
both with the ids the reference gives them (1 and 2); a group created here is a label.

An asset group's selectors are its tag's object-id selectors (one object id each), named as
the client names them; adding one with a name the group has already is no change, as the
reference's. Members are computed as for any tag (graphsvc/tags), so a mark made here is
seen in Cypher, in paths and on entity pages at once, and kept across later collections.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from graphsvc import wire
from graphsvc.accounts.permissions import Caller
from graphsvc.cypher.service import CypherEngine
from graphsvc.errors import bad_request, conflict, not_found
from graphsvc.store import tags as store
from graphsvc.store.db import Connection
from graphsvc.store.filters import EQUALITY, Filter, FilterColumn
from graphsvc.store.paging import Page, SortKey
from graphsvc.store.tags import SelectorRow, TagRow
from graphsvc.tags.selection import OBJECT_ID_SEED
from graphsvc.tags.service import (
    LEGACY_TAG,
    SYSTEM_TAGS,
    add_label,
    checked_name,
    checked_selector_name,
    delete_tag,
    engine_graphs,
    existing_tag,
    record,
    remove_selector,
    tag_to_change,
    update_tag,
)
from graphsvc.tags.tagging import select_again
from graphsvc.wire.common import NO_TIME

MAX_CHANGES = 10_000  # selectors one request may add or remove
OBJECT_ID = re.compile(r"[^\s\x00]+")  # an object id: printable, no spaces
# Filtered in memory (the groups are few, members a tag's): the SQL is not used.
ASSET_GROUP_FILTERS = {
    name: FilterColumn(name, "text", EQUALITY) for name in ("name", "tag", "system_group")
}
MEMBER_FILTERS = {
    name: FilterColumn(name, "text", EQUALITY)
    for name in (
        "object_id", "primary_kind", "custom_member", "environment_id", "environment_kind",
        "name",
    )
}  # fmt: skip
MEMBER_SORT = (
    "object_id", "asset_group_id", "primary_kind", "environment_id", "environment_kind", "name",
)  # fmt: skip


def matches(value: Any, wanted: Filter) -> bool:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    equal = text == str(wanted.value)
    return equal if wanted.operator == "eq" else not equal


def object_id_selectors(selectors: Sequence[SelectorRow]) -> list[SelectorRow]:
    return [
        s for s in selectors if len(s.seeds) == 1 and s.seeds[0].type == OBJECT_ID_SEED
    ]  # fmt: skip


def selector_answer(selector: SelectorRow, sid: str | None = None) -> wire.AssetGroupSelector:
    """An object-id selector the older way (`sid`: the object id a change named, as the
    reference answers it)."""
    return wire.AssetGroupSelector(
        selector.id,
        selector.created_at,
        selector.updated_at,
        NO_TIME,
        selector.tag_id,
        selector.name,
        selector.seeds[0].value if sid is None else sid,
        selector.is_default,
    )


async def group_answer(conn: Connection, tag: TagRow, member_count: int) -> wire.AssetGroup:
    selectors = object_id_selectors(await store.list_tag_selectors(conn, tag.id))
    return wire.AssetGroup(
        tag.id,
        tag.created_at,
        tag.updated_at,
        NO_TIME,
        tag.name,
        tag.legacy_tag,
        tag.id in SYSTEM_TAGS,
        [selector_answer(s) for s in selectors],
        member_count,
    )


async def one_group(conn: Connection, tag: TagRow) -> wire.AssetGroupResponse:
    counts = await store.count_members(conn)
    return wire.AssetGroupResponse(await group_answer(conn, tag, counts.get(tag.id, 0)))


async def list_asset_groups(
    conn: Connection, filters: Sequence[Filter], sort: Sequence[SortKey]
) -> wire.AssetGroupListResponse:
    counts = await store.count_members(conn)
    groups = []
    for tag in await store.list_tags(conn):
        group = await group_answer(conn, tag, counts.get(tag.id, 0))
        if all(matches(getattr(group, f.column), f) for f in filters):
            groups.append(group)
    for key in reversed(sort):
        groups.sort(key=lambda g: getattr(g, key.column), reverse=key.descending)
    return wire.AssetGroupListResponse(wire.AssetGroupList(groups))


ASSET_GROUP_SORT = ("id", "name", "tag", "member_count")


GROUP = "asset_group_id"  # the context of an unknown group


async def get_asset_group(conn: Connection, asset_group_id: int) -> wire.AssetGroupResponse:
    return await one_group(conn, await existing_tag(conn, asset_group_id, GROUP))


async def create_asset_group(
    conn: Connection, caller: Caller, body: wire.CreateAssetGroupRequest
) -> wire.AssetGroupResponse:
    name = checked_name(body.name, "name")
    legacy_tag = checked_name(body.tag, "tag", LEGACY_TAG, "a-z, 0-9 and _ only")
    created = await add_label(conn, caller, name, "", legacy_tag)
    return await one_group(conn, await existing_tag(conn, created.data.id))


async def rename_asset_group(
    conn: Connection, caller: Caller, asset_group_id: int, body: wire.UpdateAssetGroupRequest
) -> wire.AssetGroupResponse:
    await existing_tag(conn, asset_group_id, GROUP)
    await update_tag(conn, caller, asset_group_id, wire.UpdateTagRequest(name=body.name))
    return await one_group(conn, await existing_tag(conn, asset_group_id, GROUP))


async def delete_asset_group(conn: Connection, caller: Caller, asset_group_id: int) -> None:
    tag = await existing_tag(conn, asset_group_id, GROUP)
    if tag.id in SYSTEM_TAGS:
        raise conflict("Cannot delete a system defined asset group.", "asset_group_id")
    await delete_tag(conn, caller, tag.id)


async def count_custom_selectors(
    conn: Connection, asset_group_id: int
) -> wire.CustomSelectorCountResponse:
    tag = await existing_tag(conn, asset_group_id, GROUP)
    custom = [s for s in await store.list_tag_selectors(conn, tag.id) if not s.is_default]
    return wire.CustomSelectorCountResponse(wire.CustomSelectorCount(len(custom)))


async def change_selectors(
    conn: Connection,
    engine: CypherEngine,
    caller: Caller,
    asset_group_id: int,
    body: list[wire.SelectorChange],
) -> wire.SelectorChangesResponse:
    """Add and remove object-id selectors by name, in the order given; then the members
    (once: 200 changes took 15 s when each rebuilt them)."""
    tag = await tag_to_change(conn, asset_group_id, GROUP)
    if len(body) > MAX_CHANGES:
        raise bad_request(f"at most {MAX_CHANGES} selector changes in one request", "body")
    added: list[wire.AssetGroupSelector] = []
    removed: list[wire.AssetGroupSelector] = []
    now = datetime.now(UTC)
    by_name = {s.name: s for s in await store.list_tag_selectors(conn, tag.id)}
    for change in body:
        name = checked_selector_name(change.selector_name, "selector_name")
        sid = checked_name(change.sid, "sid", OBJECT_ID, "an object id (no spaces)")
        existing = by_name.get(name)
        if change.action == "add":
            if existing is None:
                selector_id = await store.insert_selector(
                    conn, tag.id, name, "", 0, [store.Seed(OBJECT_ID_SEED, sid)],
                    caller.principal.user_id, now,
                )  # fmt: skip
                existing = await store.find_selector(conn, selector_id)
                assert existing is not None
                by_name[name] = existing
                await select_again(
                    conn, engine_graphs(engine), existing, tag.type, engine.caps, now
                )
                await record(conn, caller, "CreateSelector", name, tag.id, now)
            added.append(selector_answer(existing, sid))
        elif existing is not None:
            if existing.is_default:
                raise conflict(
                    f"{existing.name!r} is a system selector: it cannot be removed", "selector"
                )
            await remove_selector(conn, caller, tag, existing)
            del by_name[name]
            removed.append(selector_answer(existing, sid))
    await store.rebuild_members(conn)
    return wire.SelectorChangesResponse(wire.SelectorChanges(added, removed))


async def delete_asset_group_selector(
    conn: Connection, caller: Caller, asset_group_id: int, asset_group_selector_id: int
) -> None:
    tag = await tag_to_change(conn, asset_group_id, GROUP)
    selector = await store.find_selector(conn, asset_group_selector_id)
    if selector is None or selector.tag_id != tag.id:
        raise not_found(
            f"asset group {tag.id} has no selector {asset_group_selector_id}",
            "asset_group_selector_id",
        )
    if selector.is_default:
        raise conflict(f"{selector.name!r} is a system selector: it cannot be removed", "selector")
    await remove_selector(conn, caller, tag, selector)
    await store.rebuild_members(conn)


async def group_members(conn: Connection, tag: TagRow) -> list[wire.AssetGroupMember]:
    named = {
        s.seeds[0].value.upper()
        for s in object_id_selectors(await store.list_tag_selectors(conn, tag.id))
    }
    members = []
    for row, kinds in await store.list_member_nodes(conn, tag.id):
        environment_kind = "AZTenant" if "AZBase" in kinds else "Domain"
        members.append(
            wire.AssetGroupMember(
                tag.id, row.object_id, row.primary_kind, kinds, row.environment_id,
                environment_kind, row.name, row.object_id.upper() in named,
            )
        )  # fmt: skip
    return members


async def list_asset_group_members(
    conn: Connection,
    asset_group_id: int,
    filters: Sequence[Filter],
    sort: Sequence[SortKey],
    page: Page,
) -> wire.PagedAssetGroupMembers:
    tag = await existing_tag(conn, asset_group_id, GROUP)
    members = [
        m for m in await group_members(conn, tag)
        if all(matches(getattr(m, f.column), f) for f in filters)
    ]  # fmt: skip
    if page.skip > len(members) and members:
        raise bad_request(
            f"skip {page.skip} is past the {len(members)} members of this asset group", "skip"
        )
    for key in reversed(sort):
        members.sort(key=lambda m: str(getattr(m, key.column)), reverse=key.descending)
    shown = members[page.skip : page.skip + page.limit]
    return wire.PagedAssetGroupMembers(
        len(members), page.skip, page.limit, wire.AssetGroupMembers(shown)
    )


async def count_asset_group_members(
    conn: Connection, asset_group_id: int
) -> wire.MemberCountsResponse:
    tag = await existing_tag(conn, asset_group_id, GROUP)
    counts = await store.count_members_by_kind(conn, tag.id, None, ())
    return wire.MemberCountsResponse(wire.MemberCounts(sum(counts.values()), counts))
