"""Upload a large generated SharpHound collection to a served process and follow its ingest,
measuring the upload, the processing, the server's peak memory and reads meanwhile.

    python bench/upload_large.py --megabytes 1024 [--postgres URL]

Per store: a fresh `graphsvc serve` (its ingest worker on), an Upload-Only token, and the
`graphsvc upload` client sending the collection's files as one job. Upload time runs from
the job's start to its end (the bytes stored in the database); processing time from the end
to the job's completion. While the job is processed, a signed read (GET /api/v2/self) is
sent every 0.2 s and its latency noted. The server's peak resident memory is its VmHWM,
read from /proc just before it stops. Results go to bench/results/upload-large.json.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from run import free_port, peak_rss_mb, signed

from graphsvc.accounts import tokens, users
from graphsvc.crypto import KeyBox
from graphsvc.store.db import Connection, run_in_transaction

FERNET_KEY = "bT0F7bH3oUe6bXq5Yx3Z0mO2iS1uN8rQ4vW9aC6dE2k="


def signed_get(port: int, token: tokens.CreatedToken, uri: str) -> Any:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", uri, headers=signed(token.id, token.key, uri))
        return json.loads(connection.getresponse().read())
    finally:
        connection.close()


def run_store(folder: Path, work: Path, url: str) -> dict[str, Any]:
    environment = {
        **os.environ,
        "GRAPHSVC_DATABASE_URL": url,
        "GRAPHSVC_DATA_DIR": str(work / "data"),
        "GRAPHSVC_TOKEN_ENCRYPTION_KEY": FERNET_KEY,
        "GRAPHSVC_LOG_LEVEL": "warning",
        "GRAPHSVC_INGEST_POLL_SECONDS": "0.2",
        "GRAPHSVC_RATE_LIMIT_PER_SECOND": "0",
    }
    subprocess.run([sys.executable, "-m", "graphsvc", "db", "upgrade"], env=environment, check=True)
    keys = KeyBox(FERNET_KEY.encode())

    async def create_tokens(
        conn: Connection,
    ) -> tuple[tokens.CreatedToken, tokens.CreatedToken]:
        await users.create_user(conn, "collector", "Upload-Only", None, False)
        await users.create_user(conn, "reader", "Read-Only", None, False)
        return (
            await tokens.create_user_token(conn, keys, "collector"),
            await tokens.create_user_token(conn, keys, "reader"),
        )

    uploader, reader = asyncio.run(run_in_transaction(url, create_tokens))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "graphsvc", "serve", "--port", str(port)], env=environment
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        started = time.monotonic()
        client = subprocess.Popen(
            [sys.executable, "-m", "graphsvc", "upload", "--url", base, str(folder)],
            env={
                **environment,
                "GRAPHSVC_TOKEN_ID": uploader.id,
                "GRAPHSVC_TOKEN_KEY": uploader.key,
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        output, _ = client.communicate()
        if client.returncode != 0:
            raise SystemExit("the upload failed")
        uploaded = time.monotonic()
        job_id = json.loads(output)["id"]
        latencies = []
        while True:
            before = time.monotonic()
            signed_get(port, reader, "/api/v2/self")
            latencies.append((time.monotonic() - before) * 1000)
            job = signed_get(port, uploader, f"/api/v2/file-upload?id={job_id}")["data"][0]
            if job["status"] in (2, 4, 5):
                break
            time.sleep(0.2)
        processed = time.monotonic()
        if job["status"] != 2:
            raise SystemExit(f"the job failed: {job['status_message']}")
        peak = peak_rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait(30)
    latencies.sort()
    return {
        "upload_seconds": round(uploaded - started, 1),
        "processing_seconds": round(processed - uploaded, 1),
        "server_peak_rss_mb": peak,
        "read_during_ingest_ms": {
            "median": round(statistics.median(latencies), 1),
            "p99": round(latencies[int(len(latencies) * 0.99)], 1),
            "max": round(latencies[-1], 1),
            "samples": len(latencies),
        },
        "status_message": job["status_message"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=1024)
    parser.add_argument("--postgres", default=None, help="an empty database to upload to too")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="graphsvc-bench-"))
    folder = work / "collection"
    here = Path(__file__).parent
    subprocess.run(
        [
            sys.executable,
            str(here / "ingest_large.py"),
            "--generate",
            str(folder),
            "--megabytes",
            str(args.megabytes),
        ],
        check=True,
        capture_output=True,
    )
    size = sum(p.stat().st_size for p in folder.glob("*.json"))
    print(f"generated {size / 1e6:.0f} MB")
    results: dict[str, Any] = {"input_mb": round(size / 1e6)}
    stores = {"sqlite": f"sqlite:///{work / 'bench.sqlite3'}"}
    if args.postgres:
        stores["postgresql"] = args.postgres
    for name, url in stores.items():
        results[name] = figures = run_store(folder, work / name, url)
        print(f"{name:>10}: {json.dumps(figures)}")
    out = here / "results" / "upload-large.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    for path in sorted(work.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    work.rmdir()


if __name__ == "__main__":
    main()
