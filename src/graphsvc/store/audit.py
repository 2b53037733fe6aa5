"""Audit events in the store: written with the change they record, listed as the reference's
GET /api/v2/audit lists them, and dropped past the retention."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graphsvc.logs import AuditEvent
from graphsvc.store.db import Connection
from graphsvc.store.filters import EQUALITY, RANGE, Filter, FilterColumn, filter_conditions
from graphsvc.store.paging import SortKey, fetch_page, order_clause

# graphsvc's events under the reference's action names, where it has one.
ACTIONS = {
    "user.created": "CreateUser",
    "user.role_changed": "UpdateUser",
    "user.enabled": "UpdateUser",
    "user.disabled": "UpdateUser",
    "user.profile_changed": "UpdateUser",
    "user.deleted": "DeleteUser",
    "user.secret_changed": "UpdateAuthSecret",
    "token.created": "CreateAuthToken",
    "token.revoked": "DeleteAuthToken",
    "login": "LoginAttempt",
    "login.failed": "LoginAttempt",
    "data.delete_requested": "DeleteBloodhoundData",
    "data.deleted": "DeleteBloodhoundData",
}
# Events whose status is not the change's: the reference writes its intent to clear the
# database before the parts it deleted.
STATUSES = {"data.delete_requested": "intent"}
# The reference's audit filters and sort columns.
AUDIT_FILTERS = {
    "id": FilterColumn("id", "int", RANGE),
    "actor_id": FilterColumn("actor_id", "text", EQUALITY, nullable=True),
    "actor_name": FilterColumn("actor_name", "text", EQUALITY),
    "actor_email": FilterColumn("actor_email", "text", EQUALITY, nullable=True),
    "action": FilterColumn("action", "text", EQUALITY),
    "request_id": FilterColumn("request_id", "text", EQUALITY),
    "created_at": FilterColumn("created_at", "time", RANGE),
    "source_ip_address": FilterColumn("source_ip_address", "text", EQUALITY),
    "source": FilterColumn("source_ip_address", "text", EQUALITY),  # its OpenAPI's name
    "status": FilterColumn("status", "text", EQUALITY),
}
AUDIT_SORT_COLUMNS = {
    name: name
    for name in (
        "id",
        "actor_name",
        "actor_email",
        "action",
        "created_at",
        "source_ip_address",
        "status",
    )
}


@dataclass(frozen=True)
class Actor:
    """Who made a change: a user (its id and name), or the command line (no id)."""

    user_id: str | None
    name: str


@dataclass
class AuditRow:
    id: int
    created_at: datetime
    actor_id: str | None
    actor_name: str
    actor_email: str | None
    action: str
    fields: str  # JSON text
    request_id: str
    source_ip_address: str
    status: str
    commit_id: str


AUDIT_COLUMNS = """id, created_at, actor_id, actor_name, actor_email, action, fields, request_id,
    source_ip_address, status, commit_id"""


async def insert_audit_events(
    conn: Connection,
    events: Sequence[AuditEvent],
    actor: Actor,
    request_id: str,
    source: str,
    retention_start: datetime,
    status: str = "success",
) -> None:
    """The events of one change (one commit id), in its transaction; and the events older
    than `retention_start` dropped. `status` is the reference's: success, or failure for an
    attempt that was refused (a login)."""
    commit_id = str(uuid.uuid4())
    for event in events:
        fields = {"event": event.event, "message": event.message, **event.fields}
        await conn.execute(
            """INSERT INTO audit_events (created_at, actor_id, actor_name, actor_email, action,
                fields, request_id, source_ip_address, status, commit_id)
            VALUES ($1, $2, $3, NULL, $4, $5, $6, $7, $8, $9)""",
            event.at,
            actor.user_id,
            actor.name,
            ACTIONS.get(event.event, event.event),
            json.dumps(fields, default=str),
            request_id,
            source,
            STATUSES.get(event.event, status),
            commit_id,
        )
    await conn.execute("DELETE FROM audit_events WHERE created_at < $1", retention_start)


async def list_audit_events(
    conn: Connection,
    after: datetime,
    before: datetime,
    filters: Sequence[Filter],
    sort: Sequence[SortKey],
    skip: int,
    limit: int,
) -> tuple[int, list[AuditRow]]:
    args: list[Any] = [after, before]
    conditions = ["created_at >= $1", "created_at <= $2"]
    conditions += filter_conditions(conn.dialect, filters, AUDIT_FILTERS, args)
    total, rows = await fetch_page(
        conn,
        f"""SELECT {AUDIT_COLUMNS}, count(*) OVER () FROM audit_events
        WHERE {" AND ".join(conditions)}
        ORDER BY {order_clause(sort, AUDIT_SORT_COLUMNS, "id DESC")}""",
        args,
        skip,
        limit,
    )
    return total, [AuditRow(*r[:-1]) for r in rows]
