"""The audit log over HTTP (`GET /api/v2/audit`, the reference's route) and its writing at
the edge of each change: the events `logs.audit` raised during the change are stored in the
change's own transaction, so an event is kept if and only if its change is."""

from __future__ import annotations

import getpass
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from graphsvc import wire
from graphsvc.accounts.permissions import Caller
from graphsvc.logs import AuditEvent
from graphsvc.store import accounts, audit
from graphsvc.store.db import Connection
from graphsvc.store.filters import Filter
from graphsvc.store.paging import Page, SortKey, Window


async def store_audit_events(
    conn: Connection,
    events: Sequence[AuditEvent],
    caller: Caller | None,
    request_id: str,
    source: str,
    retention_days: int,
) -> None:
    """Keep a change's events; `caller` None is the command line."""
    if not events:
        return
    if caller is None:
        actor = audit.Actor(None, f"command line ({getpass.getuser()})")
    else:
        user_id = caller.principal.user_id
        user = await accounts.find_user(conn, user_id)
        actor = audit.Actor(user_id, user.name if user is not None else user_id)
    now = datetime.now(UTC)
    await audit.insert_audit_events(
        conn, events, actor, request_id, source, now - timedelta(days=retention_days)
    )


async def store_login_attempt(
    conn: Connection,
    events: Sequence[AuditEvent],
    user_id: str | None,
    username: str,
    request_id: str,
    source: str,
    retention_days: int,
    succeeded: bool,
) -> None:
    """Keep a login's events as the reference does (LoginAttempt, success or failure), its
    actor the user tried: `user_id` None if no user has that name. A failed login is stored
    in a transaction of its own; the login throttle bounds how many a client can write."""
    now = datetime.now(UTC)
    await audit.insert_audit_events(
        conn,
        events,
        audit.Actor(user_id, username),
        request_id,
        source,
        now - timedelta(days=retention_days),
        "success" if succeeded else "failure",
    )


async def list_audit_log(
    conn: Connection, window: Window, filters: Sequence[Filter], sort: Sequence[SortKey], page: Page
) -> wire.AuditLogResponse:
    total, rows = await audit.list_audit_events(
        conn, window.start, window.end, filters, sort, page.skip, page.limit
    )
    return wire.AuditLogResponse(
        total,
        page.limit,
        page.skip,
        wire.AuditLogs(
            [
                wire.AuditLogEntry(
                    r.id,
                    r.created_at,
                    r.actor_id or "",
                    r.actor_name,
                    r.actor_email or "",
                    r.action,
                    json.loads(r.fields),
                    r.request_id,
                    r.source_ip_address,
                    r.status,
                    r.commit_id,
                )
                for r in rows
            ]
        ),
    )
