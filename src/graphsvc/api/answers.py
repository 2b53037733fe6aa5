"""Answers from memory while the data is unchanged: the ETag of a read, `If-None-Match`, and
the bounded cache of encoded answers, both keyed by the store's data version (store/db.py)
and the normalized request.

An ETag made from the data version and the request names one answer: the store's data
behind a cached operation changes only with the version, and its answer shows nothing else
that moves (operations that show a time that moves per request, or a token's last access,
are marked `cached=False` in the operations table and get an ETag made from their bytes).
"""

from __future__ import annotations

import hashlib
import sys
from collections import OrderedDict
from importlib.metadata import version as package_version
from typing import NamedTuple

import msgspec

# What a cached answer's key holds besides the data version, as JSON: the operation, its
# path parameters, its query as sent (names sorted, the values of each in their order), and
# what else of the request it depends on (see `App.key_context`): the user, for the
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


class Answer(NamedTuple):
    etag: str
    body: bytes


def make_key(
    operation_id: str,
    path_params: dict[str, str],
    query: dict[str, list[str]],
    context: list[str | None],
) -> AnswerKey:
    return encode_key((operation_id, list(path_params.values()), sorted(query.items()), context))


def etag_salt(edition: str) -> bytes:
    """What besides the data makes an answer: a replica of another edition or another
    graphsvc release may answer the same request otherwise (as blake2b's 16-byte salt)."""
    named = f"{edition} {package_version('graphsvc')}".encode()
    return hashlib.blake2b(named, digest_size=16).digest()


def version_etag(version: int, key: AnswerKey, salt: bytes) -> str:
    """A strong ETag for the answer to `key` while the store is at `version`."""
    digest = hashlib.blake2b(key, digest_size=16, person=version.to_bytes(8), salt=salt)
    return f'"{digest.hexdigest()}"'


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
    for tag in text.split(","):
        tag = tag.strip()
        if tag.startswith("W/"):
            tag = tag[2:]
        if tag == etag:
            return True
    return False


class AnswerCache:
    """Encoded answers of one data version, least recently used dropped first past
    `max_bytes` (a body, its key and ENTRY_OVERHEAD_BYTES each). Every entry is
    dropped when the version moves."""

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
        self.entries.move_to_end(key)
        return found[0]

    def put(self, version: int, key: AnswerKey, answer: Answer) -> None:
        """Keep an answer made while the store was at `version` (none, if it has moved
        since: the answer may be of either)."""
        if version != self.version:
            return
        cost = sys.getsizeof(answer.body) + sys.getsizeof(key) + ENTRY_OVERHEAD_BYTES
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
