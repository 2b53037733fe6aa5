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

# What a cached answer's key holds besides the data version: the operation, its path
# parameters, its query as sent (names sorted, the values of each in their order), and the
# user, for the operations whose answer is the caller's own.
AnswerKey = tuple[str, tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...], str | None]
CACHE_CONTROL = "private, no-cache"  # a client may keep it, but must ask (If-None-Match)
# Each entry's own objects besides its key's strings and its body: the entry tuple, its
# place in the OrderedDict and the key's tuples (measured with sys.getsizeof, CPython 3.11).
ENTRY_OVERHEAD_BYTES = 400


class Answer(NamedTuple):
    etag: str
    body: bytes


def make_key(
    operation_id: str,
    path_params: dict[str, str],
    query: dict[str, list[str]],
    user_id: str | None,
) -> AnswerKey:
    return (
        operation_id,
        tuple(path_params.values()),
        tuple((name, tuple(query[name])) for name in sorted(query)),
        user_id,
    )


def etag_salt(edition: str) -> str:
    """What besides the data makes an answer: a replica of another edition or another
    graphsvc release may answer the same request otherwise."""
    return f"{edition} {package_version('graphsvc')}"


def version_etag(version: int, key: AnswerKey, salt: str) -> str:
    """A strong ETag for the answer to `key` while the store is at `version`."""
    digest = hashlib.blake2b(repr((version, key, salt)).encode(), digest_size=16)
    return f'"{digest.hexdigest()}"'


def content_etag(body: bytes) -> str:
    """A strong ETag of an answer that is not cached: its bytes' digest."""
    return f'"{hashlib.blake2b(body, digest_size=16).hexdigest()}"'


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


def key_bytes(key: AnswerKey) -> int:
    operation_id, path, query, user_id = key
    size = sys.getsizeof(operation_id) + sum(sys.getsizeof(p) for p in path)
    for name, values in query:
        size += sys.getsizeof(name) + sum(sys.getsizeof(v) for v in values)
    return size + (0 if user_id is None else sys.getsizeof(user_id))


class AnswerCache:
    """Encoded answers of one data version, least recently used dropped first past
    `max_bytes` (a body, its key's strings and ENTRY_OVERHEAD_BYTES each). Every entry is
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
        cost = sys.getsizeof(answer.body) + key_bytes(key) + ENTRY_OVERHEAD_BYTES
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
