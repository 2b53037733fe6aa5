"""Collection clients (Enterprise edition): their scheduled events, jobs and tokens."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import msgspec

from graphsvc import wire
from graphsvc.store.db import Connection, Row, in_list, list_param
from graphsvc.store.paging import fetch_page

COLLECTION_FLAGS = (
    "session_collection",
    "local_group_collection",
    "ad_structure_collection",
    "cert_services_collection",
    "ca_registry_collection",
    "dc_registry_collection",
    "all_trusted_domains",
)
FLAG_COLUMNS = ", ".join(COLLECTION_FLAGS)


def collection_flags(values: Sequence[bool]) -> dict[str, bool]:
    return dict(zip(COLLECTION_FLAGS, values, strict=True))


ou_refs = msgspec.json.Decoder(list[wire.OUReference])
domain_refs = msgspec.json.Decoder(list[wire.DomainReference])


async def find_client(conn: Connection, client_id: str) -> wire.Client | None:
    """A client with its newest live token (its key never read back, only masked), its
    events, and its current job and task with their results: three statements (a round
    trip each on PostgreSQL), where a statement per part took up to seven."""
    r = await conn.fetchrow(
        """SELECT c.id, c.name, c.ip_address, c.hostname, c.configured_user, c.last_checkin,
            c.current_job_id, c.current_task_id, c.completed_job_count,
            c.completed_task_count, c.domain_controller, c.version, c.user_sid,
            t.id, t.created_at, t.updated_at, t.deleted_at, t.user_id, t.name, t.hmac_method,
            t.last_access, t.created_by
        FROM clients c LEFT JOIN auth_tokens t ON t.id = (
            SELECT id FROM auth_tokens WHERE client_id = c.id AND deleted_at IS NULL
            ORDER BY created_at DESC, id LIMIT 1)
        WHERE c.id = $1 AND c.deleted_at IS NULL""",
        client_id,
    )
    if r is None:
        return None
    events = [
        wire.ClientEvent(
            id=e[0],
            client_id=e[1],
            rrule=e[2],
            ous=ou_refs.decode(e[10]),
            domains=domain_refs.decode(e[11]),
            **collection_flags(e[3:10]),
        )
        for e in await conn.fetch(
            f"""SELECT id, client_id, rrule, {FLAG_COLUMNS}, ous, domains FROM client_events
            WHERE client_id = $1 AND deleted_at IS NULL ORDER BY id""",
            client_id,
        )
    ]
    job_ids = [job_id for job_id in (r[6], r[7]) if job_id is not None]
    jobs = await find_jobs(conn, job_ids, r[1]) if job_ids else {}
    return wire.Client(
        id=r[0],
        name=r[1],
        ip_address=r[2],
        hostname=r[3],
        configured_user=r[4],
        last_checkin=r[5] or wire.ZERO_TIME,
        events=events,
        token=wire.zero_token() if r[13] is None else client_token(r[13:22]),
        current_job_id=wire.null_int64(r[6]),
        current_task_id=wire.null_int64(r[7]),
        current_job=jobs.get(r[6]) or wire.zero_job(),
        current_task=jobs.get(r[7]) or wire.zero_job(),
        completed_job_count=r[8],
        completed_task_count=r[9],
        domain_controller=wire.null_string(r[10]),
        version=r[11],
        user_sid=wire.null_string(r[12]),
    )


def client_token(r: Row) -> wire.ClientToken:
    return wire.ClientToken(
        r[0],
        r[1],
        r[2],
        wire.null_time(r[3]),
        wire.null_uuid(r[4]),
        wire.null_string(r[5]),
        wire.MASKED_KEY,
        r[6],
        r[7],
        wire.null_uuid(r[8]),
    )


async def find_jobs(conn: Connection, job_ids: list[int], client_name: str) -> dict[int, wire.Job]:
    """Jobs by id, each with its domain results, in one statement (a row per result)."""
    rows = await conn.fetch(
        f"""SELECT j.id, j.client_id, j.event_id, j.execution_time, j.start_time, j.end_time,
            j.status_message, {", ".join(f"j.{flag}" for flag in COLLECTION_FLAGS)},
            j.domain_controller, j.ous, j.domains,
            d.id, d.created_at, d.updated_at, d.deleted_at, d.job_id, d.domain_name, d.success,
            d.message, {", ".join(f"d.{count}" for count in DOMAIN_RESULT_COUNTS)}
        FROM jobs j LEFT JOIN domain_collection_results d
            ON d.job_id = j.id AND d.deleted_at IS NULL
        WHERE {in_list(conn.dialect, "j.id", "$1", "bigint")}
        ORDER BY j.id, d.id""",
        list_param(conn.dialect, job_ids),
    )
    jobs: dict[int, wire.Job] = {}
    for r in rows:
        job = jobs.get(r[0])
        if job is None:
            job = jobs[r[0]] = wire.Job(
                id=r[0],
                client_id=r[1],
                client_name=client_name,
                event_id=wire.null_int32(r[2]),
                execution_time=r[3],
                start_time=r[4] or wire.ZERO_TIME,
                end_time=r[5] or wire.ZERO_TIME,
                status_message=r[6],
                domain_controller=r[14],
                ous=ou_refs.decode(r[15]),
                domains=domain_refs.decode(r[16]),
                domain_results=[],
                **collection_flags(r[7:14]),
            )
        if r[17] is not None:
            job.domain_results.append(
                wire.DomainResult(
                    id=r[17],
                    created_at=r[18],
                    updated_at=r[19],
                    deleted_at=wire.null_time(r[20]),
                    job_id=r[21],
                    domain_name=r[22],
                    success=r[23],
                    message=r[24],
                    **dict(zip(DOMAIN_RESULT_COUNTS, r[25:37], strict=True)),
                )
            )
    return jobs


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
        return [self.flags.get(f, False) for f in COLLECTION_FLAGS]


async def insert_client_event(
    conn: Connection, client_id: str, rrule: str, plan: CollectionPlan, now: datetime
) -> int:
    marks = ", ".join(f"${i}" for i in range(3, 3 + len(COLLECTION_FLAGS)))
    n = 3 + len(COLLECTION_FLAGS)
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
class JobRow:
    client_id: str
    event_id: int | None
    execution_time: datetime
    start_time: datetime | None
    end_time: datetime | None
    status: int
    status_message: str
    domain_controller: str
    plan: CollectionPlan


async def insert_job(conn: Connection, job: JobRow, now: datetime) -> int:
    first_flag = 8
    marks = ", ".join(f"${i}" for i in range(first_flag, first_flag + len(COLLECTION_FLAGS)))
    n = first_flag + len(COLLECTION_FLAGS)
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


async def list_client_ids(conn: Connection, skip: int, limit: int) -> tuple[int, list[str]]:
    """One page of live clients' ids, by name, with the total."""
    total, rows = await fetch_page(
        conn,
        """SELECT id, count(*) OVER () FROM clients WHERE deleted_at IS NULL
        ORDER BY name, id""",
        [],
        skip,
        limit,
    )
    return total, [r[0] for r in rows]
