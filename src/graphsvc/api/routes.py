"""The operations table: every route of the API in one place. The router and the OpenAPI
document are both built from it, so adding or changing an operation touches one entry.

An operation that takes either kind of credentials ("any") is served by the read path
(api/reads.py) or, when it writes or uploads, the write path (api/writes.py): each
authenticates the caller, checks the edition, the permission and the parameters
(api/admission.py), applies the `Prefer` timeout, decodes the body and calls the handler, a
service function, with a connection (in a write transaction for `writes`) and the parsed
values.
The others take the request itself and answer it (login, logout, health, this document).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from graphsvc import wire
from graphsvc.accounts import audit_log, roles, saml, sessions, tokens, users
from graphsvc.accounts.permissions import (
    CREATE_TOKEN,
    INGEST,
    MANAGE_PROVIDERS,
    MANAGE_SELF,
    MANAGE_USERS,
    READ_CLIENTS,
    READ_GRAPH,
    READ_SAVED_QUERIES,
    WIPE_DATABASE,
    WRITE_GRAPH,
    WRITE_SAVED_QUERIES,
)
from graphsvc.analysis import requests
from graphsvc.api.console import (
    redirect_to_console,
    serve_api_reference,
    serve_console,
    serve_console_asset,
)
from graphsvc.api.context import Context
from graphsvc.api.login import log_in, log_out, prepare_secret_change
from graphsvc.api.params import (
    INT32_SCHEMA,
    UUID_SCHEMA,
    BaseUrl,
    BeforeAfter,
    Filters,
    OffsetPaging,
    Paging,
    Parameter,
    PathParameter,
    QueryChoice,
    QueryFlag,
    QueryInt32,
    QueryText,
    QueryTexts,
    Sorting,
    TheCaller,
    TheCypherEngine,
    ThePathIndex,
    TimeWindow,
    TokenCache,
    TokenKeys,
    parse_path_int32,
    parse_text,
    parse_uuid,
)
from graphsvc.api.probes import (
    METRICS_MEDIA_TYPE,
    check_health,
    check_readiness,
    serve_metrics,
    serve_openapi,
)
from graphsvc.api.web import Request
from graphsvc.console import assets as console_assets
from graphsvc.cypher import service as cypher
from graphsvc.graph import azure, clearing, clients, data_quality, extensions, nodes, paths
from graphsvc.graph.entities import (
    ENTITY_KINDS,
    ENTITY_LISTS,
    ENTITY_SHAPES,
    build_entity_getter,
    build_list_reader,
    list_dcom_rights,
)
from graphsvc.saved_queries import service as saved_queries
from graphsvc.store import accounts as store_accounts
from graphsvc.store import audit as store_audit
from graphsvc.store import clients as store_clients
from graphsvc.store import saved_queries as store_saved_queries
from graphsvc.store import tags as store_tags
from graphsvc.store import uploads as store_uploads
from graphsvc.store.paging import SortKey
from graphsvc.tags import legacy as asset_groups
from graphsvc.tags import service as tags
from graphsvc.uploads import jobs

log = logging.getLogger("graphsvc")
V2 = "/api/v2"
HTML = console_assets.HTML.decode()
# The errors every operation documents; 503: every database connection stayed in use for
# the acquire timeout, or (a write) a SQLite store stayed busy with another write.
ERRORS = ("400", "401", "403", "404", "405", "408", "413", "429", "500", "503")


@dataclass(frozen=True)
class Operation:
    method: str
    path: str  # a template: each {name} matches one path segment
    operation_id: str
    summary: str
    handler: Callable[..., Awaitable[Any]]
    response: type[msgspec.Struct] | None  # the 200 body; None: any JSON object
    errors: tuple[str, ...]  # the error statuses it documents
    permission: str | None = None
    parameters: tuple[Parameter, ...] = ()
    enterprise_only: bool = False
    # Which credentials it takes: either kind, only a session's JWT, or none.
    authentication: Literal["any", "session", "none"] = "any"
    # Decoded, passed as `body`: a struct, or a list of one (a JSON array).
    request_body: Any = None
    max_body_bytes: int | None = None  # None: the max_body_bytes setting
    writes: bool = False  # runs in a write transaction
    # A write's work that must not run in its transaction (a password's hash, whose 0.2 s of
    # CPU would hold SQLite's one write lock): run before it opens, taking any connection it
    # needs itself, given the context, the request, the handler's arguments and the body;
    # what it returns is passed to the handler as `prepared`.
    prepare: Callable[..., Awaitable[Any]] | None = None
    media_type: str = "application/json"  # of the success answer
    # A file answer (wire.Download, an export): the media types it may have, sent as they
    # are with the name to save it under (Content-Disposition).
    downloads: tuple[str, ...] = ()
    download_json: type[msgspec.Struct] | None = None  # a JSON download: one of it, or a list
    status: int = 200  # of the success answer
    # The body is a file: streamed to a temporary file as it arrives (a signed request's
    # signature checked on the way), passed as `upload`; the transaction opens after it.
    upload: bool = False
    upload_description: str = (
        "One collector file: JSON, or a SharpHound zip. An `X-File-Upload-Name` header (the "
        "reference's web client) or a `Content-Disposition: attachment; filename=...` header "
        "names it."
    )
    # An upload's check of its target, run before its body is read: given the handler's
    # arguments but the upload, and `declared_bytes`, the body's Content-Length (None: not
    # declared); it raises what refuses the request.
    admit: Callable[..., Awaitable[None]] | None = None
    # While an upload's body arrives, run every few seconds in a transaction of its own,
    # given the same arguments as `admit` (it keeps a job from timing out under a slow file).
    receiving: Callable[..., Awaitable[None]] | None = None
    # An upload cut off by the server's stop (api/writes.py Stopping), run in a transaction
    # of its own with the same arguments: what becomes of its target (a job failed).
    cut_off: Callable[..., Awaitable[None]] | None = None
    # Its success answer tells the server's upload limit (UPLOAD_LIMIT_HEADER), so that a
    # client can refuse a file before it spends time hashing it.
    tells_upload_limit: bool = False
    # A read whose answer may be kept in memory and named by an ETag made from the store's
    # data version (api/answers.py): False for one that shows what moves without a write
    # that moves the version (a token's last access, a job kept alive, a refused login).
    cached: bool = True
    # Whether a write can change an answer that is kept (its commit then moves the data
    # version, and every kept answer and tag goes stale): False for a job's bookkeeping,
    # which only the job list and the audit log show, both made anew at each request
    # (tests/test_answers.py holds every kept answer to it).
    changes_answers: bool = True
    # An entity list's name among its entity's counts (`x-count-field` in the document: the
    # console shows each list with its size).
    count_field: str | None = None
    # A console page: an ETag of the release, a 304 when the browser holds it.
    page: bool = False


# --- the table ------------------------------------------------------------------------------

TOKEN_SORT = tuple(store_accounts.TOKEN_SORT_COLUMNS)
TIME_SORT = ("created_at", "updated_at")
NEWEST_FIRST = (SortKey("created_at", True),)
NODE_SORT = ("name", "objectid", "label")
BY_NAME = (SortKey("name", False), SortKey("objectid", False))
PAGE = Paging(default_limit=1000)
JOB_SORT = tuple(store_uploads.JOB_SORT_COLUMNS)
USER_ID = PathParameter("user_id", "user_id", "User id", UUID_SCHEMA, parse_uuid)
JOB_ID = PathParameter(
    "file_upload_job_id", "job_id", "File-upload job id", INT32_SCHEMA, parse_path_int32
)


SAVED_QUERY_ID = PathParameter(
    "saved_query_id", "query_id", "Saved query id", INT32_SCHEMA, parse_path_int32
)
SCOPE_TEXT = (
    "owned (the caller's), shared (with the caller), public, or all; several comma-separated"
)
EXPORT_FORMAT_TEXT = "json or zip (one file a query, the reference's)"
IMPORT_TEXT = (
    "Saved queries to import, as JSON or a zip of JSON files: one query ({name, query, "
    "description}, the reference's export), a list of them (graphsvc's JSON export, or the "
    "community query library's bundle), or a legacy BloodHound customqueries.json"
)


TAG_ID = PathParameter(
    "asset_group_tag_id", "tag_id", "Asset group tag id", INT32_SCHEMA, parse_path_int32
)
SELECTOR_ID = PathParameter(
    "asset_group_tag_selector_id",
    "selector_id",
    "Selector id",
    INT32_SCHEMA,
    parse_path_int32,
)
MEMBER_ID = PathParameter(
    "asset_group_tag_member_id", "member_id", "A member's graph id", INT32_SCHEMA, parse_path_int32
)
ASSET_GROUP_ID = PathParameter(
    "asset_group_id", "asset_group_id", "Asset group id", INT32_SCHEMA, parse_path_int32
)
ASSET_GROUP_SELECTOR_ID = PathParameter(
    "asset_group_selector_id",
    "asset_group_selector_id",
    "Asset group selector id",
    INT32_SCHEMA,
    parse_path_int32,
)
ENVIRONMENTS = QueryTexts(
    "environments", "environments", "Repeatable: only members of these domains or tenants"
)
COUNTS_FLAG = QueryFlag("counts", "counts", False, "Whether to add the counts; default false")
MEMBER_LIST = (
    ENVIRONMENTS,
    Paging(default_limit=50),
    Filters(store_tags.MEMBER_FILTERS, others=("skip", "limit", "sort_by", "environments")),
    Sorting(tuple(store_tags.MEMBER_SORT_COLUMNS), (SortKey("id", False),)),
)


def build_tag_operations() -> tuple[Operation, ...]:
    """The reference's asset-group-tags routes (tags, selectors, members, history), and its
    older asset-groups routes (graphsvc/tags/legacy.py)."""
    errors = (*ERRORS, "409")
    base = f"{V2}/asset-group-tags"
    tag = f"{base}/{{asset_group_tag_id}}"
    selector = f"{tag}/selectors/{{asset_group_tag_selector_id}}"
    group = f"{V2}/asset-groups/{{asset_group_id}}"
    return (
        Operation(
            "GET", base, "GetAssetGroupTags",
            "The tags: Tier Zero, Owned and the labels added (counts: their selectors and "
            "members)",
            tags.list_tags, wire.TagListResponse, ERRORS, permission=READ_GRAPH,
            parameters=(COUNTS_FLAG, Filters(store_tags.TAG_FILTERS, others=("counts",))),
        ),
        Operation(
            "POST", base, "CreateAssetGroupTag",
            "Add a label (type 2): a tag of objects the analyst cares about",
            tags.create_tag, wire.TagResponse, errors, permission=WRITE_GRAPH,
            parameters=(TheCaller(),), request_body=wire.CreateTagRequest, writes=True,
            status=201,
        ),
        Operation(
            "POST", f"{base}/search", "SearchAssetGroupTags",
            "Tags of a type, their selectors and members whose name (or object id) holds the "
            "text",
            tags.search_tags, wire.TagSearchResponse, ERRORS, permission=READ_GRAPH,
            request_body=wire.TagSearchRequest,
        ),
        Operation(
            "POST", f"{base}/preview-selectors", "PreviewSelectors",
            "What seeds would select under an expansion (0 none, 1 all, 2 children, 3 "
            "parents), on the graph as it is; nothing is kept",
            tags.preview_selectors, wire.PreviewResponse, ERRORS, permission=READ_GRAPH,
            parameters=(
                TheCypherEngine(),
                QueryInt32("limit", "limit", "Most members answered; default 200"),
            ),
            request_body=wire.PreviewRequest, max_body_bytes=1024 * 1024,
        ),
        Operation(
            "GET", tag, "GetAssetGroupTag", "One tag",
            tags.get_tag, wire.TagOneResponse, ERRORS, permission=READ_GRAPH,
            parameters=(TAG_ID,),
        ),
        Operation(
            "PATCH", tag, "UpdateAssetGroupTag",
            "Rename a label or change a tag's description (Tier Zero and Owned keep their "
            "names)",
            tags.update_tag, wire.TagResponse, errors, permission=WRITE_GRAPH,
            parameters=(TheCaller(), TAG_ID), request_body=wire.UpdateTagRequest, writes=True,
        ),
        Operation(
            "DELETE", tag, "DeleteAssetGroupTag",
            "Delete a label, its selectors and its members (not Tier Zero nor Owned)",
            tags.delete_tag, None, ERRORS, permission=WRITE_GRAPH,
            parameters=(TheCaller(), TAG_ID), writes=True, status=204,
        ),
        Operation(
            "GET", f"{tag}/members", "GetAssetGroupMembersByTag",
            "A tag's members, one page",
            tags.list_tag_members, wire.PagedMembers, ERRORS, permission=READ_GRAPH,
            parameters=(TAG_ID, *MEMBER_LIST),
        ),
        Operation(
            "GET", f"{tag}/exposure", "ListAssetGroupTagExposure",
            "The principals with a path to a tag's members, shortest first, with their first "
            "step; and the share of enabled users among them",
            paths.list_tag_exposure, wire.ExposureList, ERRORS, permission=READ_GRAPH,
            parameters=(TAG_ID, Paging(default_limit=10), ThePathIndex()),
        ),
        Operation(
            "GET", f"{tag}/members/counts", "GetAssetGroupTagMemberCountsByKind",
            "How many members a tag has, in all and by kind",
            tags.count_tag_members, wire.MemberCountsResponse, ERRORS, permission=READ_GRAPH,
            parameters=(TAG_ID, ENVIRONMENTS),
        ),
        Operation(
            "GET", f"{tag}/members/{{asset_group_tag_member_id}}", "GetAssetGroupTagMemberInfo",
            "One member of a tag: its properties and the selectors that selected it",
            tags.get_tag_member, wire.MemberInfoResponse, ERRORS, permission=READ_GRAPH,
            parameters=(TAG_ID, MEMBER_ID),
        ),
        Operation(
            "GET", f"{tag}/selectors", "GetAssetGroupTagSelectors",
            "A tag's selectors with their seeds, one page (counts: the members each selects)",
            tags.list_selectors, wire.PagedSelectors, ERRORS, permission=READ_GRAPH,
            parameters=(
                TAG_ID,
                COUNTS_FLAG,
                Paging(default_limit=50),
                Filters(
                    store_tags.SELECTOR_FILTERS,
                    others=("skip", "limit", "sort_by", "counts", "environments"),
                ),
                Sorting(tuple(store_tags.SELECTOR_SORT_COLUMNS), (SortKey("id", False),)),
            ),
        ),
        Operation(
            "POST", f"{tag}/selectors", "CreateAssetGroupTagSelector",
            "Add a selector to a tag (object-id or Cypher seeds); its members are selected at "
            "once",
            tags.create_selector, wire.SelectorResponse, errors, permission=WRITE_GRAPH,
            parameters=(TheCypherEngine(), TheCaller(), TAG_ID),
            request_body=wire.CreateSelectorRequest, max_body_bytes=1024 * 1024, writes=True,
            status=201,
        ),
        Operation(
            "GET", selector, "GetAssetGroupTagSelector", "One selector of a tag",
            tags.get_selector, wire.SelectorOneResponse, ERRORS, permission=READ_GRAPH,
            parameters=(TAG_ID, SELECTOR_ID),
        ),
        Operation(
            "PATCH", selector, "UpdateAssetGroupTagSelector",
            "Change a selector, or enable or disable it (a default one: only that and its "
            "certification); its members are selected again at once",
            tags.update_selector, wire.SelectorResponse, errors, permission=WRITE_GRAPH,
            parameters=(TheCypherEngine(), TheCaller(), TAG_ID, SELECTOR_ID),
            request_body=wire.UpdateSelectorRequest, max_body_bytes=1024 * 1024, writes=True,
        ),
        Operation(
            "DELETE", selector, "DeleteAssetGroupTagSelector",
            "Delete a selector (not a default one) and what it alone selected",
            tags.delete_selector, None, ERRORS, permission=WRITE_GRAPH,
            parameters=(TheCaller(), TAG_ID, SELECTOR_ID), writes=True, status=204,
        ),
        Operation(
            "GET", f"{selector}/members", "GetAssetGroupMembersBySelector",
            "The members a selector selected, one page (409 while it is disabled)",
            tags.list_selector_members, wire.PagedMembers, errors, permission=READ_GRAPH,
            parameters=(TAG_ID, SELECTOR_ID, *MEMBER_LIST),
        ),
        Operation(
            "GET", f"{selector}/members/counts", "GetAssetGroupSelectorMemberCountsByKind",
            "How many members a selector selected, in all and by kind",
            tags.count_selector_members, wire.MemberCountsResponse, ERRORS,
            permission=READ_GRAPH, parameters=(TAG_ID, SELECTOR_ID, ENVIRONMENTS),
        ),
        Operation(
            "GET", f"{V2}/asset-group-tags-history", "GetAssetGroupTagHistory",
            "The changes made to tags and selectors, newest first, one page",
            tags.list_history, wire.PagedHistory, ERRORS, permission=READ_GRAPH,
            parameters=(
                Filters(store_tags.HISTORY_FILTERS),
                Sorting(tuple(store_tags.HISTORY_SORT_COLUMNS), (SortKey("created_at", True),)),
                Paging(default_limit=50),
            ),
        ),
        Operation(
            "POST", f"{V2}/asset-group-tags-history", "SearchAssetGroupTagHistory",
            "The changes whose actor, email, action or target holds the text, one page",
            tags.search_history, wire.PagedHistory, ERRORS, permission=READ_GRAPH,
            parameters=(Paging(default_limit=50),), request_body=wire.HistorySearchRequest,
        ),
        Operation(
            "GET", f"{V2}/asset-groups", "ListAssetGroups",
            "The asset groups (the tags, the older way): Admin Tier Zero, Owned, the labels",
            asset_groups.list_asset_groups, wire.AssetGroupListResponse, ERRORS,
            permission=READ_GRAPH,
            parameters=(
                Filters(asset_groups.ASSET_GROUP_FILTERS, others=("sort_by",)),
                Sorting(asset_groups.ASSET_GROUP_SORT, (SortKey("id", False),)),
            ),
        ),
        Operation(
            "POST", f"{V2}/asset-groups", "CreateAssetGroup",
            "Add an asset group (a label) with its tag",
            asset_groups.create_asset_group, wire.AssetGroupResponse, errors,
            permission=WRITE_GRAPH, parameters=(TheCaller(),),
            request_body=wire.CreateAssetGroupRequest, writes=True, status=201,
        ),
        Operation(
            "GET", group, "GetAssetGroup", "One asset group",
            asset_groups.get_asset_group, wire.AssetGroupResponse, ERRORS,
            permission=READ_GRAPH, parameters=(ASSET_GROUP_ID,),
        ),
        Operation(
            "PUT", group, "UpdateAssetGroup", "Rename an asset group (not a system one)",
            asset_groups.rename_asset_group, wire.AssetGroupResponse, errors,
            permission=WRITE_GRAPH, parameters=(TheCaller(), ASSET_GROUP_ID),
            request_body=wire.UpdateAssetGroupRequest, writes=True,
        ),
        Operation(
            "DELETE", group, "DeleteAssetGroup",
            "Delete an asset group (409 for Admin Tier Zero and Owned)",
            asset_groups.delete_asset_group, None, errors, permission=WRITE_GRAPH,
            parameters=(TheCaller(), ASSET_GROUP_ID), writes=True, status=204,
        ),
        Operation(
            "GET", f"{group}/custom-selectors", "GetAssetGroupCustomMemberCount",
            "How many selectors of an asset group are not system ones",
            asset_groups.count_custom_selectors, wire.CustomSelectorCountResponse, ERRORS,
            permission=READ_GRAPH, parameters=(ASSET_GROUP_ID,),
        ),
        *(
            Operation(
                method, f"{group}/selectors", operation_id,
                "Add and remove an asset group's object-id selectors by name "
                "([{selector_name, sid, action: add|remove}]); its members follow at once"
                + (" (deprecated: PUT)" if method == "POST" else ""),
                asset_groups.change_selectors, wire.SelectorChangesResponse, errors,
                permission=WRITE_GRAPH,
                parameters=(TheCypherEngine(), TheCaller(), ASSET_GROUP_ID),
                request_body=list[wire.SelectorChange], max_body_bytes=4 * 1024 * 1024,
                writes=True, status=201,
            )
            for method, operation_id in (
                ("PUT", "UpdateAssetGroupSelectors"),
                ("POST", "UpdateAssetGroupSelectorsDeprecated"),
            )
        ),
        Operation(
            "DELETE", f"{group}/selectors/{{asset_group_selector_id}}",
            "DeleteAssetGroupSelector",
            "Remove one selector of an asset group (409 for a system one)",
            asset_groups.delete_asset_group_selector, None, errors, permission=WRITE_GRAPH,
            parameters=(TheCaller(), ASSET_GROUP_ID, ASSET_GROUP_SELECTOR_ID), writes=True,
            status=204,
        ),
        Operation(
            "GET", f"{group}/members", "ListAssetGroupMembers",
            "An asset group's members, one page",
            asset_groups.list_asset_group_members, wire.PagedAssetGroupMembers, ERRORS,
            permission=READ_GRAPH,
            parameters=(
                ASSET_GROUP_ID,
                Paging(default_limit=100),
                Filters(asset_groups.MEMBER_FILTERS),
                Sorting(asset_groups.MEMBER_SORT, (SortKey("object_id", False),)),
            ),
        ),
        Operation(
            "GET", f"{group}/members/counts", "ListAssetGroupMemberCountsByKind",
            "How many members an asset group has, in all and by kind",
            asset_groups.count_asset_group_members, wire.MemberCountsResponse, ERRORS,
            permission=READ_GRAPH, parameters=(ASSET_GROUP_ID,),
        ),
    )  # fmt: skip


def build_saved_query_operations() -> tuple[Operation, ...]:
    """The reference's saved-queries routes."""
    errors = (*ERRORS, "409")
    return (
        Operation(
            "GET",
            f"{V2}/saved-queries",
            "ListSavedQueries",
            "The saved queries the caller owns, or those shared with it or public (scope)",
            saved_queries.list_saved_queries,
            wire.PagedSavedQueries,
            ERRORS,
            permission=READ_SAVED_QUERIES,
            parameters=(
                TheCaller(),
                QueryText("scope", "scope", f"{SCOPE_TEXT}; default owned"),
                Paging(default_limit=10000),
                Filters(
                    store_saved_queries.SAVED_QUERY_FILTERS,
                    others=("skip", "limit", "sort_by", "scope"),
                ),
                Sorting(
                    tuple(store_saved_queries.SAVED_QUERY_SORT_COLUMNS), (SortKey("id", False),)
                ),
            ),
        ),
        Operation(
            "POST",
            f"{V2}/saved-queries",
            "CreateSavedQuery",
            "Save a query for the caller (its name unique among the caller's)",
            saved_queries.create_saved_query,
            wire.SavedQueryResponse,
            errors,
            permission=WRITE_SAVED_QUERIES,
            parameters=(TheCaller(),),
            request_body=wire.SavedQueryRequest,
            max_body_bytes=1024 * 1024,  # a query of up to 100,000 characters
            writes=True,
            status=201,
        ),
        Operation(
            "GET",
            f"{V2}/saved-queries/export",
            "ExportSavedQueries",
            "The saved queries in a scope, as a zip of files (one a query) or one JSON list",
            saved_queries.export_saved_queries,
            None,
            ERRORS,
            permission=READ_SAVED_QUERIES,
            parameters=(
                TheCaller(),
                QueryText("scope", "scope", SCOPE_TEXT, required=True),
                QueryChoice(
                    "format", ("zip", "json"), (), f"{EXPORT_FORMAT_TEXT}; default zip", "format"
                ),
            ),
            downloads=("application/zip", "application/json"),
            download_json=wire.TransferableQuery,
            cached=False,  # each export is audit-logged as it is made
        ),
        Operation(
            "POST",
            f"{V2}/saved-queries/import",
            "ImportSavedQueries",
            "Import saved queries for the caller: each valid entry kept, each malformed one (or "
            "one whose name the caller has) refused by name",
            saved_queries.import_saved_queries,
            wire.SavedQueryImportResponse,
            (*ERRORS, "415"),
            permission=WRITE_SAVED_QUERIES,
            parameters=(TheCaller(),),
            writes=True,
            status=201,
            upload=True,
            upload_description=IMPORT_TEXT,
            max_body_bytes=16 * 1024 * 1024,
        ),
        Operation(
            "GET",
            f"{V2}/saved-queries/{{saved_query_id}}",
            "GetSavedQuery",
            "A saved query the caller owns, or that is shared with it or public",
            saved_queries.get_saved_query,
            wire.SavedQueryResponse,
            ERRORS,
            permission=READ_SAVED_QUERIES,
            parameters=(TheCaller(), SAVED_QUERY_ID),
        ),
        Operation(
            "PUT",
            f"{V2}/saved-queries/{{saved_query_id}}",
            "UpdateSavedQuery",
            "Change a saved query's name, query or description (those given, not empty)",
            saved_queries.update_saved_query,
            wire.SavedQueryResponse,
            errors,
            permission=WRITE_SAVED_QUERIES,
            parameters=(TheCaller(), SAVED_QUERY_ID),
            request_body=wire.SavedQueryRequest,
            max_body_bytes=1024 * 1024,
            writes=True,
        ),
        Operation(
            "DELETE",
            f"{V2}/saved-queries/{{saved_query_id}}",
            "DeleteSavedQuery",
            "Delete a saved query (its owner's, or an administrator's once public)",
            saved_queries.delete_saved_query,
            None,
            ERRORS,
            permission=WRITE_SAVED_QUERIES,
            parameters=(TheCaller(), SAVED_QUERY_ID),
            writes=True,
            status=204,
        ),
        Operation(
            "GET",
            f"{V2}/saved-queries/{{saved_query_id}}/permissions",
            "GetSavedQueryPermissions",
            "Whether a saved query is public, and the users it is shared with",
            saved_queries.get_permissions,
            wire.SavedQueryPermissionsResponse,
            ERRORS,
            permission=READ_SAVED_QUERIES,
            parameters=(TheCaller(), SAVED_QUERY_ID),
        ),
        Operation(
            "PUT",
            f"{V2}/saved-queries/{{saved_query_id}}/permissions",
            "ShareSavedQuery",
            "Make a saved query public, private (public false, no user_ids), or share it with "
            "users",
            saved_queries.share_saved_query,
            wire.SavedQueryPermissionsResponse,
            ERRORS,
            permission=WRITE_SAVED_QUERIES,
            parameters=(TheCaller(), SAVED_QUERY_ID),
            request_body=wire.ShareRequest,
            writes=True,
        ),
        Operation(
            "DELETE",
            f"{V2}/saved-queries/{{saved_query_id}}/permissions",
            "UnshareSavedQuery",
            "Stop sharing a saved query with users (a user it is shared with may remove itself)",
            saved_queries.unshare_saved_query,
            None,
            ERRORS,
            permission=WRITE_SAVED_QUERIES,
            parameters=(TheCaller(), SAVED_QUERY_ID),
            request_body=wire.UnshareRequest,
            writes=True,
            status=204,
        ),
        Operation(
            "GET",
            f"{V2}/saved-queries/{{saved_query_id}}/export",
            "ExportSavedQuery",
            "One saved query as a file: JSON (the reference's) or a zip",
            saved_queries.export_saved_query,
            None,
            ERRORS,
            permission=READ_SAVED_QUERIES,
            parameters=(
                TheCaller(),
                SAVED_QUERY_ID,
                QueryChoice(
                    "format", ("json", "zip"), (), f"{EXPORT_FORMAT_TEXT}; default json", "format"
                ),
            ),
            downloads=("application/json", "application/zip"),
            download_json=wire.TransferableQuery,
            cached=False,  # each export is audit-logged as it is made
        ),
    )


async def read_analysis_settings(ctx: Context, request: Request) -> bool:
    """What `PUT /api/v2/analysis` passes its analysis (as `prepared`): the Citrix setting."""
    return ctx.settings.citrix_rdp_support


def object_id_of(label: str) -> PathParameter:
    return PathParameter(
        "object_id",
        "object_id",
        f"{label} object id, case-insensitive",
        {"type": "string"},
        parse_text,
    )


def build_entity_operations() -> tuple[Operation, ...]:
    """The entity routes, from the table in graph.entities: each kind's properties and
    counts, then each of its lists, paged and sorted as the DCOM rights are."""
    getters = tuple(
        Operation(
            "GET",
            f"{V2}/{segment}/{{object_id}}",
            f"Get{label}Entity",
            f"A {label}'s properties and, unless counts=false, the size of each of its lists",
            build_entity_getter(segment),
            ENTITY_SHAPES[segment][1],
            ERRORS,
            permission=READ_GRAPH,
            parameters=(
                object_id_of(label),
                QueryFlag("counts", "counts", True, "Count each list; default true"),
            ),
        )
        for segment, label in ENTITY_KINDS.items()
    )
    lists = tuple(
        Operation(
            "GET",
            f"{V2}/{entry.segment}/{{object_id}}/{entry.path}",
            f"List{ENTITY_KINDS[entry.segment]}"
            + "".join(word.title() for word in entry.path.split("-")),
            entry.summary,
            build_list_reader(entry),
            wire.PagedRelatedNodeList,
            ERRORS,
            permission=READ_GRAPH,
            parameters=(
                object_id_of(ENTITY_KINDS[entry.segment]),
                Paging(default_limit=10),
                QueryChoice(
                    "type", ("list",), ("graph",), "Only 'list' is supported; 'graph' is a 400"
                ),
                Sorting(NODE_SORT, BY_NAME),
            ),
            count_field=entry.count_key,
        )
        for entry in ENTITY_LISTS
    )
    return getters + lists


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "GET",
        "/health",
        "Health",
        "Liveness and database reachability",
        check_health,
        wire.HealthResponse,
        ("413", "503"),
        authentication="none",
    ),
    Operation(
        "GET",
        "/ready",
        "Ready",
        "Readiness: whether the database (and Redis, when configured) answer",
        check_readiness,
        wire.ReadyResponse,
        ("413", "503"),
        authentication="none",
    ),
    Operation(
        "GET",
        "/metrics",
        "Metrics",
        "Prometheus metrics of this process (GRAPHSVC_METRICS: off, open or token)",
        serve_metrics,
        None,
        ("401", "404", "413", "429"),
        authentication="none",
        media_type=METRICS_MEDIA_TYPE,
    ),
    Operation(
        "GET",
        f"{V2}/spec/openapi.json",
        "OpenAPIDocument",
        "This document",
        serve_openapi,
        None,
        ("413",),
        authentication="none",
    ),
    Operation(
        "GET",
        "/",
        "RedirectToConsole",
        "A redirect to the web console (404 when GRAPHSVC_CONSOLE=off)",
        redirect_to_console,
        None,
        ("404", "413", "429"),
        authentication="none",
        media_type=HTML,
        status=302,
    ),
    Operation(
        "GET",
        "/ui/",
        "Console",
        "The web console: statistics, entities, paths, tokens and uploads, read through "
        "this API as the signed-in user (404 when GRAPHSVC_CONSOLE=off)",
        serve_console,
        None,
        ("404", "413", "429"),
        authentication="none",
        media_type=HTML,
        page=True,
    ),
    Operation(
        "GET",
        "/ui/{version}/assets/{name}",
        "ConsoleAsset",
        "A script or style of the web console, at an address named by the release's files",
        serve_console_asset,
        None,
        ("404", "413", "429"),
        authentication="none",
        parameters=(
            PathParameter(
                "version", "version", "The release's files' hash", {"type": "string"}, parse_text
            ),
            PathParameter("name", "name", "The file's name", {"type": "string"}, parse_text),
        ),
        media_type="text/*",  # a script or a style
    ),
    Operation(
        "GET",
        f"{V2}/docs",
        "APIReference",
        "An interactive reference of this document (404 when GRAPHSVC_CONSOLE=off)",
        serve_api_reference,
        None,
        ("404", "413", "429"),
        authentication="none",
        media_type=HTML,
        page=True,
    ),
    Operation(
        "POST",
        f"{V2}/login",
        "Login",
        "Log in with a secret; returns a session JWT",
        log_in,
        wire.LoginResponse,
        ("400", "401", "403", "408", "413", "429", "500", "503"),
        authentication="none",
        request_body=wire.LoginRequest,
    ),
    Operation(
        "POST",
        f"{V2}/logout",
        "Logout",
        "End the session of the Bearer JWT",
        log_out,
        wire.LogoutResponse,
        ("400", "401", "408", "413", "429", "500", "503"),
        authentication="session",
    ),
    Operation(
        "GET",
        f"{V2}/data-quality-stats-aggregations",
        "ListDataQualityAggregations",
        "Data quality aggregations by environment kind",
        data_quality.list_aggregations,
        wire.PagedAggregations,
        ERRORS,
        permission=READ_GRAPH,
        parameters=(
            QueryInt32(
                "schema_environment_kind_id",
                "environment_kind_id",
                "Environment kind id",
                required=True,
            ),
            QueryInt32(
                "schema_extension_id", "extension_id", "Graph schema extension id; 404 if unknown"
            ),
            Sorting(TIME_SORT, NEWEST_FIRST),
            TimeWindow(),
            PAGE,
        ),
    ),
    Operation(
        "GET",
        f"{V2}/azure-tenants/{{tenant_id}}/data-quality-stats",
        "ListAzureTenantDataQualityStats",
        "Azure tenant data quality stats",
        data_quality.list_tenant_stats,
        wire.PagedTenantStats,
        ERRORS,
        permission=READ_GRAPH,
        parameters=(
            PathParameter(
                "tenant_id",
                "tenant_id",
                "Tenant id, matched case-insensitively",
                UUID_SCHEMA,
                parse_uuid,
            ),
            Sorting(TIME_SORT, NEWEST_FIRST),
            TimeWindow(),
            PAGE,
        ),
    ),
    Operation(
        "GET",
        f"{V2}/ad-domains/{{domain_id}}/data-quality-stats",
        "ListADDomainDataQualityStats",
        "AD domain data quality stats: one record per run that collected the domain",
        data_quality.list_domain_stats,
        wire.PagedDomainStats,
        ERRORS,
        permission=READ_GRAPH,
        parameters=(
            PathParameter(
                "domain_id",
                "domain_sid",
                "The domain's SID (its object id), matched case-insensitively",
                {"type": "string"},
                parse_text,
            ),
            Sorting(TIME_SORT, NEWEST_FIRST),
            TimeWindow(),
            PAGE,
        ),
    ),
    Operation(
        "GET",
        f"{V2}/saml/providers/{{saml_provider_id}}",
        "GetSAMLProvider",
        "Get SAML provider",
        saml.get_saml_provider,
        wire.SamlProviderResponse,
        ERRORS,
        permission=MANAGE_PROVIDERS,
        parameters=(
            PathParameter(
                "saml_provider_id",
                "provider_id",
                "SAML provider id",
                INT32_SCHEMA,
                parse_path_int32,
            ),
            BaseUrl(),
        ),
    ),
    Operation(
        "GET",
        f"{V2}/clients/{{client_id}}",
        "GetClient",
        "Get client (Enterprise edition)",
        clients.get_client,
        wire.ClientResponse,
        ERRORS,
        permission=READ_CLIENTS,
        parameters=(PathParameter("client_id", "client_id", "Client id", UUID_SCHEMA, parse_uuid),),
        enterprise_only=True,
    ),
    Operation(
        "GET",
        f"{V2}/computers/{{object_id}}/dcom-rights",
        "ListComputerDCOMRights",
        "Entities with DCOM rights on a computer",
        list_dcom_rights,
        wire.PagedNodeList,
        ERRORS,
        permission=READ_GRAPH,
        parameters=(
            PathParameter(
                "object_id",
                "object_id",
                "Computer object id, case-insensitive",
                {"type": "string"},
                parse_text,
            ),
            Paging(default_limit=10),
            QueryChoice(
                "type", ("list",), ("graph",), "Only 'list' is supported; 'graph' is a 400"
            ),
            Sorting(NODE_SORT, BY_NAME),
        ),
    ),
    Operation(
        "GET",
        f"{V2}/self",
        "GetSelf",
        "The caller: its user, role and permissions, and the token of a signed request",
        sessions.get_self,
        wire.SelfResponse,
        ERRORS,
        parameters=(TheCaller(),),
        cached=False,  # the calling token and its last_access, which moves as it signs
    ),
    Operation(
        "POST",
        f"{V2}/tokens",
        "CreateAuthToken",
        "Create an API token (its key is in this answer only)",
        tokens.create_api_token,
        wire.AuthTokenResponse,
        ERRORS,
        permission=CREATE_TOKEN,
        parameters=(TheCaller(), TokenKeys()),
        request_body=wire.CreateTokenRequest,
        writes=True,
    ),
    Operation(
        "GET",
        f"{V2}/tokens",
        "ListAuthTokens",
        "List API tokens (never their keys): the caller's, or with auth/ManageUsers anyone's",
        tokens.list_api_tokens,
        wire.AuthTokenListResponse,
        ERRORS,
        permission=CREATE_TOKEN,
        parameters=(
            TheCaller(),
            Filters(store_accounts.TOKEN_FILTERS, others=("sort_by",)),
            Sorting(TOKEN_SORT, (SortKey("created_at", False),)),
        ),
        cached=False,  # last_access moves as tokens sign requests
    ),
    Operation(
        "GET",
        f"{V2}/file-upload/accepted-types",
        "ListAcceptedFileUploadTypes",
        "The content types a file-upload job takes",
        jobs.list_accepted_types,
        wire.AcceptedTypes,
        ERRORS,
    ),
    Operation(
        "POST",
        f"{V2}/file-upload/start",
        "CreateFileUploadJob",
        "Start a file-upload job",
        jobs.start_upload_job,
        wire.FileUploadJobResponse,
        ERRORS,
        permission=INGEST,
        parameters=(TheCaller(),),
        writes=True,
        changes_answers=False,
        status=201,
        tells_upload_limit=True,
    ),
    Operation(
        "GET",
        f"{V2}/file-upload",
        "ListFileUploadJobs",
        "File-upload jobs, newest first, to any user: every job with graphdb/Read, else its own",
        jobs.list_upload_jobs,
        wire.PagedFileUploadJobs,
        ERRORS,
        parameters=(
            TheCaller(),
            Paging(default_limit=100),
            Sorting(JOB_SORT, (SortKey("id", True),)),
            Filters(store_uploads.JOB_FILTERS),
        ),
        cached=False,  # a job's updated_at and status move as its files arrive and ingest
    ),
    Operation(
        "POST",
        f"{V2}/file-upload/{{file_upload_job_id}}",
        "UploadFileToJob",
        "Send one file to a running job: collector JSON or a SharpHound zip",
        jobs.store_upload,
        wire.FileUploadJobResponse,
        (*ERRORS, "415", "507"),
        permission=INGEST,
        parameters=(TheCaller(), JOB_ID),
        writes=True,
        changes_answers=False,
        status=202,
        upload=True,
        admit=jobs.check_upload_target,
        receiving=jobs.note_file_arriving,
        cut_off=jobs.fail_on_stop,
    ),
    Operation(
        "POST",
        f"{V2}/file-upload/{{file_upload_job_id}}/end",
        "EndFileUploadJob",
        "End a job: it is queued, and ingested as one run (all or nothing)",
        jobs.end_upload_job,
        wire.FileUploadJobResponse,
        ERRORS,
        permission=INGEST,
        parameters=(TheCaller(), JOB_ID),
        writes=True,
        changes_answers=False,
    ),
    Operation(
        "GET",
        f"{V2}/file-upload/{{file_upload_job_id}}/completed-tasks",
        "ListFileUploadCompletedTasks",
        "Each document a finished job's ingest read, with its errors and warnings",
        jobs.list_completed_tasks,
        wire.CompletedTaskList,
        ERRORS,
        permission=INGEST,
        parameters=(TheCaller(), JOB_ID),
    ),
    Operation(
        "POST",
        f"{V2}/file-upload/{{file_upload_job_id}}/cancel",
        "CancelFileUploadJob",
        "Cancel a Running job (graphsvc's own route): Canceled, its files dropped, nothing "
        "ingested",
        jobs.cancel_upload_job,
        wire.FileUploadJobResponse,
        ERRORS,
        permission=INGEST,
        parameters=(TheCaller(), JOB_ID),
        writes=True,
        changes_answers=False,
    ),
    Operation(
        "DELETE",
        f"{V2}/tokens/{{token_id}}",
        "DeleteAuthToken",
        "Revoke an API token: the caller's own, or with auth/ManageUsers anyone's",
        tokens.revoke_api_token,
        wire.AuthTokenResponse,
        ERRORS,
        permission=CREATE_TOKEN,
        parameters=(
            TheCaller(),
            PathParameter("token_id", "token_id", "Token id", UUID_SCHEMA, parse_uuid),
            TokenCache(),
        ),
        writes=True,
    ),
    Operation(
        "GET",
        f"{V2}/search",
        "Search",
        "Find nodes by object id (exact) or name (contains, case-insensitive)",
        nodes.search,
        wire.PagedSearchResults,
        ERRORS,
        permission=READ_GRAPH,
        parameters=(
            QueryText("q", "q", "An object id, or part of a name", required=True),
            QueryText("type", "kind", "Only nodes of this kind (Computer, User, AZTenant, ...)"),
            Paging(default_limit=10, cap=100),
        ),
    ),
    Operation(
        "GET",
        f"{V2}/graphs/shortest-path",
        "GetShortestPath",
        "Every shortest path between two objects, as one graph of their nodes and edges",
        paths.find_shortest_paths,
        wire.PathGraphResponse,
        ERRORS,
        permission=READ_GRAPH,
        parameters=(
            QueryText("start_node", "start_node", "The start's object id", required=True),
            QueryText("end_node", "end_node", "The end's object id", required=True),
            QueryText(
                "relationship_kinds",
                "relationship_kinds",
                "in:Kind1,Kind2 (only these) or nin:Kind1,Kind2 (the traversable kinds but "
                "these); without it, the traversable kinds",
            ),
            QueryFlag(
                "only_traversable",
                None,
                False,
                "Accepted for the reference's clients; the kinds are as relationship_kinds says",
            ),
            ThePathIndex(),
        ),
    ),
    Operation(
        "GET",
        f"{V2}/graphs/paths-between",
        "ListPathsBetween",
        "Shortest paths from each of a set of objects (a tag's members, or object ids) to the "
        "nearest of another set: the starts nearest first, at most `limit` paths",
        paths.find_paths_between,
        wire.PathSetResponse,
        ERRORS,
        permission=READ_GRAPH,
        parameters=(
            QueryText("start_tag", "start_tag", "The starts: a tag's id or name (owned...)"),
            QueryText("start_nodes", "start_nodes", "The starts: object ids, comma-separated"),
            QueryText("end_tag", "end_tag", "The ends: a tag's id or name (tier-zero...)"),
            QueryText("end_nodes", "end_nodes", "The ends: object ids, comma-separated"),
            QueryText(
                "relationship_kinds",
                "relationship_kinds",
                "in:Kind1,Kind2 or nin:Kind1,Kind2, as shortest-path takes it",
            ),
            Paging(default_limit=100),
            ThePathIndex(),
        ),
    ),
    Operation(
        "POST",
        f"{V2}/graphs/cypher",
        "RunCypherQuery",
        "Run a read-only Cypher query on the graph; its nodes, relationships and paths as one "
        "graph, its other values as literals (docs/cypher.md: the language, the caps)",
        cypher.cypher_query,
        wire.CypherResponse,
        ERRORS,
        permission=READ_GRAPH,
        parameters=(TheCypherEngine(),),
        request_body=wire.CypherQueryRequest,
        # A query with a long list of object ids as a parameter outgrows the 16 KiB default.
        max_body_bytes=1024 * 1024,
    ),
    Operation(
        "GET",
        f"{V2}/graphs/source-kinds",
        "ListSourceKinds",
        "The source kinds nodes are deleted by (clear-database's deleteSourceKinds): Base, "
        "AZBase and each OpenGraph source kind ingested, then 0, the nodes of none",
        clearing.list_source_kinds,
        wire.SourceKindListResponse,
        ERRORS,
        permission=READ_GRAPH,
    ),
    Operation(
        "POST",
        f"{V2}/clear-database",
        "DeleteBloodHoundDatabase",
        "Delete collected graph data (all of it, by source kind, or relationships of given "
        "kinds), file ingest history or data-quality history, at once and audited",
        clearing.clear_database,
        None,
        (*ERRORS, "409"),
        permission=WIPE_DATABASE,
        request_body=wire.ClearDatabaseRequest,
        writes=True,
        status=204,
    ),
    Operation(
        "GET",
        f"{V2}/datapipe/status",
        "GetDatapipeStatus",
        "What the pipeline does (idle, or ingesting while an upload job is ingested) and when "
        "the analysis last began and ended",
        requests.datapipe_status,
        wire.DatapipeStatusResponse,
        ERRORS,
        cached=False,  # the ingest lease moves without a write that moves the data version
    ),
    Operation(
        "PUT",
        f"{V2}/analysis",
        "StartAnalysis",
        "Analyse the whole graph now (derived relationships, tier zero); answered once done",
        requests.request_analysis,
        None,
        (*ERRORS, "409"),
        permission=WRITE_GRAPH,
        writes=True,
        prepare=read_analysis_settings,
        status=202,
    ),
    Operation(
        "GET",
        f"{V2}/domains/{{object_id}}/exposure",
        "ListDomainExposure",
        "The principals with a path to the domain's tier zero, shortest first, with their "
        "first step; and the share of the domain's enabled users among them",
        paths.list_exposure,
        wire.ExposureList,
        ERRORS,
        permission=READ_GRAPH,
        parameters=(object_id_of("Domain"), Paging(default_limit=10), ThePathIndex()),
    ),
    Operation(
        "GET",
        f"{V2}/available-domains",
        "GetAvailableDomains",
        "The AD domains and Azure tenants data exists for",
        nodes.list_available_domains,
        wire.DomainSelectorList,
        ERRORS,
        permission=READ_GRAPH,
    ),
    Operation(
        "GET",
        f"{V2}/saml",
        "ListSAMLProviders",
        "List SAML providers",
        saml.list_saml_providers,
        wire.SamlProviderListResponse,
        ERRORS,
        permission=MANAGE_PROVIDERS,
        parameters=(BaseUrl(),),
    ),
    Operation(
        "GET",
        f"{V2}/clients",
        "ListClients",
        "List collection clients (Enterprise edition)",
        clients.list_clients,
        wire.PagedClients,
        ERRORS,
        permission=READ_CLIENTS,
        parameters=(
            Paging(default_limit=100),
            Filters(store_clients.CLIENT_FILTERS),
            Sorting(tuple(store_clients.CLIENT_SORT_COLUMNS), (SortKey("name", False),)),
        ),
        enterprise_only=True,
    ),
    Operation(
        "GET",
        f"{V2}/graph-schema/extensions",
        "ListGraphSchemaExtensions",
        "Schema extensions and their environment kinds (the ids the aggregations ask for)",
        extensions.list_extensions,
        wire.ExtensionList,
        ERRORS,
        permission=READ_GRAPH,
    ),
    Operation(
        "GET",
        f"{V2}/extensions",
        "ListExtensions",
        "Schema extensions, as the reference lists them (ids, names, versions)",
        extensions.list_extension_summaries,
        wire.ExtensionSummaryResponse,
        ERRORS,
        permission=READ_GRAPH,
    ),
    Operation(
        "GET",
        f"{V2}/audit",
        "ListAuditLogs",
        "Audit events of changes to accounts, tokens and uploads, newest first",
        audit_log.list_audit_log,
        wire.AuditLogResponse,
        ERRORS,
        permission=MANAGE_USERS,
        parameters=(
            BeforeAfter(),
            OffsetPaging(),
            Filters(
                store_audit.AUDIT_FILTERS,
                others=("sort_by", "offset", "skip", "limit", "before", "after"),
            ),
            Sorting(tuple(store_audit.AUDIT_SORT_COLUMNS), (SortKey("id", True),)),
        ),
        cached=False,  # refused logins are added without moving the data version
    ),
    Operation(
        "GET",
        f"{V2}/roles",
        "ListRoles",
        "The roles, each with its permissions (the ids a user's roles are given by)",
        roles.list_roles,
        wire.RoleListResponse,
        ERRORS,
        permission=MANAGE_SELF,
        parameters=(
            Filters(store_accounts.ROLE_FILTERS, others=("sort_by",)),
            Sorting(tuple(store_accounts.ROLE_SORT_COLUMNS), (SortKey("id", False),)),
        ),
    ),
    Operation(
        "GET",
        f"{V2}/permissions",
        "ListPermissions",
        "The permissions roles are made of",
        roles.list_permissions,
        wire.PermissionListResponse,
        ERRORS,
        permission=MANAGE_SELF,
        parameters=(
            Filters(store_accounts.PERMISSION_FILTERS, others=("sort_by",)),
            Sorting(tuple(store_accounts.PERMISSION_SORT_COLUMNS), (SortKey("id", False),)),
        ),
    ),
    Operation(
        "GET",
        f"{V2}/bloodhound-users",
        "ListUsers",
        "List users with their roles",
        users.list_users,
        wire.UserListResponse,
        ERRORS,
        permission=MANAGE_USERS,
        parameters=(
            Filters(store_accounts.USER_FILTERS, others=("sort_by",)),
            Sorting(tuple(store_accounts.USER_SORT_COLUMNS), (SortKey("principal_name", False),)),
        ),
    ),
    Operation(
        "POST",
        f"{V2}/bloodhound-users",
        "CreateUser",
        "Create a user with one role, and optionally a login secret",
        users.create_user_account,
        wire.UserResponse,
        (*ERRORS, "409"),
        permission=MANAGE_USERS,
        parameters=(TheCaller(),),
        request_body=wire.CreateUserRequest,
        writes=True,
    ),
    Operation(
        "GET",
        f"{V2}/bloodhound-users/{{user_id}}",
        "GetUser",
        "A user with its role",
        users.get_user,
        wire.UserResponse,
        ERRORS,
        permission=MANAGE_USERS,
        parameters=(USER_ID,),
    ),
    Operation(
        "PATCH",
        f"{V2}/bloodhound-users/{{user_id}}",
        "UpdateUser",
        "Disable or enable a user, give it another role, rename it or change its profile",
        users.update_user,
        wire.UserResponse,
        (*ERRORS, "409"),
        permission=MANAGE_USERS,
        parameters=(
            TheCaller(),
            USER_ID,
            TokenCache(),
        ),
        request_body=wire.UserUpdate,
        writes=True,
    ),
    Operation(
        "DELETE",
        f"{V2}/bloodhound-users/{{user_id}}",
        "DeleteUser",
        "Delete a user: its sessions end and its tokens are revoked",
        users.delete_user,
        wire.UserResponse,
        ERRORS,
        permission=MANAGE_USERS,
        parameters=(
            TheCaller(),
            USER_ID,
            TokenCache(),
        ),
        writes=True,
    ),
    Operation(
        "PUT",
        f"{V2}/bloodhound-users/{{user_id}}/secret",
        "SetUserSecret",
        "Set a user's login secret; its sessions end. One's own takes auth/ManageSelf and "
        "current_secret; another user's takes auth/ManageUsers",
        users.set_user_secret,
        wire.UserResponse,
        (*ERRORS, "409"),
        parameters=(
            TheCaller(),
            USER_ID,
        ),
        request_body=wire.UserSecret,
        writes=True,
        prepare=prepare_secret_change,
    ),
    *build_saved_query_operations(),
    *build_tag_operations(),
    *build_entity_operations(),
    Operation(
        "GET",
        f"{V2}/azure/{{entity_type}}",
        "GetAzureEntity",
        "An Azure object's properties and, unless counts=false, the size of each of its "
        "lists; with related_entity_type, one page of that list",
        azure.get_azure_entity,
        wire.AzureEntityResponse,
        ERRORS,
        permission=READ_GRAPH,
        parameters=(
            PathParameter(
                "entity_type",
                "entity_type",
                "The kind of Azure object",
                {"type": "string", "enum": list(azure.AZURE_ENTITY_TYPES)},
                azure.parse_entity_type,
            ),
            QueryText("object_id", "object_id", "The object's id, case-insensitive", True),
            QueryText(
                "related_entity_type",
                "related_entity_type",
                f"A list of the object's: {azure.LISTS_TEXT}",
            ),
            QueryFlag("counts", "counts", True, "Count each list; default true"),
            QueryChoice(
                "type", ("list",), ("graph",), "Only 'list' is supported; 'graph' is a 400"
            ),
            Paging(default_limit=100),
            Sorting(NODE_SORT, BY_NAME),
        ),
    ),
)
