"""Deleting what `POST /api/v2/clear-database` names, in the caller's transaction, and the
source kinds it names them by (migration 0019)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from graphsvc.store import graph, uploads
from graphsvc.store.db import Connection
from graphsvc.store.dialect import in_list, list_param

SOURCELESS_ID = 0  # the reference's number for the nodes of no source kind
SEEDED_SOURCE_KINDS = ("Base", "AZBase")  # never removed from the list
# What data-quality history is: every statistics and aggregation table.
DATA_QUALITY_TABLES = (
    "ad_domain_stats",
    "azure_tenant_stats",
    "data_quality_environment_stats",
    "data_quality_aggregations",
    "aggregation_batches",
)
ENDED_JOB_STATUSES = (uploads.COMPLETE, uploads.CANCELED, uploads.TIMED_OUT, uploads.FAILED)


@dataclass(frozen=True)
class SourceKind:
    id: int
    name: str


async def list_source_kinds(conn: Connection) -> list[SourceKind]:
    rows = await conn.fetch("SELECT id, name FROM source_kinds ORDER BY name, id")
    return [SourceKind(int(r[0]), str(r[1])) for r in rows]


async def list_kind_names(conn: Connection) -> set[str]:
    """Every kind of node or relationship the store has named."""
    return {str(name) for (name,) in await conn.fetch("SELECT name FROM kinds")}


async def register_source_kind(conn: Connection, name: str) -> None:
    """Add an OpenGraph file's source kind, numbered after the others, unless known."""
    await conn.execute(
        """INSERT INTO source_kinds (id, name)
        SELECT (SELECT coalesce(max(id), 0) + 1 FROM source_kinds), $1
        WHERE NOT EXISTS (SELECT 1 FROM source_kinds WHERE name = $1)""",
        name,
    )


async def forget_source_kinds(conn: Connection, names: Sequence[str]) -> None:
    """Drop source kinds from the list (Base and AZBase stay)."""
    kept = [n for n in names if n not in SEEDED_SOURCE_KINDS]
    if kept:
        await conn.execute(
            f"DELETE FROM source_kinds WHERE {in_list(conn.dialect, 'name', '$1')}",
            list_param(conn.dialect, kept),
        )


async def delete_whole_graph(conn: Connection) -> None:
    """Every node and relationship, and what marks them (kinds of nodes, tags)."""
    for table in ("edges", "node_kinds", "tag_members", "asset_group_tag_selector_nodes", "nodes"):
        await conn.execute(f"DELETE FROM {table}")


async def delete_nodes_where(conn: Connection, condition: str, *args: object) -> None:
    """The nodes `condition` (on `nodes`, with `$1`...) selects, as graph.delete_node_ids
    deletes them. They are found first: the condition may read the kinds deleted with them."""
    found = await conn.fetch(f"SELECT id FROM nodes WHERE {condition}", *args)
    await graph.delete_node_ids(conn, [int(row[0]) for row in found])


async def delete_nodes_of_kinds(conn: Connection, kinds: Sequence[str]) -> None:
    """Every node carrying one of the kinds."""
    await delete_nodes_where(
        conn,
        f"""id IN (SELECT node_kinds.node_id FROM node_kinds JOIN kinds
            ON kinds.id = node_kinds.kind_id WHERE {in_list(conn.dialect, "kinds.name", "$1")})""",
        list_param(conn.dialect, kinds),
    )


async def delete_nodes_of_no_kind(conn: Connection, kinds: Sequence[str]) -> None:
    """Every node carrying none of the kinds (the reference's "sourceless" nodes)."""
    await delete_nodes_where(
        conn,
        f"""id NOT IN (SELECT node_kinds.node_id FROM node_kinds JOIN kinds
            ON kinds.id = node_kinds.kind_id WHERE {in_list(conn.dialect, "kinds.name", "$1")})""",
        list_param(conn.dialect, kinds),
    )


async def delete_relationships_of_kinds(conn: Connection, kinds: Sequence[str]) -> None:
    await conn.execute(
        f"""DELETE FROM edges WHERE kind_id IN
        (SELECT id FROM kinds WHERE {in_list(conn.dialect, "name", "$1")})""",
        list_param(conn.dialect, kinds),
    )


async def record_graph_clearing(conn: Connection, cleared: str, now: datetime) -> None:
    """A clearing that deleted from the graph: its version moves (store/paths.py)."""
    await conn.execute(
        "INSERT INTO graph_clearings (id, created_at, cleared) VALUES ($1, $2, $3)",
        str(uuid.uuid4()),
        now,
        cleared,
    )


async def delete_ended_upload_jobs(conn: Connection) -> int:
    """The upload jobs that ended (their files, tasks and bytes with them); a job still
    taking files or being ingested is not history yet. How many went."""
    ended = f"SELECT id FROM file_upload_jobs WHERE {in_list(conn.dialect, 'status', '$1', 'int')}"
    statuses = list_param(conn.dialect, ENDED_JOB_STATUSES)
    count = int(await conn.fetchval(f"SELECT count(*) FROM ({ended}) AS ended_jobs", statuses))
    files = f"SELECT id FROM file_upload_files WHERE job_id IN ({ended})"
    await conn.execute(f"DELETE FROM file_upload_chunks WHERE file_id IN ({files})", statuses)
    for table in ("file_upload_tasks", "file_upload_files"):
        await conn.execute(f"DELETE FROM {table} WHERE job_id IN ({ended})", statuses)
    await conn.execute(f"DELETE FROM file_upload_jobs WHERE id IN ({ended})", statuses)
    return count


async def delete_data_quality_history(conn: Connection) -> None:
    for table in DATA_QUALITY_TABLES:
        await conn.execute(f"DELETE FROM {table}")
