"""The bytes between a document and its JSON parser: every token's raw text bounded, and the
document handed to the parser in pieces that end between tokens.

yajl (ijson's parser) lexes a token that spans the buffers it is given again from its start
at every buffer, and ijson hands it 64 KiB at a time: parsing a string of 128 MiB took 36 s,
one of 8 MiB of `\\u0041` escapes 5.6 s (128 MiB of them 787 s), a number of 8 MiB of
digits 4.1 s, all with the interpreter lock held, and a limit checked on the parser's events
saw the value only once it had been built. Here numpy classifies the bytes, as the
survey's fast pass does, so that each string, key and number (or literal) is measured as
its bytes arrive, and the first one past its bound raises TokenTooLong before the parser
has been given any of it. Given whole, a token is lexed once: 12 MiB of escapes in one
piece took 35 ms.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import ijson
import numpy as np
from ijson.utils import sendable_list

# Byte classes: what moves the nesting depth or a string's bounds.
QUOTE, BACKSLASH, OPEN_ARRAY, OPEN_OBJECT, CLOSE = 1, 2, 3, 4, 5
CLASS_OF = {
    b'"': QUOTE,
    b"\\": BACKSLASH,
    b"[": OPEN_ARRAY,
    b"{": OPEN_OBJECT,
    b"]": CLOSE,
    b"}": CLOSE,
}
BYTE_CLASSES = bytes(CLASS_OF.get(bytes([b]), 0) for b in range(256))
WHITESPACE = b" \t\r\n"
# Outside strings, what ends a number or a literal besides quotes and brackets: 1, else 0.
DELIMITER_MARKS = bytes(1 if bytes([b]) in b" \t\r\n,:" else 0 for b in range(256))

READ_BYTES = 1 << 20  # read at a time, as the fast pass reads (see survey.SCAN_CHUNK_BYTES)
# Given to the parser at a time, where a string or a bracket ends near it. The parser's
# events of a piece wait in a list: on the 34 MB users file of the benchmark's 50 MB
# collection, 64 KiB pieces took 0.23 s to turn into events, 1 MiB pieces 0.29 s (records:
# 0.20 s and 0.22 s).
PIECE_BYTES = 64 << 10


@dataclass(frozen=True)
class TokenBounds:
    """The most raw text (bytes, quotes not counted) each kind of token may have."""

    string: int  # a string value
    key: int  # an object's key
    number: int  # a number, or a literal (true, false, null)


class TokenTooLong(Exception):
    """A token past its bound; `start` is the offset of its first byte in the document."""

    def __init__(self, kind: str, start: int, bound: int) -> None:
        self.kind = kind  # "string", "key" or "number"
        self.start = start
        self.bound = bound
        what = {"string": "a value", "key": "a key", "number": "a number or literal"}[kind]
        super().__init__(f"{what} of more than {bound:,} bytes of JSON text")


@dataclass
class Lexed:
    """One chunk's bytes that matter, in order, for the survey's fast pass."""

    start: int  # the chunk's offset in the document
    end: int
    positions: np.ndarray  # of the quotes, backslashes and brackets
    quotes: np.ndarray  # positions of those that open or close a string
    backslashes: np.ndarray  # positions
    was_in_string: bool  # the chunk began inside a string
    opens: np.ndarray  # of the strings ending or under way in the chunk (the first may
    closes: np.ndarray  # have opened in an earlier one)
    brackets: np.ndarray  # positions, outside strings
    steps: np.ndarray  # +1 opens, -1 closes
    depths: np.ndarray  # after each bracket
    depth_before: int


class Lexer:
    """Measures the tokens of a document fed to it chunk by chunk, carrying what a chunk
    leaves unfinished (a string, a backslash run, a number, the open containers)."""

    def __init__(self, bounds: TokenBounds) -> None:
        self.bounds = bounds
        self.offset = 0  # of the next chunk
        self.in_string = False
        self.string_start = -1  # the opening quote of the string under way
        self.string_is_key = False
        self.backslashes = 0  # the run of backslashes the last chunk ended with
        self.depth = 0
        self.stack = bytearray()  # the open containers' classes, outermost first
        self.last_byte = 0  # the last byte outside strings that is not whitespace
        self.run_start = -1  # of the number or literal the last chunk ended in
        self.cut = 0  # everything before it is whole tokens
        self.cuts: list[int] = []  # places to cut between the last chunk's `cut` and this one

    def feed(self, chunk: bytes) -> Lexed:
        """Measure one chunk; raises TokenTooLong at the first token past its bound."""
        start, end = self.offset, self.offset + len(chunk)
        classes = np.frombuffer(chunk.translate(BYTE_CLASSES), dtype=np.uint8)
        where = np.flatnonzero(classes != 0)  # nonzero() of a bool array: a third the time
        kinds = classes[where]
        positions = where + start

        # Collector output has few backslashes (none in the benchmark's users): memchr
        # spares a pass over the classes.
        backslashes = positions[kinds == BACKSLASH] if b"\\" in chunk else positions[:0]
        is_quote = kinds == QUOTE
        if len(backslashes) or self.backslashes:
            escaped, self.backslashes = escaped_positions(backslashes, self.backslashes, start, end)
            is_quote[np.searchsorted(positions, escaped)[np.isin(escaped, positions)]] = False
        quotes = positions[is_quote]

        # Quotes alternate opening and closing a string.
        was_in_string = self.in_string
        strings = np.concatenate(([self.string_start], quotes)) if was_in_string else quotes
        opens, closes = strings[0::2], strings[1::2]
        in_string = len(opens) > len(closes)

        # Brackets outside strings move the depth: those after an even number of quotes
        # (counting the one open when the chunk began).
        quotes_through = np.cumsum(is_quote, dtype=np.int32) + was_in_string
        indices = np.flatnonzero(kinds >= OPEN_ARRAY)
        indices = indices[quotes_through[indices] & 1 == 0]
        brackets = positions[indices]
        bracket_kinds = kinds[indices]
        steps = (bracket_kinds != CLOSE).astype(np.int32) * 2 - 1
        depths = np.cumsum(steps, dtype=np.int32) + self.depth
        lexed = Lexed(
            start,
            end,
            positions,
            quotes,
            backslashes,
            was_in_string,
            opens,
            closes,
            brackets,
            steps,
            depths,
            self.depth,
        )
        context = Context(self, chunk, lexed, bracket_kinds)
        found: list[TokenTooLong] = []
        self.measure_strings(context, in_string, found)
        run_start = self.measure_numbers(context, quotes_through, in_string, found)
        if found:
            raise min(found, key=lambda long: long.start)

        self.in_string = in_string
        previous = self.cut
        if in_string:
            self.string_start = int(opens[-1])
            self.cut = self.string_start
        else:
            self.last_byte = context.byte_before(end)
            self.cut = run_start if run_start >= 0 else end
        self.cuts = cuts_between(previous, self.cut, closes, brackets)
        self.run_start = run_start
        self.follow_containers(brackets, bracket_kinds, steps, depths)
        self.offset = end
        return lexed

    def measure_strings(self, context: Context, in_string: bool, found: list[TokenTooLong]) -> None:
        """The strings that end in this chunk, and the one under way at its end."""
        bounds, lexed = self.bounds, context.lexed
        opens, closes = lexed.opens, lexed.closes
        lengths = closes - opens[: len(closes)] - 1
        for i in np.flatnonzero(lengths > min(bounds.key, bounds.string)):
            begun_before = lexed.was_in_string and i == 0
            key = self.string_is_key if begun_before else context.is_key(int(opens[i]))
            bound = bounds.key if key else bounds.string
            if lengths[i] > bound:
                found.append(TokenTooLong("key" if key else "string", int(opens[i]), bound))
        if in_string:
            open_quote = int(opens[-1])
            if not (lexed.was_in_string and len(closes) == 0):
                self.string_is_key = context.is_key(open_quote)
            bound = bounds.key if self.string_is_key else bounds.string
            if lexed.end - open_quote - 1 > bound:
                kind = "key" if self.string_is_key else "string"
                found.append(TokenTooLong(kind, open_quote, bound))

    def measure_numbers(
        self,
        context: Context,
        quotes_through: np.ndarray,
        in_string: bool,
        found: list[TokenTooLong],
    ) -> int:
        """The numbers and literals of the chunk; where the one it ends in began (-1:
        none). They lie outside strings, between the quotes and brackets: between two of
        the chunk's bytes that matter, after one that leaves the text outside a string."""
        lexed = context.lexed
        positions, start, end = lexed.positions, lexed.start, lexed.end
        if not lexed.was_in_string:  # from the chunk's start to its first byte that matters
            first = int(positions[0]) if len(positions) else end
            run = context.gap(start, first, self.run_start, first < end, found)
            if not len(positions):
                return run
        # Only a gap wider than a number's bound can hold a number past it.
        wide = np.flatnonzero(np.diff(positions) > self.bounds.number + 1)
        for i in wide[quotes_through[wide] & 1 == 0]:
            context.gap(int(positions[i]) + 1, int(positions[i + 1]), -1, True, found)
        if in_string or not len(positions):
            return -1
        return context.gap(int(positions[-1]) + 1, end, -1, False, found)

    def follow_containers(
        self, brackets: np.ndarray, kinds: np.ndarray, steps: np.ndarray, depths: np.ndarray
    ) -> None:
        """The containers open once the chunk ends: those of before that it did not
        close, then its own that no later bracket closes."""
        if not len(brackets):
            return
        low = max(min(self.depth, int(depths.min())), 0)
        lowest_after = np.minimum.accumulate(depths[::-1])[::-1]
        still_open = (steps == 1) & (lowest_after >= depths)
        self.stack = self.stack[:low] + kinds[still_open].tobytes()
        self.depth = int(depths[-1])


class Context:
    """One chunk as it is measured."""

    def __init__(self, lexer: Lexer, chunk: bytes, lexed: Lexed, bracket_kinds: np.ndarray) -> None:
        self.lexer = lexer
        self.chunk = chunk
        self.lexed = lexed
        self.bracket_kinds = bracket_kinds

    def byte_before(self, position: int) -> int:
        """The last byte before `position` (outside a string, so that the byte that matters
        before it is outside too) that is not whitespace; 0 if the document has none."""
        start, positions = self.lexed.start, self.lexed.positions
        k = int(np.searchsorted(positions, position))
        low = int(positions[k - 1]) + 1 if k else start
        text = self.chunk[low - start : position - start].rstrip(WHITESPACE)
        if text:
            return text[-1]
        return self.chunk[low - 1 - start] if k else self.lexer.last_byte

    def is_key(self, open_quote: int) -> bool:
        """Whether the string opening at `open_quote` is an object's key: it follows `{`,
        or a `,` inside an object."""
        before = self.byte_before(open_quote)
        if before == ord("{"):
            return True
        if before != ord(","):
            return False
        lexed = self.lexed
        j = int(np.searchsorted(lexed.brackets, open_quote))
        depth = int(lexed.depths[j - 1]) if j else lexed.depth_before
        # The container is the last one opened at that depth before the string, in this
        # chunk or, failing that, in an earlier one.
        opened = np.flatnonzero((lexed.steps[:j] == 1) & (lexed.depths[:j] == depth))
        if len(opened):
            return bool(self.bracket_kinds[opened[-1]] == OPEN_OBJECT)
        stack = self.lexer.stack
        return 0 < depth <= len(stack) and stack[depth - 1] == OPEN_OBJECT

    def gap(
        self, low: int, high: int, run_start: int, closed: bool, found: list[TokenTooLong]
    ) -> int:
        """Measure the numbers and literals in the chunk's bytes from `low` to `high`, text
        outside strings, quotes and brackets; `run_start` is where one under way at `low`
        began (-1: none), `closed` whether a quote or bracket ends the gap at `high`. Where
        the one under way at `high` began (-1: none, or `closed`)."""
        bound, start = self.lexer.bounds.number, self.lexed.start
        marks = self.chunk[low - start : high - start].translate(DELIMITER_MARKS)
        first = marks.find(1)
        if first < 0:  # no delimiter: one run throughout, if any
            begun = run_start if run_start >= 0 else (low if high > low else -1)
            if begun >= 0 and high - begun > bound:
                found.append(TokenTooLong("number", begun, bound))
            return -1 if closed else begun
        begun = run_start if run_start >= 0 else low
        if low + first - begun > bound:
            found.append(TokenTooLong("number", begun, bound))
        if high - low > bound:
            offsets = np.flatnonzero(np.frombuffer(marks, dtype=np.uint8))
            over = np.flatnonzero(np.diff(offsets) - 1 > bound)
            if len(over):
                found.append(TokenTooLong("number", low + int(offsets[over[0]]) + 1, bound))
        begun = low + marks.rfind(1) + 1
        if begun == high:
            return -1
        if high - begun > bound:
            found.append(TokenTooLong("number", begun, bound))
        return -1 if closed else begun


def cuts_between(low: int, high: int, closes: np.ndarray, brackets: np.ndarray) -> list[int]:
    """Places between `low` and `high`, about PIECE_BYTES apart, where the text may be cut:
    after a string's closing quote or a bracket."""
    targets = np.arange(low + PIECE_BYTES, high, PIECE_BYTES)
    if not len(targets):
        return []
    found = np.full(len(targets), -1, dtype=np.int64)
    for ends in (closes + 1, brackets + 1):
        if len(ends):
            before = np.searchsorted(ends, targets, side="right") - 1
            found = np.maximum(found, np.where(before >= 0, ends[np.maximum(before, 0)], -1))
    return sorted({int(cut) for cut in found if low < cut < high})


def escaped_positions(
    backslashes: np.ndarray, carried: int, start: int, end: int
) -> tuple[np.ndarray, int]:
    """The positions a run of an odd number of backslashes escapes, and the length of the
    run the chunk ends with (which may go on in the next); `carried` is the last chunk's."""
    if not len(backslashes):
        return np.array([start] if carried % 2 else [], dtype=np.int64), 0
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
    run = 0
    if ends[-1] == end - 1:
        run = int(lengths[-1])
        ends, lengths = ends[:-1], lengths[:-1]
    return np.concatenate((np.array(escaped, dtype=np.int64), ends[lengths % 2 == 1] + 1)), run


def bounded_pieces(stream: IO[bytes], bounds: TokenBounds) -> Iterator[bytes]:
    """The stream's bytes in pieces that end between tokens; raises TokenTooLong once the
    pieces before the token past its bound have been taken."""
    lexer = Lexer(bounds)
    held: list[bytes] = []  # read, not yet given: they begin at `given`
    given = 0
    while chunk := stream.read(READ_BYTES):
        held.append(chunk)
        try:
            lexer.feed(chunk)
        except TokenTooLong as long:
            if long.start > given:
                yield b"".join(held)[: long.start - given]
            raise
        if lexer.cut > given:
            text, base = b"".join(held), given
            for cut in (*lexer.cuts, lexer.cut):
                yield text[given - base : cut - base]
                given = cut
            held = [text[given - base :]]
    rest = b"".join(held)
    if rest:
        yield rest


class PieceReader:
    """Pieces of a document for ijson's asynchronous parsers (items_async), whose C code
    builds records as fast as its generators do (0.19 s for the 34 MB users file of the
    benchmark's 50 MB collection, as ijson.items; items_coro took 0.52 s), and asks for each
    piece with an await: the event loop gets a turn there, and a stop lands there."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self.pieces = pieces

    async def read(self, size: int = -1) -> bytes:
        await asyncio.sleep(0)
        return next(self.pieces, b"") if size else b""


def parse_events(stream: IO[bytes], bounds: TokenBounds) -> Iterator[list[tuple[str, Any]]]:
    """The parser's events (ijson's basic_parse) of each piece of the stream, as a list
    emptied once the next is asked for. A parse error comes after the list of the events
    before it, as ijson's generators order them."""
    events = sendable_list()
    parser = ijson.basic_parse_coro(events, use_float=True)
    # An empty piece is the end of the text to ijson's coroutines.
    for piece in itertools.chain(bounded_pieces(stream, bounds), [b""]):
        try:
            parser.send(piece)
        except StopIteration:  # the end, taken
            pass
        except ijson.JSONError:
            yield events
            raise
        yield events
        del events[:]
