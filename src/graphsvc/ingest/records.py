"""What the format parsers produce: collected objects, references between them, and the
error a bad input file raises."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
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
    OpenGraph environment. With `replaces_properties` (the collector read the object's
    properties), its properties replace the ones an older collection stated, but for the
    facts of blocks it did not collect (ingest/facts.py); otherwise they are merged in.
    `seen` is when its collection was made (the writer sets it from the document)."""

    object_id: str  # upper-cased
    name: str
    kinds: list[str]
    properties: dict[str, Any]
    environment_id: str | None = None
    replaces_properties: bool = False
    seen: datetime | None = None


@dataclass(slots=True)
class EdgeRecord:
    """A relationship between two object ids; a missing endpoint becomes a stub node of
    `start_kind`/`end_kind`. `environment_id` names the environment whose record produced it.

    `fact` names the group of facts it belongs to ("aces", "localgroup:AdminTo"...) and
    `owner` the object whose record stated it: a newer collection that states the same
    group for that object replaces the group whole (stale facts go). Without a fact (a
    session, an OpenGraph edge) it accumulates. `seen`: as NodeRecord's."""

    start: str
    end: str
    kind: str
    environment_id: str | None = None
    start_kind: str = "Base"
    end_kind: str = "Base"
    properties: dict[str, Any] = field(default_factory=dict)
    fact: str | None = None
    owner: str | None = None
    seen: datetime | None = None


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


# Lists their parser reads in the producer's own key case (with a fallback to any case):
# lower-casing a dozen ACEs a record was a fifth of the time spent on keys.
RAW_KEYS = {"aces"}


def lower_keys(value: Any) -> Any:
    """Keys lower-cased at every level, but for RAW_KEYS' values; property bags only at their
    own level (their values are data, stored as they are). Scalars are taken as they are,
    without a call each."""
    if type(value) is dict:
        lowered = {}
        for key, item in value.items():
            key = str(key).lower()
            kind = type(item)
            if key in RAW_KEYS:
                lowered[key] = item
            elif kind is dict:
                lowered[key] = (
                    {str(k).lower(): v for k, v in item.items()}
                    if key == "properties"
                    else lower_keys(item)
                )
            elif kind is list:
                lowered[key] = lower_keys(item)
            else:
                lowered[key] = item
        return lowered
    if type(value) is list:
        return [lower_keys(v) if type(v) is dict or type(v) is list else v for v in value]
    return value
