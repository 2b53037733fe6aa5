"""The survey's fast pass (numpy over the bytes) against the exact one (parser events): where
the fast pass answers, the exact survey gives the same `meta`; where the exact survey refuses a
document for a limit, the fast pass hands it over. Limits and chunks are made tiny so that
every boundary case (a string, an escape run, a key or a record split across chunks) occurs."""

from __future__ import annotations

import io
import json
from typing import Any

import ijson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphsvc.ingest import survey as survey_module
from graphsvc.ingest.records import IngestError
from graphsvc.ingest.survey import Unsure, scan, survey, survey_source

TINY = {"MAX_DEPTH": 5, "MAX_VALUE_BYTES": 8, "MAX_RECORD_BYTES": 96}
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


def exact(text: bytes) -> tuple[str, Any]:
    try:
        return "meta", survey(io.BytesIO(text), "doc.json")
    except IngestError as exc:
        return "refused", str(exc)
    except ijson.JSONError:
        return "invalid", None


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
    expected = exact(text)
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


@settings(
    max_examples=400,
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
        byte = data.draw(st.sampled_from([b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":"]))
        check(text[:cut] + byte + text[cut + 1 :], monkeypatch)


def plain_at_top(document: Any) -> bool:
    """No escapes among the strings at depth 1 (keys and values), `meta` and `graph`
    containers: the documents the fast pass must answer itself."""
    top = [*document.keys(), *document.values()] if isinstance(document, dict) else document
    plain = all(json.dumps(v, ensure_ascii=False)[1:-1] == v for v in top if isinstance(v, str))
    named = [document.get(k, {}) for k in ("meta", "graph")] if isinstance(document, dict) else []
    return plain and all(isinstance(v, dict | list) for v in named)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
        survey_source(lambda: io.BytesIO(deep), "doc.json")
    with pytest.raises(Unsure):
        scan(io.BytesIO(deep))
