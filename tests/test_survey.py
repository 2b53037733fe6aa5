"""The survey's fast pass (numpy over the bytes) against the exact one (parser events): where
the fast pass answers, the exact survey gives the same `meta`; where the exact survey refuses a
document for a limit, the fast pass hands it over. Limits and chunks are made tiny so that
every boundary case (a string, an escape run, a key or a record split across chunks) occurs.
The lexer both passes read through is held to a plain reading of the same text."""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
from collections.abc import Generator
from typing import Any, TypeVar

import ijson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphsvc.ingest import lexer
from graphsvc.ingest import survey as survey_module
from graphsvc.ingest.records import IngestError
from graphsvc.ingest.survey import Unsure, survey_source

T = TypeVar("T")
TINY = {
    "MAX_DEPTH": 5,
    "MAX_VALUE_BYTES": 8,
    "MAX_RECORD_BYTES": 96,
    "MAX_BYTES_PER_CHARACTER": 2,  # a value's text bound, 16 bytes: strings of escapes pass it
    "MAX_KEY_BYTES": 5,
    "MAX_NUMBER_BYTES": 6,
}
KEYS = ["meta", "graph", "data", "nodes", "type", "a", 'q"x', "b\\", "é", "[{"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(alphabet='ab"\\{}[]é\n\x01 ', max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(KEYS), inner, max_size=4),
    ),
    max_leaves=30,
)
documents = st.one_of(st.dictionaries(st.sampled_from(KEYS), values, max_size=4), values)


def finish(steps: Generator[None, None, T]) -> T:
    """A pass run to its end (ingest gives the event loop a turn at each of its yields)."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result


def scan(stream: io.BytesIO) -> Any:
    return finish(survey_module.scan(stream))


def survey(stream: io.BytesIO, label: str) -> Any:
    return finish(survey_module.survey(stream, label))


def exact_in_pieces(text: bytes) -> tuple[str, Any]:
    try:
        return "meta", survey(io.BytesIO(text), "doc.json")
    except IngestError as exc:
        return "refused", str(exc)
    except ijson.JSONError:
        return "invalid", None


def exact(text: bytes, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Any]:
    """The exact survey's answer, the same whatever pieces the lexer hands its parser."""
    answers = []
    for read, piece in ((1, 1), (3, 2), (1 << 20, 5), (1 << 20, 1 << 16)):
        monkeypatch.setattr(lexer, "READ_BYTES", read)
        monkeypatch.setattr(lexer, "PIECE_BYTES", piece)
        answers.append(exact_in_pieces(text))
    assert all(same_json(a, answers[0]) for a in answers), (text, answers)
    return answers[0]


def records_pass(text: bytes) -> None:
    """The records' pass reads a document the fast pass vouched for without the lexer: it
    holds no token of more than MAX_VALUE_BYTES."""
    fast_bounds = lexer.TokenBounds(
        survey_module.MAX_VALUE_BYTES, survey_module.MAX_KEY_BYTES, survey_module.MAX_NUMBER_BYTES
    )
    for _ in lexer.bounded_pieces(io.BytesIO(text), fast_bounds):
        pass


def fast(text: bytes, chunk: int, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Any]:
    monkeypatch.setattr(survey_module, "SCAN_CHUNK_BYTES", chunk)
    try:
        return "meta", scan(io.BytesIO(text))
    except Unsure:
        return "unsure", None


def same_json(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (1 and 1.0 and True differ)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) and type(a) is type(b)


def check(text: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in TINY.items():
        monkeypatch.setattr(survey_module, name, value)
    expected = exact(text, monkeypatch)
    for chunk in (1, 2, 3, 7, 64, 1 << 20):
        got = fast(text, chunk, monkeypatch)
        if expected[0] == "refused":
            assert got[0] == "unsure", (text, chunk, expected)
        elif got[0] == "meta" and expected[0] == "meta":
            assert same_json(got[1], expected[1]), (text, chunk, got, expected)
        elif got[0] == "meta":
            # Not JSON, yet no limit was near: the record pass's parser refuses it.
            with pytest.raises(ijson.JSONError):
                list(ijson.items(io.BytesIO(text), ""))
        if got[0] == "meta":  # vouched for: no token past its bound reaches the records
            records_pass(text)


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(document=documents, indent=st.sampled_from([None, 0, 2]), data=st.data())
def test_the_fast_pass_agrees_with_the_exact_survey(
    document: Any, indent: int | None, data: st.DataObject, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = json.dumps(document, indent=indent, ensure_ascii=data.draw(st.booleans())).encode()
    check(text, monkeypatch)
    # Damaged: cut short, or a byte replaced by one that matters to the fast pass.
    if text:
        cut = data.draw(st.integers(0, len(text) - 1))
        check(text[:cut], monkeypatch)
        byte = data.draw(st.sampled_from([b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b"7"]))
        check(text[:cut] + byte + text[cut + 1 :], monkeypatch)


def plain_at_top(document: Any) -> bool:
    """No escapes among the strings at depth 1 (keys and values), `meta` and `graph`
    containers: the documents the fast pass must answer itself."""
    top = [*document.keys(), *document.values()] if isinstance(document, dict) else document
    plain = all(json.dumps(v, ensure_ascii=False)[1:-1] == v for v in top if isinstance(v, str))
    named = [document.get(k, {}) for k in ("meta", "graph")] if isinstance(document, dict) else []
    return plain and all(isinstance(v, dict | list) for v in named)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=st.one_of(st.dictionaries(st.sampled_from(KEYS), values), st.lists(values)))
def test_the_fast_pass_answers_well_formed_documents_within_the_limits(document: Any) -> None:
    """Completeness, the other half: the fast pass vouches for what it can, escapes and
    brackets inside strings included, in chunks of any size."""
    text = json.dumps(document, ensure_ascii=False).encode()
    expected = survey(io.BytesIO(text), "doc.json")
    default = survey_module.SCAN_CHUNK_BYTES
    for chunk in (1, 5, default):
        survey_module.SCAN_CHUNK_BYTES = chunk
        try:
            if plain_at_top(document):
                assert same_json(scan(io.BytesIO(text)), expected), (text, chunk)
        finally:
            survey_module.SCAN_CHUNK_BYTES = default


@pytest.mark.parametrize(
    "text",
    [
        b'{"data": [{"a": "b"}], "meta": {"type": "users", "count": 1}}',
        b'{"meta": {"type": "users", "x": [1, 2.5, true, null]}, "data": []}',
        b'{"meta": 1, "data": []}',
        b'{"meta": "users"}',
        b'{"me\\u0074a": {"type": "users"}}',
        b'{"data": [], "meta": {"type": "users"}, "meta": {"type": "groups"}}',
        b'{"graph": {"nodes": [{"id": "A", "kinds": ["K"]}], "edges": []}}',
        b'{"x": "\\\\\\"{", "meta": {"t": "\\\\"}}',
        b'{"meta" : \n {"type": "users"}  }',
        b'["meta", {"meta": {}}]',
        b'{"meta": {"v": NaN}}',
        b"{} {}",
        b"",
        b'{"meta": {"type": "users"}',
    ],
)
def test_chosen_documents(text: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    check(text, monkeypatch)


def test_a_collector_file_is_vouched_for_by_the_fast_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast pass answers real-shaped files itself, records of a few KB split anywhere."""
    record = {"ObjectIdentifier": "S-1-5-21-1-2-3-1001", "Aces": [{"RightName": "GenericAll"}]}
    text = json.dumps({"data": [record] * 50, "meta": {"type": "users", "version": 6}}).encode()
    monkeypatch.setattr(survey_module, "SCAN_CHUNK_BYTES", 100)
    assert scan(io.BytesIO(text)) == {"type": "users", "version": 6}


def test_an_opengraph_file_is_vouched_for_by_its_records_not_its_arrays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Inside `graph` the records are one level deeper: its arrays may be far larger than a
    record may be."""
    for name, value in TINY.items():
        monkeypatch.setattr(survey_module, name, value)
    nodes = [{"id": str(i)} for i in range(40)]
    text = json.dumps({"graph": {"nodes": nodes, "edges": []}}).encode()
    assert survey(io.BytesIO(text), "og.json") is None
    monkeypatch.setattr(survey_module, "SCAN_CHUNK_BYTES", 16)
    assert scan(io.BytesIO(text)) is None


def test_survey_source_hands_an_unsure_document_to_the_exact_survey() -> None:
    deep = b'{"data": [' + b"[" * 40 + b"]" * 40 + b'], "meta": {"type": "users"}}'
    with pytest.raises(IngestError, match=r"doc\.json: data\[0\]: nested deeper than 32"):
        asyncio.run(survey_source(lambda: io.BytesIO(deep), "doc.json"))
    with pytest.raises(Unsure):
        scan(io.BytesIO(deep))


# --- the lexer between the document and its parser ------------------------------------------

LONG_KEYS = [*KEYS, "abcdefgh", "a" * 30]
long_scalars = st.one_of(
    scalars,
    st.text(alphabet='ab"\\é\U0001f600 ', max_size=40),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False, allow_infinity=False),
)
long_values = st.recursive(
    long_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(LONG_KEYS), inner, max_size=4),
    ),
    max_leaves=30,
)
WHITESPACE = (b" ", b"\t", b"\r", b"\n")


def tokens_of(text: bytes) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each string (quotes included), key, and number or literal of
    valid JSON, read byte by byte: a key is a string followed by a colon."""
    found = []
    i = 0
    while i < len(text):
        byte = text[i : i + 1]
        if byte == b'"':
            j = i + 1
            while text[j : j + 1] != b'"':
                j += 2 if text[j : j + 1] == b"\\" else 1
            k = j + 1
            while text[k : k + 1] in WHITESPACE:
                k += 1
            found.append((i, j + 1, "key" if text[k : k + 1] == b":" else "string"))
            i = j + 1
        elif byte in b"-0123456789tfn":
            j = i
            while j < len(text) and text[j : j + 1] not in b" \t\r\n,:]}":
                j += 1
            found.append((i, j, "number"))
            i = j
        else:
            i += 1
    return found


@settings(max_examples=300, deadline=None)
@given(
    document=long_values,
    indent=st.sampled_from([None, 0, 3]),
    ascii_only=st.booleans(),
    bounds=st.tuples(st.integers(2, 40), st.integers(2, 12), st.integers(2, 12)),
)
def test_the_lexer_refuses_the_first_token_past_its_bound_and_cuts_only_between_tokens(
    document: Any, indent: int | None, ascii_only: bool, bounds: tuple[int, int, int]
) -> None:
    """Against a plain reading of the same text: the pieces are the document (or all of it
    before the first token past its bound, which is refused by its kind and place), and no
    piece ends inside a token, whatever the size of the reads."""
    text = json.dumps(document, indent=indent, ensure_ascii=ascii_only).encode()
    limits = lexer.TokenBounds(*bounds)
    bound_of = {"string": limits.string, "key": limits.key, "number": limits.number}
    tokens = tokens_of(text)
    too_long = [
        (start, kind)
        for start, end, kind in tokens
        if end - start - (0 if kind == "number" else 2) > bound_of[kind]
    ]
    defaults = lexer.READ_BYTES, lexer.PIECE_BYTES
    for read, piece in ((1, 1), (2, 1), (5, 2), (16, 3), (1 << 20, 7), (1 << 20, 1 << 16)):
        lexer.READ_BYTES, lexer.PIECE_BYTES = read, piece
        pieces: list[bytes] = []
        try:
            with pytest.raises(lexer.TokenTooLong) if too_long else contextlib.nullcontext():
                pieces.extend(lexer.bounded_pieces(io.BytesIO(text), limits))
        finally:
            lexer.READ_BYTES, lexer.PIECE_BYTES = defaults
        refused = too_long[0] if too_long else None
        given = b"".join(pieces)
        assert given == (text[: refused[0]] if refused else text), (text, read, piece)
        assert all(pieces), "an empty piece ends the text for ijson's coroutines"
        cuts = itertools.accumulate(len(p) for p in pieces)
        assert not [(c, t) for c in cuts for t in tokens if t[0] < c < t[1]], (text, read, piece)


def test_the_lexer_names_the_token_it_refuses() -> None:
    limits = lexer.TokenBounds(string=8, key=3, number=4)

    def refused(text: bytes) -> tuple[str, int]:
        with pytest.raises(lexer.TokenTooLong) as caught:
            list(lexer.bounded_pieces(io.BytesIO(text), limits))
        return caught.value.kind, caught.value.start

    assert refused(b'{"a": "123456789"}') == ("string", 6)
    assert refused(b'{"a": 1, "abcd": 1}') == ("key", 9)
    assert refused(b'[{"a": 1}, "abcd", {"x": [1], "abcd": 2}]') == ("key", 30)
    assert refused(b'{"a": [12345]}') == ("number", 7)
    assert refused(b'{"a": [1, 2, truee]}') == ("number", 13)
