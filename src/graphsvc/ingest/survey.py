"""The first pass over a document: checks its shape is safe to build records from, and picks
up its `meta` object on the way.

Building records (ijson's items) costs memory with the square of the nesting depth, and
Python's recursion ends in a RecursionError: a 200 KB file nested 100,000 arrays deep grew
an ingest past 22 GB. This pass reads only parser events, so its memory stays flat whatever
the input, and refuses, before any record is built, a document nested deeper than any
collector writes, a value too large for any collector to write, or a record too large.
"""

from __future__ import annotations

from typing import IO, Any

import ijson
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
