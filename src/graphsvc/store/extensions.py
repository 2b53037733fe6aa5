"""Schema extensions: the node and relationship kinds they register, and their environment
kinds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from graphsvc.store.db import (
    Connection,
)
from graphsvc.store.graph import ensure_kinds


class ExtensionEnvironment(NamedTuple):
    kind_id: int
    kind: str
    source_kind: str | None


@dataclass
class Extension:
    id: int
    name: str
    display_name: str
    version: str
    is_builtin: bool
    environments: list[ExtensionEnvironment]


async def list_extensions(conn: Connection) -> list[Extension]:
    rows = await conn.fetch(
        """SELECT x.id, x.name, x.display_name, x.version, x.is_builtin, e.environment_kind_id,
            ek.name, sk.name
        FROM schema_extensions x
        LEFT JOIN schema_environments e ON e.extension_id = x.id AND e.deleted_at IS NULL
        LEFT JOIN kinds ek ON ek.id = e.environment_kind_id
        LEFT JOIN kinds sk ON sk.id = e.source_kind_id
        WHERE x.deleted_at IS NULL ORDER BY x.id, e.environment_kind_id"""
    )
    extensions: dict[int, Extension] = {}
    for ext_id, name, display_name, version, is_builtin, kind_id, kind, source_kind in rows:
        ext = extensions.setdefault(
            ext_id, Extension(ext_id, name, display_name, version, is_builtin, [])
        )
        if kind_id is not None:
            ext.environments.append(ExtensionEnvironment(kind_id, kind, source_kind))
    return list(extensions.values())


async def create_extension(
    conn: Connection,
    name: str,
    display_name: str,
    version: str,
    node_kinds: Sequence[str],
    relationship_kinds: Sequence[str],
    environments: Sequence[tuple[str, str | None]],
    now: datetime,
) -> int:
    extension_id: int = await conn.fetchval(
        """INSERT INTO schema_extensions (name, display_name, version, is_builtin, created_at,
            updated_at) VALUES ($1, $2, $3, FALSE, $4, $4) RETURNING id""",
        name,
        display_name,
        version,
        now,
    )
    kind_ids = await ensure_kinds(
        conn, [*node_kinds, *relationship_kinds, *(k for env in environments for k in env if k)]
    )
    await conn.executemany(
        "INSERT INTO schema_extension_kinds (extension_id, kind_id, category) VALUES ($1, $2, $3)",
        [(extension_id, kind_ids[k], "node") for k in dict.fromkeys(node_kinds)]
        + [(extension_id, kind_ids[k], "relationship") for k in dict.fromkeys(relationship_kinds)],
    )
    await conn.executemany(
        """INSERT INTO schema_environments (extension_id, environment_kind_id, source_kind_id,
            created_at, updated_at) VALUES ($1, $2, $3, $4, $4)""",
        [
            (extension_id, kind_ids[env], kind_ids[src] if src else None, now)
            for env, src in environments
        ],
    )
    return extension_id


async def extension_kinds(conn: Connection) -> dict[int, dict[int, str]]:
    """Per extension: its kind ids and their category (node or relationship)."""
    kinds: dict[int, dict[int, str]] = {}
    for extension_id, kind_id, category in await conn.fetch(
        "SELECT extension_id, kind_id, category FROM schema_extension_kinds"
    ):
        kinds.setdefault(extension_id, {})[kind_id] = category
    return kinds
