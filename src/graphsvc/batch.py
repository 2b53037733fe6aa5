"""What a format parser produces from collector files: nodes merged by id, and edges."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class IngestError(Exception):
    """A bad input file; the message names the file and the offending element."""

    def __init__(self, source: str, message: str, element: str | None = None) -> None:
        where = f"{source}: {element}" if element else source
        super().__init__(f"{where}: {message}")
        self.source = source
        self.element = element


PropertyValue = str | int | float | bool | list[str] | list[int] | list[float] | list[bool]


@dataclass
class Node:
    object_id: str  # upper-cased
    name: str
    kinds: list[str]
    properties: dict[str, Any]


@dataclass
class Endpoint:
    """How an edge names one of its nodes: by id, by name, or by property values."""

    match_by: str
    value: str
    kind: str | None = None
    matchers: list[tuple[str, PropertyValue]] = field(default_factory=list)

    def describe(self) -> str:
        if self.match_by == "property":
            return " and ".join(f"{k} = {v!r}" for k, v in self.matchers)
        return f"{self.match_by} {self.value!r}"


@dataclass
class Edge:
    kind: str
    start: Endpoint
    end: Endpoint
    properties: dict[str, Any]
    source: str
    element: str


@dataclass
class GraphBatch:
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)

    def add_node(self, node: Node) -> None:
        """Merge by object id, as collectors repeat ids (stubs, several files)."""
        known = self.nodes.get(node.object_id)
        if known is None:
            self.nodes[node.object_id] = node
            return
        known.kinds = merge_kinds(node.kinds, known.kinds)
        known.properties.update(node.properties)
        if node.name and node.name != node.object_id:
            known.name = node.name


def merge_kinds(first: Sequence[str], then: Sequence[str]) -> list[str]:
    return list(dict.fromkeys([*first, *then]))


def read_json(path: Path) -> Any:
    """Parse a JSON file, tolerating a UTF-8 byte-order mark."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise IngestError(str(path), f"cannot read: {exc.strerror or exc}") from None
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise IngestError(str(path), f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise IngestError(
            str(path), f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
