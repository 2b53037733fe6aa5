"""The nginx block of docs/operations.md ("Several replicas"), run as written but for its
addresses and certificate, in front of two replicas: a collector file over nginx's default 1 MB
limit is uploaded and ingested, a body over graphsvc's own limit gets graphsvc's JSON 413, a
body that stalls gets graphsvc's 408 (nginx streams it), and port 80 redirects to https."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from graphsvc.accounts import tokens
from graphsvc.settings import Settings
from graphsvc.signatures import body_signer, encode_signature, request_date
from tests.conftest import (
    FIXTURES,
    free_port,
    refuse_without_service,
    served,
    server_environment,
    signed_headers,
    wait_until,
)
from tests.test_upload_replicas import (
    FAST_WORKER,
    JOBS,
    assert_graph_as_ingested,
    create_uploader,
    fetch,
    pieces,
)

OPERATIONS_DOC = Path(__file__).resolve().parent.parent / "docs" / "operations.md"
SAMPLE_ZIP = FIXTURES / "bloodhound-docs" / "ad_sampledata.zip"
BIG_FILE = "20240305111414_containers.json"  # 1.3 MB: nginx's default limit refused it
NGINX_DEFAULT_LIMIT = 1024 * 1024
MAX_UPLOAD = 1_400_000  # graphsvc's limit on these replicas: the big file fits, barely
BODY_TIMEOUT = 2  # seconds a body may pause on these replicas
HOST = "graph.example.com"
SPOOFED = "203.0.113.7"  # what a client writes in X-Forwarded-For itself: never believed
# Where the README's block names the machines and files of its example: the test's own here.
README_ADDRESSES = {
    "upstream": "server 10.0.0.11:8000; server 10.0.0.12:8000;",
    "http": "listen 80;",
    "https": "listen 443 ssl;",
    "certificate": "/etc/ssl/graph.example.com/fullchain.pem",
    "key": "/etc/ssl/graph.example.com/privkey.pem",
}
# What the upload path needs of the location block; the test runs the block itself, but a
# missing timeout would show only on uploads larger than a test sends.
REQUIRED = (
    "proxy_pass http://graphsvc;",  # no path: the URI arrives as it was signed
    "proxy_http_version 1.1;",
    "proxy_request_buffering off;",
    "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
)


def nginx_binary() -> str:
    """The system's nginx (in /usr/sbin, which may be off a user's PATH); skipped without it,
    failed in CI (GRAPHSVC_TEST_REQUIRE_SERVICES)."""
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
    found = shutil.which("nginx", path=search)
    if found is None:
        where = "$PATH:/usr/sbin:/usr/local/sbin"
        refuse_without_service("nginx", where, "no nginx binary (apt-get install nginx)")
    assert found is not None
    return found


def readme_nginx_block() -> str:
    """The one ```nginx block of docs/operations.md's "Several replicas" section."""
    section = OPERATIONS_DOC.read_text().split("## Several replicas\n", 1)[1]
    section = re.split(r"^#{2,3} ", section, maxsplit=1, flags=re.M)[0]  # to the next heading
    blocks = re.findall(r"^```nginx\n(.*?)^```", section, flags=re.M | re.S)
    assert len(blocks) == 1, "one nginx block in docs/operations.md's Several replicas section"
    block: str = blocks[0]
    return block


def size_bytes(value: str) -> int:
    """An nginx size (`0`, `4096`, `8k`, `16m`, `4g`) in bytes."""
    number, unit = re.fullmatch(r"(\d+)([kKmMgG]?)", value).groups()  # type: ignore[union-attr]
    return int(number) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit.lower()]


def seconds(value: str) -> int:
    """An nginx time (`90`, `90s`, `5m`, `1h`) in seconds."""
    number, unit = re.fullmatch(r"(\d+)(s|m|h)?", value).groups()  # type: ignore[union-attr]
    return int(number) * {"s": 1, "m": 60, "h": 3600}[unit or "s"]


def test_the_readme_block_suits_graphsvcs_defaults() -> None:
    """Without a server: the location block takes any upload graphsvc takes, and waits for
    the longest answer graphsvc may give one (Prefer: wait, then a second per 32 MiB)."""
    block = readme_nginx_block()
    location = re.search(r"location / \{(.*?)\}", block, flags=re.S)
    assert location is not None, block
    directives = dict(
        line.strip().rstrip(";").split(None, 1)
        for line in location[1].splitlines()
        if line.strip() and not line.strip().startswith("proxy_set_header")
    )
    for directive in REQUIRED:
        assert directive in location[1], f"the README's location block lacks {directive}"
    defaults = Settings.from_environment({})
    largest = defaults.max_upload_bytes
    body_limit = size_bytes(directives["client_max_body_size"])
    assert body_limit == 0 or body_limit >= largest, "nginx must take GRAPHSVC_MAX_UPLOAD_BYTES"
    longest = defaults.max_wait_seconds + largest // (32 * 1024 * 1024)
    for timeout in ("proxy_read_timeout", "proxy_send_timeout"):
        assert seconds(directives[timeout]) > longest, f"{timeout} under {longest} s"
    assert "ssl_certificate " in block and "ssl_certificate_key " in block
    assert re.search(r"listen 80;.*?return 301 https://", block, flags=re.S), "a redirect"


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for HOST and 127.0.0.1, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(HOST), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def nginx_config(folder: Path, upstreams: list[int], http_port: int, https_port: int) -> str:
    """A whole nginx.conf around the README's block, with this test's addresses in it."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = self_signed(folder)
    ours = {
        "upstream": " ".join(f"server 127.0.0.1:{port};" for port in upstreams),
        "http": f"listen 127.0.0.1:{http_port};",
        "https": f"listen 127.0.0.1:{https_port} ssl;",
        "certificate": str(cert),
        "key": str(key),
    }
    block = readme_nginx_block()
    for name, written in README_ADDRESSES.items():
        assert block.count(written) == 1, f"the README's block no longer has {written!r}"
        block = block.replace(written, ours[name])
    temporary = "\n".join(
        f"    {kind}_temp_path {folder / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    # As root, nginx's workers run as `nobody` unless told: they could not reach tmp_path.
    user = "user root;\n" if os.geteuid() == 0 else ""
    return f"""{user}daemon off;
worker_processes 1;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} warn;
events {{ worker_connections 128; }}
http {{
    access_log off;
{temporary}
{block}
}}
"""


@contextlib.contextmanager
def nginx(folder: Path, config: str, ports: tuple[int, ...]) -> Iterator[None]:
    """nginx in the foreground with this config, until the block ends."""
    binary = nginx_binary()
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "nginx.conf"
    conf.write_text(config)
    error_log = folder / "error.log"
    command = [binary, "-p", f"{folder}/", "-c", str(conf), "-e", str(error_log)]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 20
        while not all(listening(port) for port in ports):
            if process.poll() is not None or time.monotonic() > deadline:
                log = error_log.read_text() if error_log.exists() else ""
                stderr = process.stderr.read().decode() if process.poll() is not None else ""  # type: ignore[union-attr]
                raise AssertionError(f"nginx did not start:\n{stderr}\n{log}")
            time.sleep(0.05)
        yield
    finally:
        process.send_signal(signal.SIGTERM)  # fast shutdown, workers too
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Collector:
    """Signed requests of one token, through the proxy over TLS, each also carrying an
    X-Forwarded-For of its own making."""

    def __init__(self, client: httpx.Client, token: tokens.CreatedToken) -> None:
        self.client = client
        self.token = token

    def call(self, method: str, uri: str) -> Any:
        response = self.client.request(
            method,
            uri,
            headers={**signed_headers(self.token, method, uri), "X-Forwarded-For": SPOOFED},
        )
        assert response.status_code < 300, response.text
        return response.json()["data"]

    def send(
        self, uri: str, name: str, content: bytes | Iterator[bytes], signed: bytes
    ) -> httpx.Response:
        """File `name` with `content` as the body (bytes: with a Content-Length; pieces:
        chunked), signed over `signed`."""
        date = request_date()
        signer = body_signer(self.token.key, "POST", uri, date)
        signer.update(signed)
        headers = {
            "Authorization": f"svcsignature {self.token.id}",
            "RequestDate": date,
            "Signature": encode_signature(signer.digest()),
            "Content-Type": "application/json",
            "Content-Disposition": f'attachment; filename="{name}"',
            "X-Forwarded-For": SPOOFED,
        }
        return self.client.post(uri, content=content, headers=headers)


def is_json_error(response: httpx.Response, status: int) -> dict[str, Any]:
    """graphsvc's own error body (not nginx's HTML page), its first error."""
    assert response.status_code == status, response.text[:500]
    assert response.headers["content-type"].startswith("application/json"), response.text[:500]
    assert response.headers.get("requestid"), "graphsvc's answer, with its RequestID"
    error: dict[str, Any] = response.json()["errors"][0]
    return error


def files_taken(base: str, status: int = 202) -> int:
    """Files a replica accepted (202), or answered with `status`, from its own /metrics,
    asked directly."""
    text = httpx.get(f"{base}/metrics", timeout=10).text
    found = re.search(
        rf'^graphsvc_requests_total\{{operation="UploadFileToJob",status="{status}"\}} (\S+)$',
        text,
        flags=re.M,
    )
    return int(float(found[1])) if found else 0


def stalling(data: bytes, cut_off: Callable[[], bool]) -> Iterator[bytes]:
    """The first 64 KiB of `data`, a pause until the server has cut the request off (longer
    than the body timeout, then), then the rest."""
    yield data[: 64 * 1024]
    wait_until(cut_off, timeout=BODY_TIMEOUT + 60, what="graphsvc to cut the stalled body off")
    yield data[64 * 1024 :]


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_uploads_through_the_readme_nginx_in_front_of_two_replicas(
    database_url: str, tmp_path: Path
) -> None:
    nginx_binary()  # skipped (or failed, in CI) before anything starts without it
    collection = tmp_path / "collection"
    with zipfile.ZipFile(SAMPLE_ZIP) as archive:
        archive.extractall(collection)
    files = sorted(collection.glob("*.json"))
    big = collection / BIG_FILE
    assert NGINX_DEFAULT_LIMIT < big.stat().st_size < MAX_UPLOAD
    token = create_uploader(database_url)
    settings = {
        **FAST_WORKER,
        "trusted_proxies": "1",
        "public_url": f"https://{HOST}",
        "max_upload_bytes": str(MAX_UPLOAD),
        "body_timeout_seconds": str(BODY_TIMEOUT),
        "rate_limit_per_second": "0",  # every request comes from one address here
        "metrics": "open",  # each replica's count of the files it took
    }
    http_port, https_port = free_port(), free_port()
    with contextlib.ExitStack() as stack:
        replicas = [
            stack.enter_context(
                served(server_environment(database_url, tmp_path / f"r{i}", **settings))
            )[0]
            for i in range(2)
        ]
        ports = [int(base.rpartition(":")[2]) for base in replicas]
        config = nginx_config(tmp_path / "proxy", ports, http_port, https_port)
        stack.enter_context(nginx(tmp_path / "proxy", config, (http_port, https_port)))
        trust = ssl.create_default_context(cafile=str(tmp_path / "proxy" / "cert.pem"))
        client = stack.enter_context(
            httpx.Client(base_url=f"https://127.0.0.1:{https_port}", verify=trust, timeout=60)
        )
        collector = Collector(client, token)

        redirect = httpx.get(f"http://127.0.0.1:{http_port}{JOBS}?id=1", timeout=10)
        assert redirect.status_code == 301
        assert redirect.headers["location"] == f"https://{HOST}{JOBS}?id=1"

        job_id = collector.call("POST", f"{JOBS}/start")["id"]
        uri = f"{JOBS}/{job_id}"
        for path in files:  # chunked, in 64 KiB pieces
            sent = collector.send(uri, path.name, pieces(path), path.read_bytes())
            assert sent.status_code == 202, sent.text

        # Over graphsvc's limit: its JSON 413, with a Content-Length (refused before it is
        # read) and chunked (refused as the count passes the limit).
        over = big.read_bytes() + b" " * (MAX_UPLOAD - big.stat().st_size + 1)
        declared = collector.send(uri, "over.json", over, over)
        assert is_json_error(declared, 413)["context"] == "body"
        streamed = collector.send(
            uri, "over.json", iter([over[:1_000_000], over[1_000_000:]]), over
        )
        assert is_json_error(streamed, 413)["context"] == "body"
        # Streamed, the body's pause reaches graphsvc, which ends it; nginx buffering it
        # would have waited and passed it on whole.
        data = big.read_bytes()

        def cut_off() -> bool:
            return any(files_taken(base, status=408) for base in replicas)

        stalled = collector.send(uri, "stalled.json", stalling(data, cut_off), data)
        assert is_json_error(stalled, 408)["message"].startswith("the request body")

        collector.call("POST", f"{uri}/end")

        def ended() -> dict[str, Any] | None:
            job: dict[str, Any] = collector.call("GET", f"{JOBS}?id={job_id}")[0]
            return job if job["status"] in (2, 5) else None

        job = wait_until(ended, timeout=120, what=f"job {job_id} to end")
        taken = [files_taken(base) for base in replicas]
        assert_graph_as_ingested(database_url, collection, tmp_path)

        # `graphsvc upload` to the proxy's private certificate: refused until told to trust
        # it.
        def upload(*options: str) -> subprocess.CompletedProcess[str]:
            command = ["upload", "--url", f"https://127.0.0.1:{https_port}", "--wait"]
            return subprocess.run(
                [sys.executable, "-m", "graphsvc", *command, *options, str(files[0])],
                env={**os.environ, "GRAPHSVC_TOKEN_ID": token.id, "GRAPHSVC_TOKEN_KEY": token.key},
                capture_output=True,
                text=True,
                timeout=120,
            )

        untrusted = upload()
        assert untrusted.returncode == 1 and "Traceback" not in untrusted.stderr
        assert "the server's certificate is not trusted" in untrusted.stderr
        assert "--ca-file" in untrusted.stderr
        trusted = upload("--ca-file", str(tmp_path / "proxy" / "cert.pem"))
        assert trusted.returncode == 0, trusted.stderr
        assert json.loads(trusted.stdout)["status"] == 2
        not_pem = upload("--ca-file", str(files[0]))
        assert not_pem.returncode == 1 and "not a PEM file of CA certificates" in not_pem.stderr
    assert sum(taken) == len(files) and all(taken), f"files taken per replica: {taken}"
    assert job["status"] == 2, job["status_message"]
    assert [f["name"] for f in job["files"]] == [p.name for p in files], "no refused one"
    # The client's own X-Forwarded-For is ignored: the address nginx appended is the client.
    addresses = fetch(database_url, "SELECT DISTINCT source_ip_address FROM audit_events")
    assert addresses == [("127.0.0.1",)]
