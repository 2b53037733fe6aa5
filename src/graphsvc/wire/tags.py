"""Tags (the reference's `asset-group-tags` routes, graphsvc/tags): tags, their selectors with
seeds, members and counts, the history of changes; and the older `asset-groups` routes its
clients mark owned objects through."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from graphsvc.wire.common import Count, Int32, Int64, NullTime

TagType = Annotated[int, Meta(ge=1, le=3, description="1 tier, 2 label, 3 owned")]
SeedType = Annotated[int, Meta(ge=1, le=2, description="1 an object id, 2 a Cypher query")]
AutoCertify = Annotated[
    int, Meta(ge=0, le=2, description="0 off, 1 every member, 2 the seeds' nodes only")
]
TagName = Annotated[str, Meta(min_length=1, max_length=250, pattern=r"^[a-zA-Z0-9 _]+$")]
SelectorName = Annotated[str, Meta(min_length=1, max_length=250)]


class TagCounts(msgspec.Struct):
    selectors: Count
    custom_selectors: Count
    default_selectors: Count
    disabled_selectors: Count
    members: Count


class Tag(msgspec.Struct):
    id: Int32
    type: TagType
    name: str
    description: str
    created_at: datetime
    created_by: str
    updated_at: datetime
    updated_by: str
    deleted_at: datetime | None
    deleted_by: str | None
    position: Int32 | None
    require_certify: bool | None
    analysis_enabled: bool | None
    glyph: str | None
    counts: TagCounts | UnsetType = UNSET


class TagList(msgspec.Struct):
    tags: list[Tag]


class TagListResponse(msgspec.Struct):
    data: TagList


class TagOne(msgspec.Struct):
    tag: Tag


class TagOneResponse(msgspec.Struct):
    data: TagOne


class TagResponse(msgspec.Struct):
    data: Tag


class CreateTagRequest(msgspec.Struct, forbid_unknown_fields=True):
    """A label to add (graphsvc has one tier, Tier Zero, and one Owned tag)."""

    name: TagName
    type: TagType = 2
    description: str = ""


class UpdateTagRequest(msgspec.Struct, forbid_unknown_fields=True):
    name: TagName | UnsetType = UNSET
    description: str | UnsetType = UNSET


class Seed(msgspec.Struct):
    type: SeedType
    value: Annotated[str, Meta(min_length=1, max_length=100_000)]


class SelectorCounts(msgspec.Struct):
    members: Count


class Selector(msgspec.Struct):
    id: Int32
    asset_group_tag_id: Int32
    name: str
    description: str
    auto_certify: AutoCertify
    is_default: bool
    allow_disable: bool
    created_at: datetime
    created_by: str
    updated_at: datetime
    updated_by: str
    disabled_at: datetime | None
    disabled_by: str | None
    seeds: list[Seed]
    counts: SelectorCounts | UnsetType = UNSET


class SelectorOne(msgspec.Struct):
    selector: Selector


class SelectorOneResponse(msgspec.Struct):
    data: SelectorOne


class SelectorResponse(msgspec.Struct):
    data: Selector


class SelectorList(msgspec.Struct):
    selectors: list[Selector]


class PagedSelectors(msgspec.Struct):
    count: Count
    skip: Count
    limit: Count
    data: SelectorList


class CreateSelectorRequest(msgspec.Struct, forbid_unknown_fields=True):
    name: SelectorName
    seeds: Annotated[list[Seed], Meta(min_length=1, max_length=1000)]
    description: str = ""
    auto_certify: AutoCertify = 0


class UpdateSelectorRequest(msgspec.Struct, forbid_unknown_fields=True):
    name: SelectorName | UnsetType = UNSET
    description: str | UnsetType = UNSET
    seeds: Annotated[list[Seed], Meta(min_length=1, max_length=1000)] | UnsetType = UNSET
    auto_certify: AutoCertify | UnsetType = UNSET
    disabled: bool | UnsetType = UNSET


class Member(msgspec.Struct):
    id: Int64  # the node's graph id
    object_id: str
    environment_id: str
    primary_kind: str
    name: str
    asset_group_tag_id: Int32
    source: Annotated[int, Meta(ge=1, le=3)] | UnsetType = UNSET  # 1 seed, 2 child, 3 parent


class MemberList(msgspec.Struct):
    members: list[Member]


class PagedMembers(msgspec.Struct):
    count: Count
    skip: Count
    limit: Count
    data: MemberList


class MemberCounts(msgspec.Struct):
    total_count: Count
    counts: dict[str, Count]


class MemberCountsResponse(msgspec.Struct):
    data: MemberCounts


class MemberInfo(msgspec.Struct):
    id: Int64
    object_id: str
    environment_id: str
    primary_kind: str
    name: str
    asset_group_tag_id: Int32
    properties: dict[str, Any]
    selectors: list[Selector]


class MemberOne(msgspec.Struct):
    member: MemberInfo


class MemberInfoResponse(msgspec.Struct):
    data: MemberOne


class PreviewRequest(msgspec.Struct, forbid_unknown_fields=True):
    seeds: Annotated[list[Seed], Meta(min_length=1, max_length=1000)]
    expansion: Annotated[int, Meta(ge=0, le=3)] = 1  # none, all, children, parents


class PreviewMember(msgspec.Struct):
    id: Int64
    object_id: str
    environment_id: str
    primary_kind: str
    name: str
    source: Annotated[int, Meta(ge=1, le=3)]


class PreviewMembers(msgspec.Struct):
    members: list[PreviewMember]


class PreviewResponse(msgspec.Struct):
    data: PreviewMembers


class HistoryRecord(msgspec.Struct):
    id: Int64
    created_at: datetime
    actor: str
    email: str | None
    action: str
    target: str
    asset_group_tag_id: Int32
    environment_id: str | None
    note: str | None


class HistoryRecords(msgspec.Struct):
    records: list[HistoryRecord]


class PagedHistory(msgspec.Struct):
    count: Count
    skip: Count
    limit: Count
    data: HistoryRecords


class HistorySearchRequest(msgspec.Struct, forbid_unknown_fields=True):
    query: Annotated[str, Meta(min_length=3, max_length=1000)]


class TagSearchRequest(msgspec.Struct, forbid_unknown_fields=True):
    query: Annotated[str, Meta(min_length=3, max_length=1000)]
    tag_type: TagType
    asset_group_tag_id: Int32 | UnsetType = UNSET


class TagSearchResults(msgspec.Struct):
    tags: list[Tag]
    selectors: list[Selector]
    members: list[Member]


class TagSearchResponse(msgspec.Struct):
    data: TagSearchResults


# --- the older asset groups --------------------------------------------------------------------


class AssetGroupSelector(msgspec.Struct):
    id: Int32
    created_at: datetime
    updated_at: datetime
    deleted_at: NullTime
    asset_group_id: Int32
    name: str
    selector: str  # an object id
    system_selector: bool


class AssetGroup(msgspec.Struct):
    id: Int32
    created_at: datetime
    updated_at: datetime
    deleted_at: NullTime
    name: str
    tag: str
    system_group: bool
    selectors: list[AssetGroupSelector]
    member_count: Count


class AssetGroupList(msgspec.Struct):
    asset_groups: list[AssetGroup]


class AssetGroupListResponse(msgspec.Struct):
    data: AssetGroupList


class AssetGroupResponse(msgspec.Struct):
    data: AssetGroup


class CreateAssetGroupRequest(msgspec.Struct, forbid_unknown_fields=True):
    name: TagName
    tag: Annotated[str, Meta(min_length=1, max_length=250, pattern=r"^[a-z0-9_]+$")]


class UpdateAssetGroupRequest(msgspec.Struct, forbid_unknown_fields=True):
    name: TagName


class SelectorChange(msgspec.Struct, forbid_unknown_fields=True):
    selector_name: Annotated[str, Meta(min_length=1, max_length=250)]
    sid: Annotated[str, Meta(min_length=1, max_length=512)]  # an object id
    action: Literal["add", "remove"]


class SelectorChanges(msgspec.Struct):
    added_selectors: list[AssetGroupSelector]
    removed_selectors: list[AssetGroupSelector]


class SelectorChangesResponse(msgspec.Struct):
    data: SelectorChanges


class CustomSelectorCount(msgspec.Struct):
    custom_member_count: Count


class CustomSelectorCountResponse(msgspec.Struct):
    data: CustomSelectorCount


class AssetGroupMember(msgspec.Struct):
    asset_group_id: Int32
    object_id: str
    primary_kind: str
    kinds: list[str]
    environment_id: str
    environment_kind: str  # Domain or AZTenant
    name: str
    custom_member: bool  # an object-id selector of the group names it


class AssetGroupMembers(msgspec.Struct):
    members: list[AssetGroupMember]


class PagedAssetGroupMembers(msgspec.Struct):
    count: Count
    skip: Count
    limit: Count
    data: AssetGroupMembers
