"""Graph schema extensions: listed with their environment kinds (the ids the aggregations ask
for), and registered from an OpenGraph definition (CLI)."""

from __future__ import annotations

from datetime import UTC, datetime

from graphsvc import wire
from graphsvc.errors import bad_request, conflict
from graphsvc.store import extensions
from graphsvc.store.db import Connection


async def list_extensions(conn: Connection) -> wire.ExtensionList:
    return wire.ExtensionList(
        [
            wire.ExtensionInfo(
                x.id,
                x.name,
                x.display_name,
                x.version,
                x.is_builtin,
                [wire.EnvironmentKindInfo(*env) for env in x.environments],
            )
            for x in await extensions.list_extensions(conn)
        ]
    )


async def list_extension_summaries(conn: Connection) -> wire.ExtensionSummaryResponse:
    """The reference's list (GET /api/v2/extensions): no environment kinds."""
    return wire.ExtensionSummaryResponse(
        wire.ExtensionSummaries(
            [
                wire.ExtensionSummary(x.id, x.display_name, x.name, x.version, x.is_builtin)
                for x in await extensions.list_extensions(conn)
            ]
        )
    )


async def register_extension(conn: Connection, definition: wire.ExtensionDefinition) -> int:
    """An OpenGraph schema extension: its kinds, and the environment kinds its statistics
    are counted for (each must be one of its node kinds)."""
    environments = [(e.kind, e.source_kind) for e in definition.environment_kinds]
    if not environments or not definition.node_kinds:
        raise bad_request(
            "an extension needs node kinds and at least one environment kind", "environment_kinds"
        )
    missing = [kind for kind, _ in environments if kind not in definition.node_kinds]
    if missing:
        raise bad_request(
            f"environment kinds must be node kinds too: {', '.join(missing)}", "environment_kinds"
        )
    if any(x.name == definition.name for x in await extensions.list_extensions(conn)):
        raise conflict(f"an extension named {definition.name!r} already exists", "name")
    return await extensions.create_extension(
        conn,
        definition.name,
        definition.display_name,
        definition.version,
        definition.node_kinds,
        definition.relationship_kinds,
        environments,
        datetime.now(UTC),
    )
