"""The `saved-queries` routes: a user's queries, shared with other users or made public,
exported and imported (transfer.py), as the reference keeps them.

Who may do what (the reference's rules): a query is seen by its owner, the users it is
shared with, and everyone once public; it is changed and shared by its owner, and an
administrator (auth/ManageUsers) may also change, delete or make private a public one.
A query the caller may not see answers 404, as if it did not exist.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

from graphsvc import wire
from graphsvc.accounts.permissions import MANAGE_USERS, Caller
from graphsvc.errors import ApiError, bad_request, conflict, forbidden, not_found
from graphsvc.logs import audit
from graphsvc.saved_queries.transfer import (
    DESCRIPTION_MAX,
    NAME_MAX,
    QUERY_MAX,
    Candidate,
    ImportUnreadable,
    file_name,
    json_of,
    read_import,
    zip_of,
)
from graphsvc.store import saved_queries as store
from graphsvc.store.db import Connection
from graphsvc.store.filters import Filter
from graphsvc.store.paging import Page, SortKey
from graphsvc.store.saved_queries import SCOPES, SavedQueryRow
from graphsvc.uploads.jobs import UploadedBody
from graphsvc.wire.common import Download, null_time


def saved_query(row: SavedQueryRow) -> wire.SavedQuery:
    assert row.scope is not None  # only a query the caller sees is answered
    return wire.SavedQuery(
        row.id,
        row.user_id,
        row.name,
        row.query,
        row.description,
        row.scope,
        row.created_at,
        row.updated_at,
        null_time(None),
    )


def parse_scopes(given: str | None, default: str | None) -> list[str]:
    """`scope`: owned, shared, public or all, or several of them, comma-separated."""
    text = (given or "").strip() or default
    if text is None:
        raise bad_request("scope must be given: owned, shared, public or all", "scope")
    scopes: list[str] = []
    for part in text.split(","):
        scope = part.strip().lower()
        if scope == "all":
            scopes.extend(SCOPES)
        elif scope in SCOPES:
            scopes.append(scope)
        else:
            raise bad_request(
                f"invalid scope {part.strip()!r}: owned, shared, public or all (or several, "
                "comma-separated)",
                "scope",
            )
    return list(dict.fromkeys(scopes))


def is_admin(caller: Caller) -> bool:
    return MANAGE_USERS in caller.permissions


async def list_saved_queries(
    conn: Connection,
    caller: Caller,
    scope: str | None,
    page: Page,
    filters: Sequence[Filter],
    sort: Sequence[SortKey],
) -> wire.PagedSavedQueries:
    """GET /api/v2/saved-queries: the caller's own by default."""
    scopes = parse_scopes(scope, "owned")
    total, rows = await store.list_saved_queries(
        conn, caller.principal.user_id, scopes, filters, sort, page.skip, page.limit
    )
    return wire.PagedSavedQueries(total, page.skip, page.limit, [saved_query(r) for r in rows])


async def visible_query(conn: Connection, caller: Caller, query_id: int) -> SavedQueryRow:
    """The query, if the caller may see it; else a 404 (whether it exists or not)."""
    row = await store.find_saved_query(conn, query_id, caller.principal.user_id)
    if row is None or row.scope is None:
        raise not_found(f"no saved query {query_id} of yours, shared with you or public", "id")
    return row


async def get_saved_query(
    conn: Connection, caller: Caller, query_id: int
) -> wire.SavedQueryResponse:
    return wire.SavedQueryResponse(saved_query(await visible_query(conn, caller, query_id)))


def check_fields(name: str, query: str, description: str) -> None:
    for field, value, most in (
        ("name", name, NAME_MAX),
        ("query", query, QUERY_MAX),
        ("description", description, DESCRIPTION_MAX),
    ):
        if len(value) > most:
            raise bad_request(f"{field} has {len(value)} characters; at most {most}", field)


async def create_saved_query(
    conn: Connection, caller: Caller, body: wire.SavedQueryRequest
) -> wire.SavedQueryResponse:
    """POST /api/v2/saved-queries."""
    name = body.name.strip()
    if not name or not body.query.strip():
        context = "name" if not name else "query"
        raise bad_request(f"a saved query needs a {context} (text, not empty)", context)
    check_fields(name, body.query, body.description)
    user_id = caller.principal.user_id
    if await store.name_taken(conn, user_id, name):
        raise conflict(f"you already have a saved query named {name!r}", "name")
    query_id = await store.insert_saved_query(
        conn, user_id, name, body.query, body.description, datetime.now(UTC)
    )
    audit("saved_query.created", f"saved query {query_id} ({name!r}) created", query_id=query_id)
    return await get_saved_query(conn, caller, query_id)


async def may_change(conn: Connection, caller: Caller, query_id: int) -> SavedQueryRow:
    """The query, if the caller may change it: its own, or (an administrator) a public one.
    One it may see but not change is a 403; one it may not see a 404."""
    row = await visible_query(conn, caller, query_id)
    if row.scope == "owned" or (row.public and is_admin(caller)):
        return row
    raise forbidden(
        f"saved query {query_id} is not yours: only its owner (or, once public, an "
        "administrator) may change it",
        "not_owner",
    )


async def update_saved_query(
    conn: Connection, caller: Caller, query_id: int, body: wire.SavedQueryRequest
) -> wire.SavedQueryResponse:
    """PUT /api/v2/saved-queries/{id}: the fields given (not empty) replace the stored."""
    row = await may_change(conn, caller, query_id)
    name = body.name.strip() or row.name
    query = body.query if body.query.strip() else row.query
    description = body.description or row.description
    check_fields(name, query, description)
    if await store.name_taken(conn, row.user_id, name, query_id):
        raise conflict(f"the owner already has a saved query named {name!r}", "name")
    await store.update_saved_query(conn, query_id, name, query, description, datetime.now(UTC))
    audit("saved_query.updated", f"saved query {query_id} ({name!r}) updated", query_id=query_id)
    return await get_saved_query(conn, caller, query_id)


async def delete_saved_query(conn: Connection, caller: Caller, query_id: int) -> None:
    """DELETE /api/v2/saved-queries/{id}: 204."""
    row = await may_change(conn, caller, query_id)
    await store.delete_saved_query(conn, query_id)
    audit(
        "saved_query.deleted", f"saved query {query_id} ({row.name!r}) deleted", query_id=query_id
    )


async def permissions_of(conn: Connection, row: SavedQueryRow) -> wire.SavedQueryPermissions:
    shared = [] if row.public else await store.list_shared_user_ids(conn, row.id)
    return wire.SavedQueryPermissions(row.id, row.public, shared)


async def get_permissions(
    conn: Connection, caller: Caller, query_id: int
) -> wire.SavedQueryPermissionsResponse:
    """GET /api/v2/saved-queries/{id}/permissions: whether it is public, and who it is shared
    with (seen by its owner and administrators; public queries by everyone)."""
    row = await visible_query(conn, caller, query_id)
    if row.scope != "owned" and not row.public and not is_admin(caller):
        raise forbidden(
            f"saved query {query_id} is shared with you; only its owner sees with whom",
            "not_owner",
        )
    return wire.SavedQueryPermissionsResponse(await permissions_of(conn, row))


async def share_saved_query(
    conn: Connection, caller: Caller, query_id: int, body: wire.ShareRequest
) -> wire.SavedQueryPermissionsResponse:
    """PUT /api/v2/saved-queries/{id}/permissions: public, private (public false and no
    users), or shared with more users."""
    row = await visible_query(conn, caller, query_id)
    owner = row.scope == "owned"
    if body.public and body.user_ids:
        raise bad_request("public cannot be true while user_ids is given", "public")
    now = datetime.now(UTC)
    if body.public:
        if not owner:
            raise forbidden(f"only its owner may make saved query {query_id} public", "not_owner")
        await store.remove_all_shares(conn, query_id)
        await store.set_public(conn, query_id, True, now)
        message = "made public"
    elif not body.user_ids:
        if not (owner or (row.public and is_admin(caller))):
            raise forbidden(
                f"only its owner (or an administrator, if public) may make saved query "
                f"{query_id} private",
                "not_owner",
            )
        await store.remove_all_shares(conn, query_id)
        await store.set_public(conn, query_id, False, now)
        message = "made private"
    else:
        if not owner:
            raise forbidden(f"only its owner may share saved query {query_id}", "not_owner")
        if row.public:
            raise bad_request(
                f"saved query {query_id} is public: make it private (public false, no "
                "user_ids) before sharing it with users",
                "user_ids",
            )
        ids = [u.lower() for u in dict.fromkeys(body.user_ids)]
        if caller.principal.user_id.lower() in ids:
            raise bad_request("a query cannot be shared with its owner", "user_ids")
        missing = sorted(set(ids) - await store.list_existing_users(conn, ids))
        if missing:
            raise bad_request(f"no user {', '.join(missing)}", "user_ids")
        await store.add_shares(conn, query_id, ids, now)
        message = f"shared with {', '.join(ids)}"
    audit("saved_query.shared", f"saved query {query_id} {message}", query_id=query_id)
    # Read as it is now, whether the caller still sees it or not (an administrator who made
    # another's query private does not).
    updated = await store.find_saved_query(conn, query_id, caller.principal.user_id)
    assert updated is not None
    return wire.SavedQueryPermissionsResponse(await permissions_of(conn, updated))


async def unshare_saved_query(
    conn: Connection, caller: Caller, query_id: int, body: wire.UnshareRequest
) -> None:
    """DELETE /api/v2/saved-queries/{id}/permissions: 204. A user it is shared with may
    remove itself; its owner and administrators anyone."""
    row = await visible_query(conn, caller, query_id)
    me = caller.principal.user_id.lower()
    ids = [u.lower() for u in dict.fromkeys(body.user_ids)]
    if not ids:
        raise bad_request("user_ids names no user", "user_ids")
    if row.scope != "owned" and not is_admin(caller):
        if ids != [me]:
            raise forbidden(
                f"saved query {query_id} is not yours: you may only remove yourself",
                "not_owner",
            )
        if row.scope != "shared":
            raise bad_request(f"saved query {query_id} is not shared with you", "user_ids")
    await store.remove_shares(conn, query_id, ids)
    audit(
        "saved_query.unshared",
        f"saved query {query_id} no longer shared with {', '.join(ids)}",
        query_id=query_id,
    )


async def export_saved_query(
    conn: Connection, caller: Caller, query_id: int, format: str | None
) -> Download:
    """GET /api/v2/saved-queries/{id}/export: the reference's file of one query, or a zip."""
    chosen = format or "json"
    row = await visible_query(conn, caller, query_id)
    audit("saved_query.exported", f"saved query {query_id} exported", query_id=query_id)
    document = wire.TransferableQuery(row.name, row.query, row.description)
    if chosen == "zip":
        return Download(zip_of([document]), "application/zip", "exported_queries.zip")
    name = file_name(row.name, set())
    return Download(json_of(document), "application/json", name)


async def export_saved_queries(
    conn: Connection, caller: Caller, scope: str | None, format: str | None
) -> Download:
    """GET /api/v2/saved-queries/export?scope=: every query in the scopes, as a zip (one
    file each, the reference's) or one JSON list."""
    scopes = parse_scopes(scope, None)
    chosen = format or "zip"
    rows = await store.list_all_in_scopes(conn, caller.principal.user_id, scopes)
    audit("saved_query.exported", f"{len(rows)} saved queries exported ({', '.join(scopes)})")
    documents = [wire.TransferableQuery(r.name, r.query, r.description) for r in rows]
    # Off the event loop: 100,000 queries took 3.4 s to zip, the server answering nothing else.
    if chosen == "zip":
        made = await asyncio.to_thread(zip_of, documents)
        return Download(made, "application/zip", "exported_queries.zip")
    made = await asyncio.to_thread(json_of, documents)
    return Download(made, "application/json", "exported_queries.json")


async def import_saved_queries(
    conn: Connection, caller: Caller, upload: UploadedBody
) -> wire.SavedQueryImportResponse:
    """POST /api/v2/saved-queries/import: every valid entry becomes a query of the caller's;
    the others (malformed, or a name already taken) are refused by name. Refusing them all
    is a 400 that names each."""
    upload.file.seek(0)
    body = upload.file.read()
    try:
        entries = read_import(body, upload.content_type != "application/json")
    except ImportUnreadable as exc:
        raise bad_request(str(exc), "body") from None
    if not entries:
        raise bad_request("the body holds no saved query", "body")
    user_id = caller.principal.user_id
    taken = await store.list_own_names(conn, user_id)
    now = datetime.now(UTC)
    imported: list[wire.SavedQuery] = []
    refused: list[wire.ImportRefusal] = []
    for entry in entries:
        if not isinstance(entry, Candidate):
            refused.append(wire.ImportRefusal(entry.source, entry.name, entry.reason))
        elif entry.name in taken:
            reason = "you already have a saved query of this name"
            refused.append(wire.ImportRefusal(entry.source, entry.name, reason))
        else:
            taken.add(entry.name)
            query_id = await store.insert_saved_query(
                conn, user_id, entry.name, entry.query, entry.description, now
            )
            # As stored (not read back: an import of thousands read each again).
            row = SavedQueryRow(
                query_id, user_id, entry.name, entry.query, entry.description, False, now, now,
                "owned",
            )  # fmt: skip
            imported.append(saved_query(row))
    if not imported:
        shown = "; ".join(
            f"{r.source}{f' ({r.name})' if r.name else ''}: {r.reason}" for r in refused[:20]
        )
        more = f"; and {len(refused) - 20} more" if len(refused) > 20 else ""
        raise ApiError(400, f"no saved query imported: {shown}{more}", "body")
    audit(
        "saved_query.imported",
        f"{len(imported)} saved queries imported, {len(refused)} refused",
    )
    return wire.SavedQueryImportResponse(wire.SavedQueryImport(imported, refused))
