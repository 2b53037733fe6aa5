"""Collection clients (Enterprise edition): their scheduled events, jobs and tokens."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from graphsvc import wire
from graphsvc.store.accounts import TOKEN_FIELDS, token_fields
from graphsvc.store.db import Connection, Row
from graphsvc.store.dialect import in_list, list_param
from graphsvc.store.filters import EQUALITY, RANGE, Filter, FilterColumn, filter_conditions
from graphsvc.store.paging import SortKey, fetch_page, order_clause

FLAG_COLUMNS = ", ".join(wire.COLLECTION_FLAGS)
ou_refs = msgspec.json.Decoder(list[wire.OUReference])
domain_refs = msgspec.json.Decoder(list[wire.DomainReference])
TOKEN_COLUMNS = ", ".join(f"t.{column}" for column in (*TOKEN_FIELDS, "created_by"))
EVENT_FIELDS = ("id", "client_id", "rrule", "ous", "domains", *wire.COLLECTION_FLAGS)
EVENT_COLUMNS = ", ".join(f"e.{column}" for column in EVENT_FIELDS)
EVENT_COLUMN_COUNT = len(EVENT_FIELDS)
FLAG_COUNT = len(wire.COLLECTION_FLAGS)


async def find_client(conn: Connection, client_id: str) -> wire.Client | None:
    """A client with its newest live token (its key never read back, only masked), its
    events, and its current job and task with their results: one statement (a row per
    event) and, when it has a job or task, a second (a round trip each on PostgreSQL, where
    a statement per part took up to seven)."""
    rows = await conn.fetch(
        f"""SELECT c.id, c.name, c.ip_address, c.hostname, c.configured_user, c.last_checkin,
            c.current_job_id, c.current_task_id, c.completed_job_count,
            c.completed_task_count, c.domain_controller, c.version, c.user_sid, {TOKEN_COLUMNS},
            {EVENT_COLUMNS}
        FROM clients c LEFT JOIN auth_tokens t ON t.id = (
            SELECT id FROM auth_tokens WHERE client_id = c.id AND deleted_at IS NULL
            ORDER BY created_at DESC, id LIMIT 1)
        LEFT JOIN client_events e ON e.client_id = c.id AND e.deleted_at IS NULL
        WHERE c.id = $1 AND c.deleted_at IS NULL
        ORDER BY e.id""",
        client_id,
    )
    if not rows:
        return None
    (
        found_id,
        name,
        ip_address,
        hostname,
        configured_user,
        last_checkin,
        current_job_id,
        current_task_id,
        completed_job_count,
        completed_task_count,
        domain_controller,
        version,
        user_sid,
        *rest,
    ) = rows[0]
    token = rest[:-EVENT_COLUMN_COUNT]  # TOKEN_COLUMNS, then EVENT_COLUMNS
    events = [
        client_event(row[-EVENT_COLUMN_COUNT:])
        for row in rows
        if row[-EVENT_COLUMN_COUNT] is not None  # a client without events: one row, no event
    ]
    job_ids = [job_id for job_id in (current_job_id, current_task_id) if job_id is not None]
    jobs = await find_jobs(conn, job_ids, name) if job_ids else {}
    return wire.Client(
        id=found_id,
        name=name,
        ip_address=ip_address,
        hostname=hostname,
        configured_user=configured_user,
        last_checkin=last_checkin or wire.ZERO_TIME,
        events=events,
        token=wire.zero_token() if token[0] is None else client_token(token),
        current_job_id=wire.null_int64(current_job_id),
        current_task_id=wire.null_int64(current_task_id),
        current_job=jobs.get(current_job_id) or wire.zero_job(),
        current_task=jobs.get(current_task_id) or wire.zero_job(),
        completed_job_count=completed_job_count,
        completed_task_count=completed_task_count,
        domain_controller=wire.null_string(domain_controller),
        version=version,
        user_sid=wire.null_string(user_sid),
    )


def client_event(row: Sequence[Any]) -> wire.ClientEvent:
    """An event from EVENT_COLUMNS."""
    event_id, owner, rrule, ous, domains, *flags = row
    return wire.ClientEvent(
        id=event_id,
        client_id=owner,
        rrule=rrule,
        ous=ou_refs.decode(ous),
        domains=domain_refs.decode(domains),
        **collection_flags(flags),
    )


def collection_flags(values: Sequence[bool]) -> dict[str, bool]:
    return dict(zip(wire.COLLECTION_FLAGS, values, strict=True))


def client_token(row: Row) -> wire.ClientToken:
    """A client's token from TOKEN_COLUMNS, its key masked."""
    *shared, created_by = row
    return wire.ClientToken(**token_fields(shared), created_by=wire.null_uuid(created_by))


async def find_jobs(conn: Connection, job_ids: list[int], client_name: str) -> dict[int, wire.Job]:
    """Jobs by id, each with its domain results, in one statement (a row per result)."""
    rows = await conn.fetch(
        f"""SELECT j.id, j.client_id, j.event_id, j.execution_time, j.start_time, j.end_time,
            j.status_message, j.domain_controller, j.ous, j.domains,
            {", ".join(f"j.{flag}" for flag in wire.COLLECTION_FLAGS)},
            d.id, d.created_at, d.updated_at, d.deleted_at, d.job_id, d.domain_name, d.success,
            d.message, {", ".join(f"d.{count}" for count in DOMAIN_RESULT_COUNTS)}
        FROM jobs j LEFT JOIN domain_collection_results d
            ON d.job_id = j.id AND d.deleted_at IS NULL
        WHERE {in_list(conn.dialect, "j.id", "$1", "bigint")}
        ORDER BY j.id, d.id""",
        list_param(conn.dialect, job_ids),
    )
    jobs: dict[int, wire.Job] = {}
    for row in rows:
        (
            job_id,
            client_id,
            event_id,
            execution_time,
            start_time,
            end_time,
            status_message,
            domain_controller,
            ous,
            domains,
            *rest,
        ) = row
        flags, result = rest[:FLAG_COUNT], rest[FLAG_COUNT:]
        job = jobs.get(job_id)
        if job is None:
            job = jobs[job_id] = wire.Job(
                id=job_id,
                client_id=client_id,
                client_name=client_name,
                event_id=wire.null_int32(event_id),
                execution_time=execution_time,
                start_time=start_time or wire.ZERO_TIME,
                end_time=end_time or wire.ZERO_TIME,
                status_message=status_message,
                domain_controller=domain_controller,
                ous=ou_refs.decode(ous),
                domains=domain_refs.decode(domains),
                domain_results=[],
                **collection_flags(flags),
            )
        if result[0] is not None:
            job.domain_results.append(domain_result(result))
    return jobs


def domain_result(row: Sequence[Any]) -> wire.DomainResult:
    """One domain's result of a job, from the d.* columns of find_jobs."""
    (
        result_id,
        created_at,
        updated_at,
        deleted_at,
        job_id,
        domain_name,
        success,
        message,
        *counts,
    ) = row
    return wire.DomainResult(
        id=result_id,
        created_at=created_at,
        updated_at=updated_at,
        deleted_at=wire.null_time(deleted_at),
        job_id=job_id,
        domain_name=domain_name,
        success=success,
        message=message,
        **dict(zip(DOMAIN_RESULT_COUNTS, counts, strict=True)),
    )


async def client_name_taken(conn: Connection, name: str) -> bool:
    return await conn.fetchval("SELECT 1 FROM clients WHERE name = $1", name) is not None


async def insert_client(
    conn: Connection,
    client_id: str,
    name: str,
    ip_address: str,
    hostname: str,
    now: datetime,
    configured_user: str = "",
    version: str = "",
    domain_controller: str | None = None,
    user_sid: str | None = None,
    last_checkin: datetime | None = None,
) -> None:
    await conn.execute(
        """INSERT INTO clients (id, name, ip_address, hostname, configured_user, last_checkin,
            completed_job_count, completed_task_count, domain_controller, version, user_sid,
            created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, 0, 0, $7, $8, $9, $10, $10)""",
        client_id,
        name,
        ip_address,
        hostname,
        configured_user,
        last_checkin,
        domain_controller,
        version,
        user_sid,
        now,
    )


async def set_client_checkin(
    conn: Connection,
    client_id: str,
    configured_user: str,
    last_checkin: datetime,
    version: str,
    domain_controller: str,
    user_sid: str,
) -> None:
    """What a client reports when it checks in: who it runs as, its version, its DC."""
    await conn.execute(
        """UPDATE clients SET configured_user = $2, last_checkin = $3, version = $4,
            domain_controller = $5, user_sid = $6 WHERE id = $1""",
        client_id,
        configured_user,
        last_checkin,
        version,
        domain_controller,
        user_sid,
    )


@dataclass
class CollectionPlan:
    """What a scheduled event or a job collects."""

    flags: dict[str, bool]
    ous: list[wire.OUReference]
    domains: list[wire.DomainReference]

    def flag_values(self) -> list[bool]:
        return [self.flags.get(f, False) for f in wire.COLLECTION_FLAGS]


async def insert_client_event(
    conn: Connection, client_id: str, rrule: str, plan: CollectionPlan, now: datetime
) -> int:
    marks = ", ".join(f"${i}" for i in range(3, 3 + FLAG_COUNT))
    n = 3 + FLAG_COUNT
    event_id: int = await conn.fetchval(
        f"""INSERT INTO client_events (client_id, rrule, {FLAG_COLUMNS}, ous, domains,
            created_at, updated_at) VALUES ($1, $2, {marks}, ${n}, ${n + 1}, ${n + 2}, ${n + 2})
        RETURNING id""",
        client_id,
        rrule,
        *plan.flag_values(),
        msgspec.json.encode(plan.ous).decode(),
        msgspec.json.encode(plan.domains).decode(),
        now,
    )
    return event_id


@dataclass
class CollectionJobRow:
    client_id: str
    event_id: int | None
    execution_time: datetime
    start_time: datetime | None
    end_time: datetime | None
    status: int
    status_message: str
    domain_controller: str
    plan: CollectionPlan


async def insert_collection_job(conn: Connection, job: CollectionJobRow, now: datetime) -> int:
    first_flag = 8
    marks = ", ".join(f"${i}" for i in range(first_flag, first_flag + FLAG_COUNT))
    n = first_flag + FLAG_COUNT
    job_id: int = await conn.fetchval(
        f"""INSERT INTO jobs (client_id, event_id, execution_time, start_time, end_time, status,
            status_message, {FLAG_COLUMNS}, domain_controller, ous, domains, created_at,
            updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, {marks}, ${n}, ${n + 1}, ${n + 2}, ${n + 3},
            ${n + 3})
        RETURNING id""",
        job.client_id,
        job.event_id,
        job.execution_time,
        job.start_time,
        job.end_time,
        job.status,
        job.status_message,
        *job.plan.flag_values(),
        job.domain_controller,
        msgspec.json.encode(job.plan.ous).decode(),
        msgspec.json.encode(job.plan.domains).decode(),
        now,
    )
    return job_id


DOMAIN_RESULT_COUNTS = (
    "user_count",
    "group_count",
    "computer_count",
    "gpo_count",
    "ou_count",
    "container_count",
    "aiaca_count",
    "rootca_count",
    "enterpriseca_count",
    "ntauthstore_count",
    "certtemplate_count",
    "deleted_count",
)


async def insert_domain_result(
    conn: Connection,
    job_id: int,
    domain_name: str,
    success: bool,
    message: str,
    counts: dict[str, int],
    now: datetime,
) -> None:
    marks = ", ".join(f"${i}" for i in range(5, 5 + len(DOMAIN_RESULT_COUNTS)))
    n = 5 + len(DOMAIN_RESULT_COUNTS)
    await conn.execute(
        f"""INSERT INTO domain_collection_results (job_id, domain_name, success, message,
            {", ".join(DOMAIN_RESULT_COUNTS)}, created_at, updated_at)
        VALUES ($1, $2, $3, $4, {marks}, ${n}, ${n})""",
        job_id,
        domain_name,
        success,
        message,
        *(counts.get(c, 0) for c in DOMAIN_RESULT_COUNTS),
        now,
    )


async def set_client_work(
    conn: Connection,
    client_id: str,
    current_job_id: int | None,
    current_task_id: int | None,
    completed_jobs: int,
    completed_tasks: int,
) -> None:
    await conn.execute(
        """UPDATE clients SET current_job_id = $2, current_task_id = $3,
            completed_job_count = $4, completed_task_count = $5 WHERE id = $1""",
        client_id,
        current_job_id,
        current_task_id,
        completed_jobs,
        completed_tasks,
    )


async def find_client_ids(conn: Connection, names: Sequence[str]) -> dict[str, str]:
    """The ids of the live clients among these names."""
    rows = await conn.fetch(
        f"""SELECT name, id FROM clients
        WHERE {in_list(conn.dialect, "name", "$1")} AND deleted_at IS NULL""",
        list_param(conn.dialect, names),
    )
    return {name: client_id for name, client_id in rows}


# The reference's client filters (its OpenAPI's ListClients) and sort columns.
CLIENT_FILTERS = {
    **{
        name: FilterColumn(name, "text", EQUALITY)
        for name in ("name", "ip_address", "hostname", "configured_user", "version")
    },
    "user_sid": FilterColumn("user_sid", "text", EQUALITY, nullable=True),
    "domain_controller": FilterColumn("domain_controller", "text", EQUALITY, nullable=True),
    "id": FilterColumn("id", "uuid", EQUALITY),
    "current_job_id": FilterColumn("current_job_id", "int", RANGE, nullable=True),
    "completed_job_count": FilterColumn("completed_job_count", "int", RANGE, bits=32),
    "last_checkin": FilterColumn("last_checkin", "time", RANGE, nullable=True),
    "created_at": FilterColumn("created_at", "time", RANGE),
    "updated_at": FilterColumn("updated_at", "time", RANGE),
    "deleted_at": FilterColumn("deleted_at", "time", RANGE, nullable=True),
}
CLIENT_SORT_COLUMNS = {
    name: name
    for name in (
        "name",
        "ip_address",
        "hostname",
        "configured_user",
        "last_checkin",
        "completed_job_count",
        "created_at",
        "updated_at",
        "deleted_at",
    )
}


async def list_client_ids(
    conn: Connection, filters: Sequence[Filter], sort: Sequence[SortKey], skip: int, limit: int
) -> tuple[int, list[str]]:
    """One page of the live clients' ids the filters let through, by name unless sorted,
    with the total."""
    args: list[Any] = []
    conditions = [
        "deleted_at IS NULL",
        *filter_conditions(conn.dialect, filters, CLIENT_FILTERS, args),
    ]
    total, rows = await fetch_page(
        conn,
        f"""SELECT id, count(*) OVER () FROM clients WHERE {" AND ".join(conditions)}
        ORDER BY {order_clause(sort, CLIENT_SORT_COLUMNS, "name, id")}""",
        args,
        skip,
        limit,
    )
    return total, [client_id for client_id, _ in rows]
