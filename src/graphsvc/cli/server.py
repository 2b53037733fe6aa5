"""Serving and the demo: serve, db upgrade, demo, examples, sign."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import click

from graphsvc.cli.common import (
    emit,
    fail,
    keys_of,
    load_settings,
    migrate,
    read_token_key,
    run_in_transaction,
    token_key_options,
)
from graphsvc.crypto import request_date, sign_request
from graphsvc.settings import Settings
from graphsvc.store import db as database

log = logging.getLogger("graphsvc")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--workers",
    default="1",
    show_default=True,
    help="Processes serving the one port: a number, or auto (the cores this process may use).",
)
def serve(host: str, port: int, workers: str) -> None:
    """Run migrations if needed, then serve the API."""
    from graphsvc.api.server import GuardedHttpProtocol, raise_open_file_limit

    settings = load_settings()
    count = worker_count(workers)
    if count > 1 and settings.rate_limit_per_second > 0 and not settings.redis_url:
        fail(
            f"--workers {workers}: the rate limit and the login throttle would count in each "
            "worker apart, letting a client through that many times; set GRAPHSVC_REDIS_URL "
            "(shared counters), or serve with --workers 1"
        )
    migrate(settings)  # once, before any worker starts
    # Each connection holds a file; keep a margin for the database, Redis and logs.
    open_files = raise_open_file_limit()
    max_connections = min(settings.max_connections, open_files - 64)
    # Behind proxies every connection comes from one of them: the cap would refuse clients.
    per_client = settings.max_connections_per_client if settings.trusted_proxies == 0 else None
    protocol = GuardedHttpProtocol.configure(
        settings.header_timeout_seconds, max_connections, per_client
    )
    announce(settings, host, port, max_connections, count)
    serve_here = functools.partial(run_worker, settings, host, port, protocol)
    if count == 1:
        serve_here(None)
    else:
        supervise_workers(serve_here, host, port, count)


def worker_count(workers: str) -> int:
    if workers == "auto":
        return (
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else os.cpu_count() or 1
        )
    if not workers.isdigit() or not 1 <= int(workers) <= 256:
        fail(f"--workers {workers!r} must be a number from 1 to 256, or auto")
    return int(workers)


def run_worker(
    settings: Settings, host: str, port: int, protocol: type[Any], sock: socket.socket | None
) -> None:
    """Serve in this process until stopped; with `sock`, on that socket (a worker's)."""
    import uvicorn

    from graphsvc.api.app import create_app

    config = uvicorn.Config(
        create_app(settings),
        host=host,
        port=port,
        log_level=settings.log_level,
        log_config=None,  # ours, set up by load_settings
        access_log=False,  # graphsvc logs each request itself, with its id and caller
        proxy_headers=False,
        http=protocol,
        ws="none",  # the app refuses upgrades with the JSON error body
        timeout_graceful_shutdown=settings.shutdown_grace_seconds,
    )
    # uvicorn finishes the requests under way, then raises the signal again for the handler
    # it found: a stop asked for by SIGTERM is a clean exit, status 0.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    server = uvicorn.Server(config)
    server.run(sockets=None if sock is None else [sock])
    if not server.started:
        sys.exit(1)


def supervise_workers(
    serve_here: Callable[[socket.socket], None], host: str, port: int, count: int
) -> None:
    """Fork `count` workers, each listening on the port with SO_REUSEPORT, so that the
    kernel spreads new connections evenly over them (one socket shared by all was handed
    mostly to one worker: 40 connections in a row reached the same one); a worker that dies
    is replaced, and SIGTERM or SIGINT stops them all, each finishing its requests under way."""
    reserved = reuse_port_socket(host, port)  # bound, not listening: fails early
    children: set[int] = set()
    stopping = False

    def start_worker() -> None:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            reserved.close()
            code = 0
            try:
                serve_here(reuse_port_socket(host, port))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                log.exception("worker %d failed", os.getpid())
                code = 1
            logging.shutdown()  # os._exit skips atexit: write the lines still waiting
            os._exit(code)
        children.add(pid)

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    for _ in range(count):
        start_worker()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        children.discard(pid)
        if not stopping:
            log.warning(
                "worker %d exited (status %d); starting another",
                pid,
                os.waitstatus_to_exitcode(status),
            )
            time.sleep(1)  # a worker that cannot start must not spin
            start_worker()
    reserved.close()


def reuse_port_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        fail(f"cannot listen on {host}:{port}: {exc.strerror}")
    return sock


def announce(settings: Settings, host: str, port: int, max_connections: int, workers: int) -> None:
    """The start line an operator checks, and a warning for each weaker setting."""
    limits = (
        f"{settings.rate_limit_per_second}/s (+{settings.rate_limit_burst} burst) per client"
        if settings.rate_limit_per_second
        else "off"
    )
    log.info(
        "graphsvc %s serving on http://%s:%d: store %s, edition %s, rate limit %s%s, "
        "at most %d connections%s",
        version("graphsvc"),
        host,
        port,
        database.redact_url(settings.resolved_database_url()),
        settings.edition,
        limits,
        " (shared through Redis)" if settings.redis_url else "",
        max_connections,
        f" per worker, {workers} workers" if workers > 1 else "",
    )
    weaker = {
        "GRAPHSVC_SDK_COMPATIBILITY is on: signatures need not cover the query string": (
            settings.sdk_compatibility
        ),
        "GRAPHSVC_ACCEPT_LOCAL_TIME_SIGNATURES is on: a captured signed request stays good "
        "for up to 26 hours longer": settings.accept_local_time_signatures,
        "GRAPHSVC_ALLOW_UNLIMITED_WAIT is on: a client may ask for no timeout at all": (
            settings.allow_unlimited_wait
        ),
        "GRAPHSVC_RATE_LIMIT_PER_SECOND is 0: requests are not rate limited": (
            settings.rate_limit_per_second == 0
        ),
    }
    for warning, applies in weaker.items():
        if applies:
            log.warning("weaker setting: %s", warning)


@click.group()
def db() -> None:
    """Database schema."""


@db.command()
def upgrade() -> None:
    """Bring the schema to the newest version."""
    settings = load_settings()
    migrate(settings)
    click.echo(f"schema is up to date at {database.redact_url(settings.resolved_database_url())}")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def demo(as_json: bool) -> None:
    """Load the demo dataset into an empty store with an Administrator and an API token; on a
    store that holds it already, print new credentials for it (the secret is set anew)."""
    from graphsvc.demo.dataset import open_demo

    settings = load_settings()
    secret = secrets.token_urlsafe(12)
    result, loaded = run_in_transaction(
        settings, lambda conn: open_demo(conn, keys_of(settings), secret)
    )
    where = database.redact_url(settings.resolved_database_url())
    text = "\n".join(
        [
            f"demo data loaded into {where}" if loaded else f"demo data found in {where}",
            f"  graph: {result.counts['nodes']} nodes, {result.counts['edges']} edges "
            f"(run {result.run_id})",
            f"  Azure tenants: {', '.join(result.tenant_ids)}",
            f"  computers: {', '.join(result.computer_object_ids)}",
            f"  environment kind ids: {result.environment_kind_ids}; extension ids: "
            f"{result.extension_ids}",
            f"  SAML provider ids: {result.saml_provider_ids}",
            f"  clients: {', '.join(result.client_ids)}",
            f"  Administrator login: {result.admin_username} / {result.admin_secret}",
            f"  API token id:  {result.token_id}",
            f"  API token key: {result.token_key}   (kept encrypted; run `demo` again to see it)",
        ]
    )
    emit(as_json, result, text)


def demo_uris(demo: dict[str, Any]) -> list[str]:
    """One request per operation, with identifiers from `graphsvc demo --json`."""
    computer = demo["computer_object_ids"][0]
    return [
        f"/api/v2/data-quality-stats-aggregations?schema_environment_kind_id="
        f"{demo['environment_kind_ids'][0]}&schema_extension_id={demo['extension_ids'][0]}",
        f"/api/v2/azure-tenants/{demo['tenant_ids'][0]}/data-quality-stats?limit=5",
        f"/api/v2/saml/providers/{demo['saml_provider_ids'][0]}",
        f"/api/v2/clients/{demo['client_ids'][0]}",
        f"/api/v2/computers/{computer}/dcom-rights",
    ]


@click.command()
@click.argument("demo_json", type=click.File("r"))
@click.option("--base-url", default="http://127.0.0.1:8000", show_default=True)
def examples(demo_json: Any, base_url: str) -> None:
    """Print curl commands for every operation, from the output of `graphsvc demo --json`.

    The signed ones carry a signature valid for about two hours; run this again for fresh ones.
    """
    try:
        demo = json.load(demo_json)
        uris = demo_uris(demo)
        token_id, token_key = demo["token_id"], demo["token_key"]
        login = {
            "login_method": "secret",
            "username": demo["admin_username"],
            "secret": demo["admin_secret"],
        }
    except ValueError:
        fail(f"{demo_json.name}: not JSON; pass the output of `graphsvc demo --json`")
    except (KeyError, IndexError, TypeError):
        fail(f"{demo_json.name}: not the output of `graphsvc demo --json` (fields are missing)")
    base = base_url.rstrip("/")
    lines = ["# Signed requests (API token):"]
    for uri in uris:
        date = request_date()
        signature = sign_request(token_key, "GET", uri, date, b"")
        lines.append(
            f"curl -s -H 'Authorization: svcsignature {token_id}' -H 'RequestDate: {date}' "
            f"-H 'Signature: {signature}' '{base}{uri}'"
        )
    lines += [
        "",
        "# JWT: log in once, then send it as a Bearer token:",
        f"JWT=$(curl -s -X POST '{base}/api/v2/login' -d '{json.dumps(login)}' "
        "| python3 -c 'import json,sys; r=json.load(sys.stdin); "
        'print(r["data"]["session_token"]) if "data" in r else '
        'sys.exit("login failed: " + r["errors"][0]["message"])\')',
    ]
    lines += [f"curl -s -H \"Authorization: Bearer $JWT\" '{base}{uri}'" for uri in uris]
    click.echo("\n".join(lines))


HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


@click.command()
@click.argument("method")
@click.argument("uri")
@token_key_options
@click.option("--body", type=click.File("rb"), default=None, help="File holding the body.")
@click.option("--curl", "as_curl", is_flag=True, help="Print curl -H options.")
def sign(
    method: str,
    uri: str,
    token_id: str,
    token_key_stdin: bool,
    token_key: str | None,
    body: Any,
    as_curl: bool,
) -> None:
    """Print the three headers of a signed request for METHOD and URI (path?query)."""
    if method not in HTTP_METHODS:
        fail(f"METHOD {method!r} must be one of {', '.join(HTTP_METHODS)}, as it is sent")
    if not uri.startswith("/"):
        fail(f"URI {uri!r} must start with '/': the path (and ?query) as it is sent")
    date = request_date()
    key = read_token_key(token_key_stdin, token_key)
    signature = sign_request(key, method, uri, date, body.read() if body else b"")
    headers = {
        "Authorization": f"svcsignature {token_id}",
        "RequestDate": date,
        "Signature": signature,
    }
    if as_curl:
        click.echo(" ".join(f"-H '{k}: {v}'" for k, v in headers.items()))
    else:
        click.echo(json.dumps(headers, indent=2))
