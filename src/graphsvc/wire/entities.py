"""An entity of the graph as its route answers it: `{"data": {"props": {...}, "adminUsers": 2,
...}}`, the reference's shape. Each kind of entity has its own list names, so the shapes are
defined from the entity routes' table (graph.entities)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from graphsvc.wire.common import Count


def define_entity_shapes(
    label: str, count_keys: Sequence[str]
) -> tuple[type[msgspec.Struct], type[msgspec.Struct]]:
    """The `data` struct of an entity of `label` (its properties, and the size of each of
    its lists when counts are asked for) and the answer that wraps it."""
    data = msgspec.defstruct(
        f"{label}Entity",
        [
            ("props", dict[str, Any]),
            *(
                (count_attribute(key), Count | UnsetType, msgspec.field(default=UNSET, name=key))
                for key in count_keys
            ),
        ],
        kw_only=True,
        omit_defaults=True,
    )
    return data, msgspec.defstruct(f"{label}EntityResponse", [("data", data)])


def count_attribute(key: str) -> str:
    """The struct attribute of a count: the reference names some with hyphens
    (`published-templates`), which JSON keeps and Python names cannot hold."""
    return key.replace("-", "_")
