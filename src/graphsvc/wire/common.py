"""The shapes every answer shares: typed ids and counts, the null wrappers of spec section
2.1, and the error body."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Generic, TypeVar

import msgspec
from msgspec import Meta

UUID = Annotated[str, Meta(extra_json_schema={"format": "uuid"})]
Int32 = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1, extra_json_schema={"format": "int32"})]
Int64 = Annotated[int, Meta(extra_json_schema={"format": "int64"})]
Count = Annotated[int, Meta(ge=0)]
Entry = TypeVar("Entry")  # what a page lists

ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
ZERO_UUID = "00000000-0000-0000-0000-000000000000"
MASKED_KEY = "********"  # where a token's key would be: it is shown once, at creation


class NullTime(msgspec.Struct, frozen=True):
    time: datetime
    valid: bool


# Shared by every answer without that time (most rows' deleted_at); frozen, so no answer
# can change it for the others.
NO_TIME = NullTime(ZERO_TIME, False)


class NullInt32(msgspec.Struct):
    int32: Int32
    valid: bool


class NullInt64(msgspec.Struct):
    int64: Int64
    valid: bool


class NullUUID(msgspec.Struct):
    uuid: UUID
    valid: bool


class NullString(msgspec.Struct):
    string: str
    valid: bool


def null_time(value: datetime | None) -> NullTime:
    return NO_TIME if value is None else NullTime(value, True)


def null_int32(value: int | None) -> NullInt32:
    return NullInt32(0, False) if value is None else NullInt32(value, True)


def null_int64(value: int | None) -> NullInt64:
    return NullInt64(0, False) if value is None else NullInt64(value, True)


def null_uuid(value: str | None) -> NullUUID:
    return NullUUID(ZERO_UUID, False) if value is None else NullUUID(value, True)


def null_string(value: str | None) -> NullString:
    return NullString("", False) if value is None else NullString(value, True)


class Paged(msgspec.Struct, Generic[Entry]):
    """One page of a list and the list's size. Each answer names its own subclass
    (`class PagedNodeList(Paged[NodeListEntry])`): the OpenAPI document's schema is named
    after the class, where msgspec would name `Paged[NodeListEntry]` itself
    `Paged_NodeListEntry_`. The subclasses have no docstring: it would become their
    schema's description."""

    count: Count
    skip: Count
    limit: Count
    data: list[Entry]


class ErrorDetail(msgspec.Struct):
    context: str
    message: str


class ErrorBody(msgspec.Struct):
    http_status: Annotated[int, Meta(ge=100, le=600)]
    timestamp: datetime
    request_id: UUID
    errors: list[ErrorDetail]


class Download(msgspec.Struct, frozen=True):
    """A file answered as it is (an export), not as JSON: its bytes, media type and the file
    name offered to save it as."""

    body: bytes
    media_type: str
    filename: str
