"""The first pass over a document: checks its shape is safe to build records from, and picks
up its `meta` object on the way.

Building records (ijson's items) costs memory with the square of the nesting depth, and
Python's recursion ends in a RecursionError: a 200 KB file nested 100,000 arrays deep grew
an ingest past 22 GB. This pass reads only parser events, so its memory stays flat whatever
the input, and refuses, before any record is built, a document nested deeper than any
collector writes, a value too large for any collector to write, or a record too large.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import IO, Any

import ijson
import numpy as np
from ijson.common import ObjectBuilder

from graphsvc.ingest.records import IngestError

# Real collector output nests 9 levels at most (SharpHound ADCS objects, OpenGraph
# properties); these limits leave room and are in the README.
MAX_DEPTH = 32
MAX_VALUE_BYTES = 1 << 20  # one string (a certificate, a description)
MAX_RECORD_BYTES = 16 << 20  # the text of one record: its keys and values


def survey(stream: IO[bytes], label: str) -> Any:
    """Check the whole document; returns its top-level `meta` value (None without one).

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

    # The hot loop of ingest's first pass (13 million events in 173 MB of SharpHound): the
    # common events are tested first, and everything kept for messages is updated only at
    # the shallow depths where it changes.
    for event, value in ijson.basic_parse(stream, use_float=True):
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
                    f"{element()}.{key}" if key else element(),
                )
        elif event == "start_map" or event == "start_array":
            depth += 1
            if depth > MAX_DEPTH:
                raise IngestError(label, f"nested deeper than {MAX_DEPTH} levels", element())
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
    return metas[0] if metas else None


# The fast pass reads this much at a time. Over the 1 GB benchmark's users and computers
# files: 1 MiB chunks 2.1 s and 11 MB of peak memory, 8 MiB chunks 2.9 s and 83 MB.
SCAN_CHUNK_BYTES = 1 << 20

# Byte classes of the fast pass: what moves the nesting depth or a string's bounds.
QUOTE, BACKSLASH, OPEN, CLOSE = 1, 2, 3, 4
# bytes.translate then a comparison: 16 ms per 8 MB, where numpy's lookup of each byte and
# nonzero() of its result took 31 ms.
CLASS_OF = {b'"': QUOTE, b"\\": BACKSLASH, b"{": OPEN, b"[": OPEN, b"}": CLOSE, b"]": CLOSE}
BYTE_CLASSES = bytes(CLASS_OF.get(bytes([b]), 0) for b in range(256))
WHITESPACE = b" \t\r\n"
TOP_KEYS = (b'"meta"', b'"graph"')  # the top-level keys the survey acts on
WINDOW_TAIL = 8192  # of the last chunk kept, for a key read across chunks
MAX_TOP_STRINGS = 1000  # strings at depth 1 one chunk may hold (a collector writes two)
MAX_LONG_REGIONS = 1000  # containers over the record bound (OpenGraph: its two arrays)


class Unsure(Exception):
    """The fast pass cannot vouch for the document: the exact survey decides."""


def survey_source(open_stream: Callable[[], AbstractContextManager[IO[bytes]]], label: str) -> Any:
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
            return scan(stream)
        except Unsure:
            pass
    with open_stream() as stream:
        return survey(stream, label)


class Carry:
    """What one chunk of the fast pass leaves to the next."""

    def __init__(self) -> None:
        self.offset = 0  # of the chunk in the document
        self.depth = 0
        self.in_string = False
        self.string_start = -1
        self.backslashes = 0  # the run of backslashes the last chunk ended with
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


def scan(stream: IO[bytes]) -> Any:
    """The fast pass: the document's `meta` value (None without one), or Unsure."""
    carry = Carry()
    while True:
        chunk = stream.read(SCAN_CHUNK_BYTES)
        if not chunk:
            break
        scan_chunk(chunk, carry)
    if carry.in_string or carry.depth or not carry.finished or carry.pending:
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


def scan_chunk(chunk: bytes, carry: Carry) -> None:
    start = carry.offset
    end = start + len(chunk)
    classes = np.frombuffer(chunk.translate(BYTE_CLASSES), dtype=np.uint8)
    where = np.flatnonzero(classes != 0)
    kinds = classes[where]
    positions = where + start  # of the bytes that matter, in order

    backslashes = positions[kinds == BACKSLASH]
    is_quote = kinds == QUOTE
    if len(backslashes) or carry.backslashes:
        escaped = escaped_positions(backslashes, carry, start, end)
        is_quote[np.searchsorted(positions, escaped)[np.isin(escaped, positions)]] = False
    quotes = positions[is_quote]

    # Quotes alternate opening and closing a string.
    was_in_string = carry.in_string
    strings = np.concatenate(([carry.string_start], quotes)) if was_in_string else quotes
    opens, closes = strings[0::2], strings[1::2]
    if len(closes) and int((closes - opens[: len(closes)]).max()) - 1 > MAX_VALUE_BYTES:
        raise Unsure
    carry.in_string = len(opens) > len(closes)
    if carry.in_string:
        carry.string_start = int(opens[-1])
        if end - carry.string_start > MAX_VALUE_BYTES:
            raise Unsure

    # Brackets outside strings move the depth.
    quotes_through = np.cumsum(is_quote, dtype=np.int32)
    indices = np.flatnonzero(kinds >= OPEN)
    indices = indices[(quotes_through[indices] + was_in_string) & 1 == 0]
    brackets = positions[indices]
    steps = (kinds[indices] == OPEN).astype(np.int32) * 2 - 1
    depths = np.cumsum(steps, dtype=np.int32) + carry.depth  # after each bracket
    depth_before = carry.depth
    if len(brackets):
        if carry.finished or int(depths.max()) > MAX_DEPTH or int(depths.min()) < 0:
            raise Unsure
        zeros = np.flatnonzero(depths == 0)
        if len(zeros):
            if zeros[0] != len(depths) - 1:
                raise Unsure  # a second top-level value
            carry.finished = True
        carry.depth = int(depths[-1])

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
    if depth_before == 1:
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
    follow_top_values(chunk, brackets, depths, carry)
    carry.offset = end


def escaped_positions(backslashes: np.ndarray, carry: Carry, start: int, end: int) -> np.ndarray:
    """The positions a run of an odd number of backslashes escapes."""
    carried = carry.backslashes
    if not len(backslashes):
        carry.backslashes = 0
        return np.array([start] if carried % 2 else [], dtype=np.int64)
    breaks = np.flatnonzero(np.diff(backslashes) != 1)
    firsts = np.concatenate(([0], breaks + 1))
    lasts = np.concatenate((breaks, [len(backslashes) - 1]))
    lengths = lasts - firsts + 1
    escaped = []
    if carried:
        if backslashes[0] == start:
            lengths[0] += carried
        elif carried % 2:
            escaped.append(start)
    ends = backslashes[lasts]
    carry.backslashes = 0
    if ends[-1] == end - 1:  # the run may go on in the next chunk
        carry.backslashes = int(lengths[-1])
        ends, lengths = ends[:-1], lengths[:-1]
    return np.concatenate((np.array(escaped, dtype=np.int64), ends[lengths % 2 == 1] + 1))


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


def follow_top_values(chunk: bytes, brackets: np.ndarray, depths: np.ndarray, carry: Carry) -> None:
    """Keep the text of the `meta` value while it is read; close a `graph` value's span."""
    start = carry.offset
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
