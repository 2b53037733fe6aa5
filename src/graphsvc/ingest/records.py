"""What the format parsers produce: collected objects, references between them, and the
error a bad input file raises."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class IngestError(Exception):
    """A bad input file; the message names the file (and zip entry) and the bad element."""

    def __init__(self, source: str, message: str, element: str | None = None) -> None:
        where = f"{source}: {element}" if element else source
        super().__init__(f"{where}: {message}")
        self.source = source
        self.element = element


Primitive = str | int | float | bool


@dataclass
class NodeRecord:
    """An object a collector collected; `environment_id` names its domain, tenant or
    OpenGraph environment."""

    object_id: str  # upper-cased
    name: str
    kinds: list[str]
    properties: dict[str, Any]
    environment_id: str | None = None


@dataclass
class EdgeRecord:
    """A relationship between two object ids; a missing endpoint becomes a stub node of
    `start_kind`/`end_kind`. `environment_id` names the environment whose record produced it."""

    start: str
    end: str
    kind: str
    environment_id: str | None = None
    start_kind: str = "Base"
    end_kind: str = "Base"
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass
class Endpoint:
    """How an OpenGraph edge names one of its nodes: by id, by name, or by property values."""

    match_by: str
    value: str
    kind: str | None = None
    matchers: list[tuple[str, Primitive]] = field(default_factory=list)

    def describe(self) -> str:
        if self.match_by == "property":
            return " and ".join(f"{k} = {v!r}" for k, v in self.matchers)
        return f"{self.match_by} {self.value!r}"


@dataclass
class MatchedEdge:
    """An OpenGraph edge, resolved once every node of the run is stored."""

    kind: str
    start: Endpoint
    end: Endpoint
    properties: dict[str, Any]
    source: str
    element: str


def merge_kinds(first: list[str], then: list[str]) -> list[str]:
    return list(dict.fromkeys([*first, *then]))


# Large, and not used by anything this service serves: dropped while reading.
UNUSED_KEYS = {"aces"}


def lower_keys(value: Any) -> Any:
    """Keys lower-cased at every level; property bags only at their own level (their values
    are data, stored as they are)."""
    if isinstance(value, dict):
        lowered = {}
        for key, item in value.items():
            key = str(key).lower()
            if key in UNUSED_KEYS:
                continue
            if key == "properties" and isinstance(item, dict):
                lowered[key] = {str(k).lower(): v for k, v in item.items()}
            else:
                lowered[key] = lower_keys(item)
        return lowered
    if isinstance(value, list):
        return [lower_keys(v) for v in value]
    return value
