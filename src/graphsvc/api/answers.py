"""Answers from memory while the data is unchanged: the key and ETag of a read,
`If-None-Match`, and the bounded cache of encoded answers, keyed by the store's data version
(store/data_version.py) and the normalized request.

An ETag made from the data version and the request names one answer: the store's data
behind a cached operation changes only with the version, and its answer shows nothing else
that moves (operations that show a time that moves per request, or a token's last access,
are marked `cached=False` in the operations table and get an ETag made from their bytes).

One kind of answer shows a time that moves and is kept all the same: a list over a time
window that ends now (the data-quality statistics asked without `end`). It is kept as its
bytes around the window's bounds, which each answer fills in with the time it is sent,
until a record can enter or leave the window as it moves (`Window.records_change_at`). Its
bytes differ from one answer to the next, so its ETag is weak, made from the records'
bytes: a client holding it gets 304 while the records are unchanged.
"""

from __future__ import annotations

import hashlib
import sys
from collections import OrderedDict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from importlib.metadata import version as package_version
from typing import TYPE_CHECKING, NamedTuple

import msgspec

from graphsvc.api.params import BaseUrl, TheCaller
from graphsvc.api.web import Request, Response, encode
from graphsvc.settings import Settings
from graphsvc.store.paging import Window

if TYPE_CHECKING:  # the operations table's console pages use this module's tags
    from graphsvc.api.routes import Operation

# What a cached answer's key holds besides the data version, as JSON: the operation, its
# path parameters, its query as sent (names sorted, the values of each in their order), and
# what else of the request it depends on (see `AnswerKeys.context`): the user, for the
# operations whose answer is the caller's own or that check what the caller may see, and
# the URL the service was reached at, for those that show it. One bytes object: its size
# is known at once, and it is hashed and compared as fast as the tuples it was made of.
AnswerKey = bytes
CACHE_CONTROL = "private, no-cache"  # a client may keep it, but must ask (If-None-Match)
# Each entry's own objects besides its key and its body: the Answer and entry tuples, the
# ETag string, the size, and its place in the OrderedDict (sys.getsizeof each, CPython 3.11:
# 64 + 56 + 83 + 28 + about 100 for the OrderedDict's slot and link).
ENTRY_OVERHEAD_BYTES = 400
encode_key = msgspec.json.Encoder().encode
# Where a window's moving bounds sit in the encoded answer: each field with a time no record
# can have (years before any collector), found with its name, since a client may ask for
# any start; the start before the end (the wire shapes' field order).
MARKED_START = datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=UTC)
MARKED_END = datetime(1, 1, 1, 0, 0, 0, 2, tzinfo=UTC)
START_FIELD = b'"start":'
END_FIELD = b'"end":'
START_MARK = START_FIELD + encode(MARKED_START)
END_MARK = END_FIELD + encode(MARKED_END)


class MovingWindow(NamedTuple):
    """A kept answer over a window that ends at the time it is sent: its bytes around the
    window's start (when it moves) and end, until its records can change."""

    pieces: tuple[bytes, ...]  # three: around the start and the end; two: around the end
    start_follows_by: timedelta | None  # the start, this long before the end; None: fixed
    until: datetime  # when a record can enter or leave the window: made again from then on

    def body(self, now: datetime) -> bytes:
        end = END_FIELD + encode(now)
        if self.start_follows_by is None:
            return end.join(self.pieces)
        before_start, before_end, after_end = self.pieces
        start = START_FIELD + encode(now - self.start_follows_by)
        return b"".join((before_start, start, before_end, end, after_end))


class Answer(NamedTuple):
    etag: str
    body: bytes  # empty for an answer over a moving window: `moving` holds its bytes
    moving: MovingWindow | None = None

    def body_at(self, now: datetime) -> bytes:
        return self.body if self.moving is None else self.moving.body(now)

    def size(self) -> int:
        pieces = () if self.moving is None else self.moving.pieces
        return sum(map(sys.getsizeof, pieces), sys.getsizeof(self.body))


def make_key(
    operation_id: str,
    path_params: dict[str, str],
    query: dict[str, list[str]],
    context: list[str | None],
) -> AnswerKey:
    return encode_key((operation_id, list(path_params.values()), sorted(query.items()), context))


class AnswerKeys:
    """The key of each cached read: what, besides its operation and parameters, its answer
    depends on."""

    def __init__(self, settings: Settings, operations: Iterable[Operation]) -> None:
        # The operations whose answer is the caller's own, or depends on who may see it: the
        # user is part of its key. Those that show the URL the service was reached at, when
        # no public URL is set: that URL is (a request's Host must not decide another's).
        self.per_caller: set[str] = set()
        self.per_base_url: set[str] = set()
        for op in operations:
            if any(isinstance(p, TheCaller) for p in op.parameters):
                self.per_caller.add(op.operation_id)
            if not settings.public_url and any(isinstance(p, BaseUrl) for p in op.parameters):
                self.per_base_url.add(op.operation_id)

    def key(self, op: Operation, request: Request) -> AnswerKey:
        """The key of `op`'s answer to `request`, once its caller is known."""
        context: list[str | None] = []
        if op.operation_id in self.per_caller:
            context.append(request.caller.principal.user_id)
        if op.operation_id in self.per_base_url:
            context.append(request.base_url())
        if op.request_body is not None:  # a read asked with a body: its bytes, as sent
            context.append(request.received_body().decode("latin-1"))
        return make_key(op.operation_id, request.path_params, request.query, context)


def etag_salt(edition: str) -> bytes:
    """What besides the data makes an answer: a replica of another edition or another
    graphsvc release may answer the same request otherwise (as blake2b's 16-byte salt)."""
    named = f"{edition} {package_version('graphsvc')}".encode()
    return hashlib.blake2b(named, digest_size=16).digest()


def version_etag(version: int, key: AnswerKey, salt: bytes) -> str:
    """A strong ETag for the answer to `key` while the store is at `version`."""
    digest = hashlib.blake2b(key, digest_size=16, person=version.to_bytes(8), salt=salt)
    return f'"{digest.hexdigest()}"'


def records_etag(key: AnswerKey, records: bytes, salt: bytes) -> str:
    """A weak ETag for an answer over a moving window: its key and its records' bytes."""
    digest = hashlib.blake2b(key, digest_size=16, salt=salt)
    digest.update(records)
    return f'W/"{digest.hexdigest()}"'


def content_etag(body: bytes) -> str:
    """A strong ETag of an answer that is not cached: its bytes' digest."""
    return f'"{hashlib.blake2b(body, digest_size=16).hexdigest()}"'


def names_any(if_none_match: str | None) -> bool:
    """`If-None-Match: *`: any current answer, so one that is known to exist (RFC 9110
    13.1.2); an operation that would fail (a 404) must run before it answers 304."""
    return if_none_match is not None and if_none_match.strip() == "*"


def matches_none(if_none_match: str | None, etag: str) -> bool:
    """Whether a GET's `If-None-Match` fails for `etag` (RFC 9110 13.1.2: `*`, or a list of
    tags compared weakly), which answers 304."""
    if if_none_match is None:
        return False
    text = if_none_match.strip()
    if text == "*":
        return True
    etag = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == etag for tag in text.split(","))


def keep_answer(
    answer: msgspec.Struct, key: AnswerKey, version: int, window: Window | None, salt: bytes
) -> Answer | None:
    """`answer`, encoded as it is kept; None when it cannot be (a window that ends now,
    whose read noted no time its records change)."""
    if window is None:
        return Answer(version_etag(version, key, salt), encode(answer))
    until = window.records_change_at
    if until is None:
        return None
    follows_by = window.start_follows_by
    marks = {"end": MARKED_END}
    if follows_by is not None:
        marks["start"] = MARKED_START
    records = encode(msgspec.structs.replace(answer, **marks))
    if follows_by is None:
        pieces = tuple(records.split(END_MARK, 1))
    else:
        before_start, rest = records.split(START_MARK, 1)
        pieces = (before_start, *rest.split(END_MARK, 1))
    return Answer(records_etag(key, records, salt), b"", MovingWindow(pieces, follows_by, until))


def answer_kept(
    kept: Answer, if_none_match: str | None, headers: dict[str, str], status: int
) -> Response:
    """A kept answer, or 304 when `If-None-Match` names it."""
    headers["ETag"] = kept.etag
    if matches_none(if_none_match, kept.etag):
        return Response(304, b"", headers)
    return Response(status, kept.body_at(datetime.now(UTC)), headers)


class AnswerCache:
    """Encoded answers of one data version, least recently used dropped first past
    `max_bytes` (a body, its key and ENTRY_OVERHEAD_BYTES each). Every entry is
    dropped when the version moves; an answer over a moving window, when its records can
    change."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.version: int | None = None
        self.entries: OrderedDict[AnswerKey, tuple[Answer, int]] = OrderedDict()
        self.size = 0

    def get(self, version: int, key: AnswerKey) -> Answer | None:
        if version != self.version:
            self.clear(version)
        found = self.entries.get(key)
        if found is None:
            return None
        answer = found[0]
        if answer.moving is not None and datetime.now(UTC) >= answer.moving.until:
            del self.entries[key]
            self.size -= found[1]
            return None
        self.entries.move_to_end(key)
        return answer

    def put(self, version: int, key: AnswerKey, answer: Answer) -> None:
        """Keep an answer made while the store was at `version` (none, if it has moved
        since: the answer may be of either)."""
        if version != self.version:
            return
        cost = answer.size() + sys.getsizeof(key) + ENTRY_OVERHEAD_BYTES
        if cost > self.max_bytes:
            return
        previous = self.entries.pop(key, None)
        if previous is not None:
            self.size -= previous[1]
        while self.size + cost > self.max_bytes:
            _, (_, dropped) = self.entries.popitem(last=False)
            self.size -= dropped
        self.entries[key] = (answer, cost)
        self.size += cost

    def clear(self, version: int | None) -> None:
        self.version = version
        self.entries = OrderedDict()
        self.size = 0
