"""Generate a large SharpHound collection and ingest it, measuring time and peak memory.

    python bench/ingest_large.py --megabytes 1024 [--postgres URL] [--keep]
    python bench/ingest_large.py --generate FOLDER --megabytes 1024
    python bench/ingest_large.py --collection FOLDER [--postgres URL]

The second form only writes a collection; the third ingests one written before, so that
two versions of graphsvc (PYTHONPATH) can be measured on the same files.

Each ingest runs as its own `graphsvc ingest` process; its peak resident memory comes from
the kernel's accounting for that process (wait4), its throughput is collected objects per
second of wall time. Results are printed and written to bench/results/ingest-large.json.

The files are generated in another child process: Linux carries a process's memory
high-water mark across fork and exec, so a parent that had grown while generating would
inflate every measured child.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shapes import LargeDomain

BYTES_PER_OBJECT = 3150  # measured on LargeDomain's records


def run_ingest(folder: Path, environment: dict[str, str]) -> dict[str, float]:
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "graphsvc", "ingest", str(folder), "--json"],
        env={**os.environ, **environment},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.monotonic() - started
    if status != 0:
        raise SystemExit(f"ingest failed with status {status}")
    result = json.loads(output)
    return {
        "seconds": round(elapsed, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "nodes": result["nodes"],
        "edges": result["edges"],
        "objects_per_second": round(result["nodes"] / elapsed),
    }


def generate(folder: Path, megabytes: int) -> dict[str, int]:
    objects = megabytes * 1_000_000 // BYTES_PER_OBJECT
    return LargeDomain.of_size("SCALE.LOCAL", "S-1-5-21-900-900-900", objects).write(folder)


def count_records(path: Path) -> int:
    """A generated document's record count, from its `meta` (written last)."""
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - 4096))
        tail = f.read().decode()
    return int(json.loads(tail[tail.rindex('"meta": ') + 8 : tail.rindex("}")])["count"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=1024)
    parser.add_argument("--postgres", default=None, help="a database URL to ingest into too")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--generate", type=Path, help="only write a collection there")
    parser.add_argument("--collection", type=Path, help="ingest this collection, kept")
    args = parser.parse_args()
    if args.generate:
        print(json.dumps(generate(args.generate, args.megabytes)))
        return

    work = Path(tempfile.mkdtemp(prefix="graphsvc-bench-"))
    folder = args.collection or work / "collection"
    if args.collection is None:
        started = time.monotonic()
        generator = subprocess.run(
            [
                sys.executable,
                __file__,
                "--generate",
                str(folder),
                "--megabytes",
                str(args.megabytes),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        records = json.loads(generator.stdout)
        print(
            f"generated {sum(records.values()):,} objects ({records}) in "
            f"{time.monotonic() - started:.0f} s"
        )
    else:
        records = {p.stem: count_records(p) for p in sorted(folder.glob("*.json"))}
    size = sum(p.stat().st_size for p in folder.glob("*.json"))
    print(f"collection: {size / 1e6:.0f} MB, {sum(records.values()):,} objects")

    results = {"input_mb": round(size / 1e6), "records": records}
    stores = {"sqlite": {"GRAPHSVC_DATABASE_URL": f"sqlite:///{work / 'bench.sqlite3'}"}}
    if args.postgres:
        stores["postgresql"] = {"GRAPHSVC_DATABASE_URL": args.postgres}
    for name, settings in stores.items():
        figures = run_ingest(folder, {**settings, "GRAPHSVC_DATA_DIR": str(work)})
        results[name] = figures
        print(
            f"{name:>10}: {figures['seconds']} s, peak RSS {figures['peak_rss_mb']} MB, "
            f"{figures['objects_per_second']:,} objects/s "
            f"({figures['nodes']:,} nodes, {figures['edges']:,} edges)"
        )
    out = Path(__file__).parent / "results" / "ingest-large.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    if not args.keep:
        for path in sorted(work.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        work.rmdir()


if __name__ == "__main__":
    main()
