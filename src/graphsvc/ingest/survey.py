"""The first pass over a document: checks its shape is safe to build records from, and picks
up its `meta` object on the way.

Building records (ijson's items) costs memory with the square of the nesting depth, and
Python's recursion ends in a RecursionError: a 200 KB file nested 100,000 arrays deep grew
an ingest past 22 GB. This pass reads only parser events, so its memory stays flat whatever
the input, and refuses, before any record is built, a document nested deeper than any
collector writes, a value too large for any collector to write, or a record too large. The
parser reads through the lexer (lexer.py), which refuses a token past its bound before the
parser has any of it.

Both passes are generators that yield between chunks: `survey_source` gives the event loop
a turn at each, so that an ingest being stopped (SIGTERM, SIGINT, the ingester's `stop`)
stops there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Generator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import IO, Any, TypeVar

import numpy as np
from ijson.common import ObjectBuilder

from graphsvc.ingest.lexer import Lexed, Lexer, TokenBounds, TokenTooLong, parse_events
from graphsvc.ingest.records import IngestError

T = TypeVar("T")

# Real collector output nests 9 levels at most (SharpHound ADCS objects, OpenGraph
# properties); these limits leave room and are in docs/security.md.
MAX_DEPTH = 32
MAX_VALUE_BYTES = 1 << 20  # characters of one string (a certificate, a description)
MAX_RECORD_BYTES = 16 << 20  # the text of one record: its keys and values
# The longest key in the fixtures' collector output has 36 characters
# (enrollmentagentrestrictionscollected, SharpHound's enterprise CAs); 1 KiB of JSON text is
# 28 times that, or 170 characters written wholly as \u escapes.
MAX_KEY_BYTES = 1024
# Collectors write integers of up to 20 digits (yajl refuses larger ones) and doubles, which
# round-trip in 17 significant digits (24 characters with sign and exponent); 1 KiB leaves
# room for a writer that prints more digits. Literals are 4 or 5 bytes.
MAX_NUMBER_BYTES = 1024
# The longest JSON text of one character: one outside the Basic Multilingual Plane written
# as two escapes (\ud83d\ude00). A value's text may be this many times its character limit,
# so that limit, checked on the parser's string, stays the one that refuses a value.
MAX_BYTES_PER_CHARACTER = 12


def token_bounds() -> TokenBounds:
    """The lexer's bounds, from the limits (read at each call: the tests make them tiny)."""
    return TokenBounds(MAX_BYTES_PER_CHARACTER * MAX_VALUE_BYTES, MAX_KEY_BYTES, MAX_NUMBER_BYTES)


async def paced(steps: Generator[None, None, T]) -> T:
    """`steps` run to its end, the event loop given a turn at each of its yields (the fast
    pass yields at every MiB it reads, a few milliseconds; the exact survey at every piece
    the lexer hands its parser, 64 KiB or so). A cancellation lands there."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result
        await asyncio.sleep(0)


def survey(stream: IO[bytes], label: str) -> Generator[None, None, Any]:
    """Check the whole document, yielding after each piece of it; returns its top-level
    `meta` value (None without one).

    A record is an element of a top-level array (`data[i]`), or of an array inside the
    top-level `graph` object (`graph.nodes[i]`, OpenGraph).
    """
    depth = 0
    top_key = ""  # the top-level key being read
    inner_key = ""  # the key inside the top-level value (OpenGraph: nodes, edges)
    key = ""  # the last key read at any depth
    record_depth = 3
    index = -1  # of the record being read within its array
    record_bytes = 0
    builder: ObjectBuilder | None = None  # of the `meta` value, while it is read
    metas: list[Any] = []

    def element() -> str:
        if depth < record_depth or index < 0:
            return top_key or "document"
        where = f"{top_key}.{inner_key}" if record_depth == 4 else top_key
        return f"{where}[{index}]"

    def value_element() -> str:
        """The element of the value being read: under its key, unless that is the
        top-level key the element already names."""
        if not key or (key == top_key and depth < record_depth):
            return element()
        return f"{element()}.{key}"

    # The hot loop of ingest's first pass (13 million events in 173 MB of SharpHound): the
    # common events are tested first, and everything kept for messages is updated only at
    # the shallow depths where it changes.
    try:
        for events in parse_events(stream, token_bounds()):
            for event, value in events:
                if builder is not None:
                    if depth == 1 and (event == "map_key" or event == "end_map"):  # the value ended
                        metas.append(builder.value)
                        builder = None
                    else:
                        builder.event(event, value)
                if event == "map_key":
                    record_bytes += len(value)
                    key = value
                    if depth <= 2:
                        if depth == 1:
                            top_key, index = value, -1
                            record_depth = 4 if value == "graph" else 3
                            if value == "meta" and not metas:
                                builder = ObjectBuilder()
                        elif record_depth == 4:
                            inner_key, index = value, -1
                elif event == "string":
                    record_bytes += len(value)
                    if len(value) > MAX_VALUE_BYTES:
                        raise IngestError(
                            label,
                            f"a value of {len(value):,} characters; at most {MAX_VALUE_BYTES:,}",
                            value_element(),
                        )
                elif event == "start_map" or event == "start_array":
                    depth += 1
                    if depth > MAX_DEPTH:
                        raise IngestError(
                            label, f"nested deeper than {MAX_DEPTH} levels", element()
                        )
                    if depth == record_depth:
                        index += 1
                        record_bytes = 0
                elif event == "end_map" or event == "end_array":
                    depth -= 1
                    if depth < record_depth - 1:
                        index = -1
                else:
                    record_bytes += 8
                if record_bytes > MAX_RECORD_BYTES and depth >= record_depth:
                    raise IngestError(
                        label, f"a record larger than {MAX_RECORD_BYTES:,} bytes of text", element()
                    )
            yield
    except TokenTooLong as long:
        if long.kind == "key":
            raise IngestError(label, str(long), element() if depth > 1 else "document") from None
        reason = str(long)
        if long.kind == "string":
            reason += f"; at most {MAX_VALUE_BYTES:,} characters"
        raise IngestError(label, reason, value_element()) from None
    return metas[0] if metas else None


# The fast pass reads this much at a time. Over the 1 GB benchmark's users and computers
# files: 1 MiB chunks 2.1 s and 11 MB of peak memory, 8 MiB chunks 2.9 s and 83 MB.
SCAN_CHUNK_BYTES = 1 << 20

WHITESPACE = b" \t\r\n"
TOP_KEYS = (b'"meta"', b'"graph"')  # the top-level keys the survey acts on
WINDOW_TAIL = 8192  # of the last chunk kept, for a key read across chunks
MAX_TOP_STRINGS = 1000  # strings at depth 1 one chunk may hold (a collector writes two)
MAX_LONG_REGIONS = 1000  # containers over the record bound (OpenGraph: its two arrays)


class Unsure(Exception):
    """The fast pass cannot vouch for the document: the exact survey decides."""


@dataclass(frozen=True)
class Surveyed:
    """The survey's answer: the document's top-level `meta` value (None without one), and
    whether the fast pass vouched for it (then no string has more than MAX_VALUE_BYTES of
    text); else the exact survey did, and a value may have MAX_BYTES_PER_CHARACTER times
    that."""

    meta: Any
    fast: bool


async def survey_source(
    open_stream: Callable[[], AbstractContextManager[IO[bytes]]], label: str
) -> Surveyed:
    """The survey's answer for a document, from the fast pass where it can vouch for it.

    The exact survey is Python per parser event: 13.8 s of a 94 s ingest of the 1 GB
    benchmark collection. The fast pass classifies bytes with numpy and only proves that no
    limit can be reached (a value's raw text is no shorter than its characters, and a
    record's counted size at most four times its raw text); on anything it cannot prove (a
    limit within reach, text that is not well-formed, a top-level key with escapes), the
    exact survey reads the document again and reports as before.
    """
    with open_stream() as stream:
        try:
            return Surveyed(await paced(scan(stream)), fast=True)
        except Unsure:
            pass
    with open_stream() as stream:
        return Surveyed(await paced(survey(stream, label)), fast=False)


class Carry:
    """What one chunk of the fast pass leaves to the next."""

    def __init__(self) -> None:
        self.region_start = {3: -1, 4: -1}  # of the container open at that depth
        self.finished = False  # the top-level value has closed
        self.window = b""  # the last chunk, then this one: where top-level keys are read
        self.window_start = 0
        self.pending: list[int] = []  # top-level strings whose key check needs more bytes
        self.meta: list[bytes] | None = None  # the `meta` value's text, while read
        self.meta_start = -1  # its opening bracket, once known
        self.meta_done = False
        self.meta_bytes = 0
        self.graph: list[list[int]] = []  # [open, close] of each `graph` value (-1: not yet)
        self.too_long: dict[int, list[int]] = {3: [], 4: []}  # regions over the bound


def scan(stream: IO[bytes]) -> Generator[None, None, Any]:
    """The fast pass, yielding after each chunk: the document's `meta` value (None without
    one), or Unsure. The lexer measures its tokens as it does for the parser, so that a
    document the fast pass vouches for holds none past its bound either."""
    carry = Carry()
    lexer = Lexer(token_bounds())
    while chunk := stream.read(SCAN_CHUNK_BYTES):
        try:
            lexed = lexer.feed(chunk)
        except TokenTooLong:
            raise Unsure from None
        scan_chunk(chunk, lexed, carry)
        yield
    if lexer.in_string or lexer.depth or not carry.finished or carry.pending:
        raise Unsure
    if carry.region_start[3] >= 0 or carry.region_start[4] >= 0 or graph_open(carry):
        raise Unsure
    for threshold, starts in carry.too_long.items():
        for start in starts:
            in_graph = any(a <= start <= b for a, b in carry.graph)
            if in_graph == (threshold == 4):
                raise Unsure
    if carry.meta is not None and not carry.meta_done:
        raise Unsure
    if carry.meta is None:
        return None
    try:
        return json.loads(b"".join(carry.meta), parse_constant=refuse_constant)
    except ValueError:
        raise Unsure from None


def refuse_constant(name: str) -> Any:
    raise ValueError(name)  # NaN and Infinity: Python's json takes them, the parser does not


def scan_chunk(chunk: bytes, lexed: Lexed, carry: Carry) -> None:
    start, end = lexed.start, lexed.end
    quotes, backslashes, was_in_string = lexed.quotes, lexed.backslashes, lexed.was_in_string

    # A string's raw text bounds its characters.
    opens, closes = lexed.opens, lexed.closes
    if len(closes) and int((closes - opens[: len(closes)]).max()) - 1 > MAX_VALUE_BYTES:
        raise Unsure
    if len(opens) > len(closes) and end - int(opens[-1]) > MAX_VALUE_BYTES:
        raise Unsure

    brackets, steps, depths = lexed.brackets, lexed.steps, lexed.depths
    if len(brackets):
        if carry.finished or int(depths.max()) > MAX_DEPTH or int(depths.min()) < 0:
            raise Unsure
        zeros = np.flatnonzero(depths == 0)
        if len(zeros):
            if zeros[0] != len(depths) - 1:
                raise Unsure  # a second top-level value
            carry.finished = True

    for threshold in (3, 4):
        track_regions(brackets, steps, depths, threshold, carry)

    # Top-level keys are strings opening at depth 1, between a bracket that leaves the depth
    # at 1 and the next one.
    at_top = np.flatnonzero(depths == 1)
    if len(at_top) > MAX_TOP_STRINGS:
        raise Unsure
    spans = [
        (int(brackets[i]), int(brackets[i + 1]) if i + 1 < len(brackets) else end) for i in at_top
    ]
    if lexed.depth_before == 1:
        spans.insert(0, (start, int(brackets[0]) if len(brackets) else end))
    candidates, carry.pending = carry.pending, []
    for low, high in spans:
        first, last = np.searchsorted(quotes, [low, high])
        if len(backslashes) and np.searchsorted(backslashes, low) < np.searchsorted(
            backslashes, high
        ):
            raise Unsure  # text at depth 1 with escapes (a key?): only the parser reads it
        # The quotes at even places in `strings` open one.
        skip = (first + was_in_string) % 2
        candidates.extend(int(p) for p in quotes[first + skip : last : 2])
        if len(candidates) > MAX_TOP_STRINGS:
            raise Unsure

    carry.window = carry.window[-WINDOW_TAIL:] + chunk
    carry.window_start = end - len(carry.window)
    for position in candidates:
        read_top_key(position, brackets, depths, carry, end)
    follow_top_values(chunk, start, brackets, depths, carry)


def track_regions(
    brackets: np.ndarray, steps: np.ndarray, depths: np.ndarray, threshold: int, carry: Carry
) -> None:
    """Each container opened at `threshold` deep is a record where that is the record depth:
    its raw extent bounds its counted size."""
    opens = brackets[(steps == 1) & (depths == threshold)]
    closes = brackets[(steps == -1) & (depths == threshold - 1)]
    pending = carry.region_start[threshold]
    starts = np.concatenate(([pending], opens)) if pending >= 0 else opens
    paired = len(closes)
    if paired:
        lengths = closes - starts[:paired]
        carry.too_long[threshold].extend(
            int(s) for s in starts[:paired][lengths > MAX_RECORD_BYTES // 4]
        )
        if len(carry.too_long[threshold]) > MAX_LONG_REGIONS:
            raise Unsure
    carry.region_start[threshold] = int(starts[-1]) if len(starts) > paired else -1


def read_top_key(
    position: int, brackets: np.ndarray, depths: np.ndarray, carry: Carry, end: int
) -> None:
    """Note a `meta` or `graph` key opening at `position`, whose value must be a container
    (anything else goes to the exact survey)."""
    window, offset = carry.window, position - carry.window_start
    if offset < 0:
        raise Unsure
    name = next((k for k in TOP_KEYS if window.startswith(k, offset)), None)
    if name is None:
        rest = window[offset:]
        if any(key.startswith(rest) for key in TOP_KEYS):  # cut by the chunk's end
            carry.pending.append(position)
        return
    at = offset + len(name)
    seen_colon = False
    while at < len(window):
        byte = window[at : at + 1]
        if byte in WHITESPACE:
            at += 1
        elif byte == b":" and not seen_colon:
            seen_colon = True
            at += 1
        elif seen_colon and byte in b"{[":
            break
        elif seen_colon:
            raise Unsure  # a top-level `meta` or `graph` whose value is not a container
        else:
            return  # a string value, not a key
    else:
        if end - position > 4096:
            raise Unsure
        carry.pending.append(position)
        return
    bracket = carry.window_start + at
    if name == b'"graph"':
        carry.graph.append([bracket, first_close_to_top(brackets, depths, bracket)])
    elif carry.meta is None:
        carry.meta, carry.meta_start = [], bracket


def graph_open(carry: Carry) -> bool:
    """Whether the last `graph` value read has not closed yet."""
    return bool(carry.graph) and carry.graph[-1][1] < 0


def first_close_to_top(brackets: np.ndarray, depths: np.ndarray, after: int) -> int:
    """The position of the first bracket after `after` that brings the depth back to 1, or
    -1 if this chunk has none."""
    closing = brackets[(depths == 1) & (brackets > after)]
    return int(closing[0]) if len(closing) else -1


def follow_top_values(
    chunk: bytes, start: int, brackets: np.ndarray, depths: np.ndarray, carry: Carry
) -> None:
    """Keep the text of the `meta` value while it is read; close a `graph` value's span."""
    if graph_open(carry) and carry.graph[-1][0] < start:
        carry.graph[-1][1] = first_close_to_top(brackets, depths, carry.graph[-1][0])
    if carry.meta is None or carry.meta_done:
        return
    first = max(carry.meta_start, start)
    close = first_close_to_top(brackets, depths, carry.meta_start)
    last = close + 1 if close >= 0 else start + len(chunk)
    carry.meta.append(chunk[first - start : last - start])
    carry.meta_bytes += last - first
    if carry.meta_bytes > MAX_RECORD_BYTES:
        raise Unsure
    carry.meta_done = close >= 0
