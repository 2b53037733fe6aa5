"""`graphsvc upload`: send collector files to a graphsvc server as one file-upload job, from
any machine, with an API token's signed requests.

The standard library's HTTP client streams each file from disk: a file is read once to sign
it (the signature covers the body) and once to send it, never held in memory.
"""

from __future__ import annotations

import http.client
import json
import ssl
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import click

from graphsvc.cli.common import fail, read_token_key, token_key_options
from graphsvc.ingest.sources import BOM, ZIP_MAGIC, collector_files
from graphsvc.signals import EXIT_INTERRUPTED
from graphsvc.signatures import body_signer, encode_signature, request_date, sign_request
from graphsvc.uploads import UPLOAD_LIMIT_HEADER

CHUNK = 1024 * 1024
# How long the client keeps sending a request again while the server answers 503 (a SQLite
# store ingesting a large job holds its one write lock for minutes).
BUSY_PATIENCE_SECONDS = 900
FINISHED = {2: "Complete", 3: "Canceled", 4: "Timed Out", 5: "Failed"}
# What a file given by name must be (its name does not matter, as for `graphsvc ingest`).
ACCEPTED = (
    "upload takes JSON files (starting with { or [), zip files, and folders of .json and .zip files"
)
JSON_BLANKS = b" \t\r\n"
SNIFF_BYTES = 1024 * 1024  # read past blanks for at most this much of a file


class Server:
    """Signed requests to one graphsvc server."""

    def __init__(
        self, url: str, token_id: str, token_key: str, timeout: float, ca_file: Path | None = None
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            fail(f"--url {url!r} must be http://host[:port] or https://host[:port]")
        self.tls: ssl.SSLContext | None = None
        if parts.scheme == "https":
            try:
                self.tls = ssl.create_default_context(cafile=ca_file)
            except (ssl.SSLError, OSError, ValueError) as exc:
                fail(f"--ca-file {ca_file}: not a PEM file of CA certificates ({exc})")
        self.parts = parts
        self.prefix = parts.path.rstrip("/")
        self.token_id = token_id
        self.token_key = token_key
        self.timeout = timeout
        self.busy_since = float("inf")  # when the server began answering 503, if it is
        self.last_headers: http.client.HTTPMessage | None = None  # of the last answer

    def connect(self) -> http.client.HTTPConnection:
        host, port = self.parts.hostname or "", self.parts.port
        if self.tls is not None:
            return http.client.HTTPSConnection(host, port, timeout=self.timeout, context=self.tls)
        return http.client.HTTPConnection(host, port, timeout=self.timeout)

    def headers(self, signature: str, date: str) -> dict[str, str]:
        return {
            "Authorization": f"svcsignature {self.token_id}",
            "RequestDate": date,
            "Signature": signature,
            "User-Agent": "graphsvc-upload",
        }

    def call(self, method: str, path: str, body: bytes = b"") -> Any:
        uri = self.prefix + path
        while True:
            date = request_date()
            signature = sign_request(self.token_key, method, uri, date, body)
            headers = self.headers(signature, date)
            if body:
                headers["Content-Type"] = "application/json"
            answered = self.exchange(method, uri, headers, [body], f"{method} {path}")
            if answered is not None:
                return answered
            self.check_patience(f"{method} {path}")

    def send_file(self, path: str, file: Path, progress: Any) -> Any:
        uri = self.prefix + path
        while True:
            date = request_date()
            signer = body_signer(self.token_key, "POST", uri, date)
            for chunk in read_chunks(file):
                signer.update(chunk)
            headers = self.headers(encode_signature(signer.digest()), date)
            headers["Content-Type"] = content_type(file)
            headers["Content-Length"] = str(file.stat().st_size)
            headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(file.name)}"
            answered = self.exchange(
                "POST", uri, headers, counted(read_chunks(file), progress), f"POST {path} ({file})"
            )
            if answered is not None:
                return answered
            self.check_patience(f"sending {file}")

    def check_patience(self, what: str) -> None:
        if time.monotonic() > self.busy_since + BUSY_PATIENCE_SECONDS:
            fail(f"{what}: the server stayed busy for {BUSY_PATIENCE_SECONDS} s; try later")

    def exchange(
        self, method: str, uri: str, headers: dict[str, str], body: Iterable[bytes], what: str
    ) -> Any:
        """One request; its answer, or None when the server was busy (503: a SQLite store
        is ingesting) and the request should be sent again, after the wait it asked for."""
        connection = self.connect()
        try:
            connection.putrequest(method, uri, skip_accept_encoding=True)
            for name, value in headers.items():
                connection.putheader(name, value)
            if "Content-Length" not in headers:
                connection.putheader("Content-Length", str(sum(len(b) for b in body)))
            connection.endheaders()
            try:
                for chunk in body:
                    connection.send(chunk)
            except OSError as exc:
                # A server that refuses a body (413, 401) answers and closes without reading
                # the rest: its answer, when it can still be read, says why.
                response = read_answer_after(connection, exc)
            else:
                response = connection.getresponse()
            if response.status == 503:
                response.read()
                wait = int(response.headers.get("Retry-After", "5"))
                if self.busy_since == float("inf"):
                    self.busy_since = time.monotonic()
                click.echo(f"{what}: the server is busy; sending again in {wait} s", err=True)
                time.sleep(wait)
                return None
            self.busy_since = float("inf")
            self.last_headers = response.headers
            return answer(response, what)
        except ssl.SSLCertVerificationError as exc:
            fail(
                f"{self.parts.geturl()}: {what}: the server's certificate is not trusted "
                f"({exc.verify_message}): give the CA that signed it with --ca-file "
                "(or GRAPHSVC_CA_FILE)"
            )
        except OSError as exc:
            fail(f"{self.parts.geturl()}: {what}: {exc}")
        finally:
            connection.close()


def read_answer_after(
    connection: http.client.HTTPConnection, error: OSError
) -> http.client.HTTPResponse:
    """The answer a server sent before it stopped reading the request, else `error`."""
    try:
        return connection.getresponse()
    except (OSError, http.client.HTTPException):
        raise error from None


def check_upload_limit(files: list[Path], limit_header: str | None) -> None:
    """Refuse, before hashing anything, a file larger than the server takes (when it says)."""
    if limit_header is None or not limit_header.isdigit():
        return
    limit = int(limit_header)
    for file in files:
        size = file.stat().st_size
        if size > limit:
            fail(
                f"{file}: {size:,} bytes is more than the server takes in one upload "
                f"({limit:,} bytes, its GRAPHSVC_MAX_UPLOAD_BYTES); split the collection "
                "into smaller files, or raise the server's limit"
            )


def counted(chunks: Iterator[bytes], progress: Any) -> Iterator[bytes]:
    for chunk in chunks:
        yield chunk
        progress(len(chunk))


def read_chunks(file: Path) -> Iterator[bytes]:
    with file.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            yield chunk


def content_type(file: Path) -> str:
    with file.open("rb") as stream:
        return "application/zip" if stream.read(4) == ZIP_MAGIC else "application/json"


def answer(response: http.client.HTTPResponse, what: str) -> Any:
    """The answer's JSON body, or a one-line failure with the server's message."""
    raw = response.read()
    try:
        body = json.loads(raw)
    except ValueError:
        fail(f"{what}: HTTP {response.status}, not JSON: {raw[:200]!r}")
    if response.status >= 400:
        errors = body.get("errors") or [{}]
        fail(f"{what}: HTTP {response.status}: {errors[0].get('message', raw[:200])}")
    return body


def collect_files(paths: tuple[Path, ...]) -> list[Path]:
    """The files to send: each file given, if it is collector JSON or a zip, and the .json
    and .zip files of each folder."""
    files = []
    for path in paths:
        if path.is_dir():
            found = collector_files(path)
            if not found:
                fail(f"{path}: the folder holds no .json or .zip files")
            files += found
        elif path.is_file():
            if not is_collector_file(path):
                fail(f"{path}: not collector JSON or a zip file; {ACCEPTED}")
            files.append(path)
        else:
            fail(f"{path}: no such file or folder")
    return files


def is_collector_file(file: Path) -> bool:
    """Whether the file is a zip (by its signature) or may be collector JSON (past a UTF-8
    byte-order mark and blanks, it starts an object or an array): the server would fail
    any other in the job, after it was sent."""
    try:
        with file.open("rb") as stream:
            head = stream.read(len(ZIP_MAGIC))
            if head == ZIP_MAGIC:
                return True
            stream.seek(len(BOM) if head.startswith(BOM) else 0)
            read = 0
            while read < SNIFF_BYTES and (chunk := stream.read(64 * 1024)):
                read += len(chunk)
                text = chunk.lstrip(JSON_BLANKS)
                if text:
                    return text[:1] in (b"{", b"[")
    except OSError as exc:
        fail(f"{file}: {exc.strerror or exc}")
    return False


def cancel_job(server: Server, job_id: int) -> None:
    """Cancel a job this command started and could not end; best effort, said either way."""
    try:
        server.call("POST", f"/api/v2/file-upload/{job_id}/cancel")
    except BaseException as exc:  # a failure (said by `fail`), or a second Ctrl-C
        reason = f": {exc}" if isinstance(exc, Exception) else ""
        click.echo(
            f"file-upload job {job_id} could not be canceled{reason}; the server times it "
            "out once it has heard nothing of it for GRAPHSVC_UPLOAD_JOB_TIMEOUT_SECONDS",
            err=True,
        )
    else:
        click.echo(f"file-upload job {job_id} canceled", err=True)


def wait_for_job(server: Server, job_id: int) -> Any:
    """The job, once it has ended one way or another."""
    while True:
        page = server.call("GET", f"/api/v2/file-upload?id={job_id}")["data"]
        if not page:
            fail(f"file-upload job {job_id} is not listed any more")
        if page[0]["status"] in FINISHED:
            return page[0]
        time.sleep(1)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--url", required=True, envvar="GRAPHSVC_URL", help="The server, http(s)://host:port."
)
@token_key_options
@click.option(
    "--wait", is_flag=True, help="Follow the job until it is ingested; exit 1 if it fails."
)
@click.option(
    "--timeout", type=float, default=300.0, show_default=True, help="Seconds per request."
)
@click.option(
    "--ca-file",
    envvar="GRAPHSVC_CA_FILE",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="PEM file of the CA certificates to trust for an https server (a private CA); "
    "default the system's.",
)
def upload(
    paths: tuple[Path, ...],
    url: str,
    token_id: str,
    token_key_stdin: bool,
    token_key: str | None,
    wait: bool,
    timeout: float,
    ca_file: Path | None,
) -> None:
    """Send collector files (JSON, SharpHound zips, folders of them) to a server as one job."""
    key = read_token_key(token_key_stdin, token_key)
    files = collect_files(paths)
    server = Server(url, token_id, key, timeout, ca_file)
    job = server.call("POST", "/api/v2/file-upload/start")["data"]
    job_id = job["id"]
    total = sum(f.stat().st_size for f in files)
    ended = False
    try:
        # Said inside: a SIGTERM sent on reading it must still cancel the job.
        click.echo(f"file-upload job {job_id} started", err=True)
        limit = server.last_headers.get(UPLOAD_LIMIT_HEADER) if server.last_headers else None
        check_upload_limit(files, limit)
        with click.progressbar(length=total, label="uploading", file=sys.stderr) as bar:
            for file in files:
                server.send_file(f"/api/v2/file-upload/{job_id}", file, bar.update)
        server.call("POST", f"/api/v2/file-upload/{job_id}/end")
        ended = True
        plural = "" if len(files) == 1 else "s"
        click.echo(
            f"sent {len(files)} file{plural} ({total:,} bytes); job {job_id} is queued", err=True
        )
        if not wait:
            click.echo(json.dumps({"id": job_id, "status": 6}))
            return
        job = wait_for_job(server, job_id)
    except BaseException as exc:
        if not ended:
            # Interrupted (Ctrl-C) or refused: the job would otherwise wait, Running, for the
            # server's job timeout.
            cancel_job(server, job_id)
        elif isinstance(exc, KeyboardInterrupt):
            # Sent whole, the job is the server's now (only a Running job can be canceled).
            fail(
                f"interrupted: stopped waiting; file-upload job {job_id} was sent whole and "
                f"will still be ingested (GET /api/v2/file-upload?id={job_id} shows how it ends)",
                EXIT_INTERRUPTED,
            )
        raise
    click.echo(
        json.dumps(
            {
                "id": job_id,
                "status": job["status"],
                "status_message": job["status_message"],
                "run_id": job["run_id"]["uuid"] if job["run_id"]["valid"] else None,
            }
        )
    )
    if job["status"] != 2:
        fail(f"file-upload job {job_id} {FINISHED[job['status']]}: {job['status_message']}")
