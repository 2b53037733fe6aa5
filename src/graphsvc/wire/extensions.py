"""Graph schema extensions and their environment kinds."""

from __future__ import annotations

import msgspec


class EnvironmentKindInfo(msgspec.Struct):
    id: int
    name: str
    source_kind: str | None


class ExtensionInfo(msgspec.Struct):
    """A schema extension, with the environment kind ids the aggregations ask for."""

    id: int
    name: str
    display_name: str
    version: str
    is_builtin: bool
    environment_kinds: list[EnvironmentKindInfo]


class ExtensionList(msgspec.Struct):
    data: list[ExtensionInfo]


class ExtensionSummary(msgspec.Struct):
    """A schema extension as the reference's GET /api/v2/extensions lists it."""

    id: int
    name: str  # the display name
    namespace: str  # the extension's own name
    version: str
    is_builtin: bool


class ExtensionSummaries(msgspec.Struct):
    extensions: list[ExtensionSummary]


class ExtensionSummaryResponse(msgspec.Struct):
    data: ExtensionSummaries


class EnvironmentKindDefinition(msgspec.Struct):
    kind: str
    source_kind: str | None = None


class ExtensionDefinition(msgspec.Struct, forbid_unknown_fields=True):
    """An OpenGraph schema extension as `graphsvc schema register` reads it."""

    name: str
    display_name: str
    version: str
    node_kinds: list[str]
    relationship_kinds: list[str]
    environment_kinds: list[EnvironmentKindDefinition]
