"""Ingest zips of many tiny documents, to show that ingest time grows linearly with their count.

    python bench/zip_entries.py [--counts 2500 5000 10000 20000] [--smoke]

Each zip holds N documents of one object each, deflated as collectors write them: SharpHound
users files and OpenGraph files, alternately. Each N is ingested into a fresh SQLite store
with `ingest_files`, the path of `graphsvc ingest` and of upload jobs, in this process; the
time covers the whole run (listing the zip, the passes over every entry, the writes and the
run's statistics). Linear growth shows as a flat time per document down the table.

Results are printed and written to bench/results/zip-entries.json. --smoke (CI) ingests 200
and 400 documents in a couple of seconds, to prove the harness works; it asserts nothing
about speed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graphsvc.ingest.run import ingest_files
from graphsvc.store.db import run_in_transaction
from graphsvc.store.migrate import upgrade_schema

HERE = Path(__file__).resolve().parent
DOMAIN_SID = "S-1-5-21-700-700-700"


def sharphound_document(i: int) -> dict[str, Any]:
    user = {
        "ObjectIdentifier": f"{DOMAIN_SID}-{100_000 + i}",
        "Properties": {"name": f"USER{i}@ZIP.LOCAL", "domainsid": DOMAIN_SID},
    }
    return {"data": [user], "meta": {"type": "users", "count": 1, "version": 6, "methods": 0}}


def opengraph_document(i: int) -> dict[str, Any]:
    node = {"id": f"THING-{i}", "kinds": ["Thing"], "properties": {"name": f"thing {i}"}}
    return {"metadata": {"source_kind": "Bench"}, "graph": {"nodes": [node]}}


def write_zip(path: Path, documents: int) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for i in range(documents):
            if i % 2:
                archive.writestr(f"og/{i:06d}_thing.json", json.dumps(opengraph_document(i)))
            else:
                archive.writestr(f"ad/{i:06d}_users.json", json.dumps(sharphound_document(i)))


def measure(work: Path, template: Path, documents: int) -> dict[str, Any]:
    """Ingest a zip of `documents` documents into a fresh store, a copy of `template`."""
    path = work / f"entries-{documents}.zip"
    write_zip(path, documents)
    store = work / f"store-{documents}.sqlite3"
    shutil.copyfile(template, store)
    url = f"sqlite:///{store}"
    started = time.monotonic()
    result = asyncio.run(run_in_transaction(url, lambda conn: ingest_files(conn, [path])))
    seconds = time.monotonic() - started
    assert len(result.files) == documents and result.nodes == documents, result
    return {
        "documents": documents,
        "zip_bytes": path.stat().st_size,
        "seconds": round(seconds, 2),
        "ms_per_document": round(1000 * seconds / documents, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[2_500, 5_000, 10_000, 20_000])
    parser.add_argument("--smoke", action="store_true", help="seconds-long run for CI")
    args = parser.parse_args()
    if args.smoke:
        args.counts = [200, 400]
    results = []
    with tempfile.TemporaryDirectory(prefix="graphsvc-zip-entries-") as folder:
        template = Path(folder) / "template.sqlite3"
        upgrade_schema(f"sqlite:///{template}")
        for documents in args.counts:
            results.append(measure(Path(folder), template, documents))
            print(f"{documents:,} documents: {results[-1]['seconds']} s", flush=True)
    first = results[0]["ms_per_document"]
    print("| documents | zip size | seconds | ms per document | per document, to the first |")
    print("|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['documents']:,} | {r['zip_bytes'] / 1e6:.1f} MB | {r['seconds']} "
            f"| {r['ms_per_document']} | {r['ms_per_document'] / first:.2f} |"
        )
    out = HERE / "results" / ("zip-entries-smoke.json" if args.smoke else "zip-entries.json")
    out.parent.mkdir(exist_ok=True)
    summary = {"date": datetime.now(UTC).isoformat(), "args": vars(args), "results": results}
    out.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
