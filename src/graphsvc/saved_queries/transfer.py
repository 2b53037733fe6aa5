"""Saved queries in and out of the server as files.

Out: one query as the reference exports it, `{"name", "query", "description"}`; several as a
zip of such files, one a query (the reference's), or as one JSON list of them.

In, as JSON or a zip whose every file is JSON (`__MACOSX/` and hidden files skipped), each
document one of:
- one query, `{"name", "query", "description"}` (the reference's export);
- a list of queries: graphsvc's JSON export, or the community query library's bundle
  (`Queries.json`: objects with `name`, `guid`, `category`, `description`, `query`...);
- the legacy BloodHound `customqueries.json`, `{"queries": [{"name", "category",
  "queryList": [{"final", "query", "props"}]}]}`: an entry of one step is its query, with
  the step's `props` written into it as literals (a saved query has no parameters); an
  entry of several steps feeds each step's pick to the next, which one saved query cannot
  hold, so it is refused.
Each entry is checked on its own: a malformed one is refused with its name and why, and the
others are kept.
"""

from __future__ import annotations

import io
import json
import math
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from graphsvc import wire

NAME_MAX = 500  # characters
QUERY_MAX = 100_000
DESCRIPTION_MAX = 10_000
ZIP_ENTRIES_MAX = 10_000  # files in an imported zip
# Queries one import takes: 100,000 took 19 s to store on SQLite, holding the store's one
# write lock meanwhile (every other write waited, then got a 503).
IMPORT_ENTRIES_MAX = 10_000
LITERAL_DEPTH_MAX = 32  # lists within lists in a legacy query's props
ENTRY_BYTES_MAX = 4 * 1024 * 1024  # one file of it, uncompressed
ZIP_BYTES_MAX = 64 * 1024 * 1024  # all of them, uncompressed
FORMATS = ("json", "zip")
PARAMETER = re.compile(
    r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`[^`]*`|\$(\w+)|\{(\w+)\}""", re.DOTALL
)


@dataclass(frozen=True)
class Candidate:
    """An entry read from an import, valid on its own (its name may still be taken)."""

    source: str
    name: str
    query: str
    description: str


@dataclass(frozen=True)
class Refused:
    source: str
    name: str
    reason: str


class ImportUnreadable(Exception):
    """The body as a whole cannot be read (not a zip, too large): nothing is imported."""


def file_name(name: str, taken: set[str]) -> str:
    """A file name for a query's name: path separators and control characters replaced, at
    most 120 characters, `.json`, and a number before it when another file has it."""
    base = re.sub(r"[\x00-\x1f\x7f/\\:*?\"<>|]", "_", name).strip(" .") or "query"
    base = base[:120]
    candidate, n = f"{base}.json", 1
    while candidate.lower() in taken:
        n += 1
        candidate = f"{base} ({n}).json"
    taken.add(candidate.lower())
    return candidate


def json_of(value: wire.TransferableQuery | list[wire.TransferableQuery]) -> bytes:
    """A query, or a list of them, as a JSON file (indented: people read and edit them)."""
    return msgspec.json.format(msgspec.json.encode(value), indent=2)


def zip_of(queries: list[wire.TransferableQuery]) -> bytes:
    """A zip with one file a query (the reference's export of several)."""
    out = io.BytesIO()
    taken: set[str] = set()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for query in queries:
            archive.writestr(file_name(query.name, taken), json_of(query))
    return out.getvalue()


def read_import(body: bytes, is_zip: bool) -> list[Candidate | Refused]:
    """Every entry of an imported body, in order, each read or refused."""
    if not is_zip:
        found = list(read_document(body, "body"))
    else:
        found = []
        for name, data in zip_entries(body):
            if isinstance(data, Refused):
                found.append(data)
            else:
                found.extend(read_document(data, name))
    if len(found) > IMPORT_ENTRIES_MAX:
        raise ImportUnreadable(
            f"the body holds {len(found)} entries; at most {IMPORT_ENTRIES_MAX} are imported "
            "at once: split it"
        )
    return found


def zip_entries(body: bytes) -> Iterator[tuple[str, bytes | Refused]]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(body))
    except (zipfile.BadZipFile, ValueError) as exc:
        raise ImportUnreadable(f"the body is not a zip archive ({exc})") from None
    with archive:
        entries = [
            e
            for e in archive.infolist()
            if not e.is_dir()
            and not e.filename.startswith("__MACOSX/")
            and not e.filename.rsplit("/", 1)[-1].startswith(".")
        ]
        if len(entries) > ZIP_ENTRIES_MAX:
            raise ImportUnreadable(
                f"the zip holds {len(entries)} files; at most {ZIP_ENTRIES_MAX} are imported "
                "at once"
            )
        total = 0
        for entry in entries:
            if entry.file_size > ENTRY_BYTES_MAX:
                reason = f"{entry.file_size} bytes uncompressed; at most {ENTRY_BYTES_MAX}"
                yield entry.filename, Refused(entry.filename, "", reason)
                continue
            try:
                with archive.open(entry) as opened:
                    # Read no more than the limit, whatever the entry's header claims.
                    data = opened.read(ENTRY_BYTES_MAX + 1)
            except (zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError) as exc:
                yield entry.filename, Refused(entry.filename, "", f"unreadable: {exc}")
                continue
            if len(data) > ENTRY_BYTES_MAX:
                reason = f"more than {ENTRY_BYTES_MAX} bytes uncompressed"
                yield entry.filename, Refused(entry.filename, "", reason)
                continue
            total += len(data)
            if total > ZIP_BYTES_MAX:
                raise ImportUnreadable(
                    f"the zip's files hold more than {ZIP_BYTES_MAX} bytes uncompressed"
                )
            yield entry.filename, data


def read_document(data: bytes, source: str) -> Iterator[Candidate | Refused]:
    try:
        document = json.loads(data.decode("utf-8-sig"), parse_constant=refuse_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        yield Refused(source, "", f"not JSON: {exc}")
        return
    except RecursionError:
        yield Refused(source, "", "not JSON this server reads: nested too deeply")
        return
    if isinstance(document, dict) and "queries" in document and "query" not in document:
        entries = document["queries"]
        if not isinstance(entries, list):
            yield Refused(source, "", "`queries` is not a list (a legacy customqueries.json)")
            return
        for n, entry in enumerate(entries, 1):
            yield read_legacy_entry(entry, f"{source} #{n}")
    elif isinstance(document, dict):
        yield read_entry(document, source)
    elif isinstance(document, list):
        for n, entry in enumerate(document, 1):
            place = f"{source} #{n}"
            if isinstance(entry, dict) and "queryList" in entry:
                yield read_legacy_entry(entry, place)
            else:
                yield read_entry(entry, place)
    else:
        yield Refused(
            source,
            "",
            "not a saved query ({name, query, description}), a list of them, a query "
            "library bundle or a legacy customqueries.json ({queries: [...]})",
        )


def refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def read_entry(entry: Any, source: str) -> Candidate | Refused:
    """A saved query or a query library entry."""
    if not isinstance(entry, dict):
        return Refused(source, "", "not an object with a name and a query")
    name = entry.get("name")
    shown = shown_name(name)
    description = entry.get("description")
    if description is None:
        description = ""
    if not isinstance(description, str):
        return Refused(source, shown, "`description` is not text")
    return checked(source, name, entry.get("query"), description)


def read_legacy_entry(entry: Any, source: str) -> Candidate | Refused:
    """An entry of a legacy customqueries.json."""
    if not isinstance(entry, dict):
        return Refused(source, "", "not an object with a name and a queryList")
    name = entry.get("name")
    shown = shown_name(name)
    steps = entry.get("queryList")
    if not isinstance(steps, list) or not steps:
        return Refused(source, shown, "`queryList` is not a list of steps")
    if len(steps) > 1:
        return Refused(
            source,
            shown,
            f"a query of {len(steps)} steps, each taking the pick of the one before; a saved "
            "query is one query: save its steps one by one",
        )
    step = steps[0]
    if not isinstance(step, dict) or not isinstance(step.get("query"), str):
        return Refused(source, shown, "its step has no query text")
    props = step.get("props") or {}
    if not isinstance(props, dict):
        return Refused(source, shown, "its step's `props` is not an object")
    try:
        query = with_literals(step["query"], props)
    except ValueError as exc:
        return Refused(source, shown, str(exc))
    category = entry.get("category")
    description = category if isinstance(category, str) else ""
    return checked(source, name, query, description)


def shown_name(name: Any) -> str:
    """An entry's name as a refusal shows it: a lone surrogate (JSON's `\\ud800` escapes can
    make one, which no answer can carry) written as its escape."""
    if not isinstance(name, str):
        return ""
    return name.strip().encode("utf-8", "backslashreplace").decode()


def checked(source: str, name: Any, query: Any, description: str) -> Candidate | Refused:
    shown = shown_name(name)
    if not shown:
        return Refused(source, "", "no `name` (text, not empty)")
    for field, value in (("name", name), ("query", query), ("description", description)):
        if isinstance(value, str) and not is_unicode_text(value):
            return Refused(source, shown, f"its {field} holds a lone surrogate (\\ud800...)")
    if len(shown) > NAME_MAX:
        return Refused(source, shown[:80], f"a name of {len(shown)} characters; at most {NAME_MAX}")
    if not isinstance(query, str) or not query.strip():
        return Refused(source, shown, "no `query` (text, not empty)")
    if len(query) > QUERY_MAX:
        return Refused(source, shown, f"a query of {len(query)} characters; at most {QUERY_MAX}")
    if len(description) > DESCRIPTION_MAX:
        reason = f"a description of {len(description)} characters; at most {DESCRIPTION_MAX}"
        return Refused(source, shown, reason)
    return Candidate(source, name.strip(), query, description)


def is_unicode_text(value: str) -> bool:
    """Whether the text has no lone surrogate (JSON's `\\ud800` escapes can make one), which
    no store can keep."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def with_literals(query: str, props: dict[str, Any]) -> str:
    """The query with each parameter `props` gives (`$name`, or the older `{name}`) written
    as a Cypher literal; text in quotes is left alone. A parameter it uses and `props` does
    not give stays a parameter."""

    def literal(match: re.Match[str]) -> str:
        key = match.group(1) or match.group(2)
        if key is None or key not in props:
            return match.group(0)
        return cypher_literal(props[key], key)

    return PARAMETER.sub(literal, query)


def cypher_literal(value: Any, key: str, depth: int = 0) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, list) and depth < LITERAL_DEPTH_MAX:
        return "[" + ", ".join(cypher_literal(v, key, depth + 1) for v in value) + "]"
    if isinstance(value, list):
        raise ValueError(f"its parameter {key!r} nests lists more than {LITERAL_DEPTH_MAX} deep")
    raise ValueError(f"its parameter {key!r} is neither text, a number, a boolean nor a list")
