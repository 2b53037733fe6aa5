"""Serving and the demo: serve, db upgrade, demo, examples, sign."""

from __future__ import annotations

import asyncio
import contextlib
import functools
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
    run_command_transaction,
)
from graphsvc.logs import name_worker
from graphsvc.settings import Settings, SettingsFileError
from graphsvc.signals import STOP_SIGNALS
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
    check_before_start(settings, host, port)
    migrate(settings)  # once, before any worker starts
    # Each connection holds a file; keep a margin for the database, Redis and logs.
    open_files = raise_open_file_limit()
    max_connections = min(settings.max_connections, open_files - 64)
    # Behind proxies every connection comes from one of them: the cap would refuse clients;
    # bodies still arriving count per forwarded address instead.
    per_client = settings.max_connections_per_client if settings.trusted_proxies == 0 else None
    protocol = GuardedHttpProtocol.configure(
        settings.header_timeout_seconds,
        max_connections,
        per_client,
        max_waiting_connections=settings.max_waiting_connections,
        trusted_proxies=settings.trusted_proxies,
        max_waiting_per_forwarded=settings.max_connections_per_client,
    )
    announce(settings, host, port, max_connections, count)
    serve_here = functools.partial(run_worker, settings, host, port, protocol)
    if count == 1:
        serve_here(None)
    else:
        from graphsvc.api.metrics import shared_metrics_folder

        with shared_metrics_folder() as forget_worker:
            supervise_workers(serve_here, host, port, count, forget_worker)


def check_before_start(settings: Settings, host: str, port: int) -> None:
    """Refuse, before the start line, what would fail once serving: the key files, the
    address, and a Redis that answers graphsvc with an error (one that does not answer is
    warned of once it serves: limits then count per process)."""
    try:
        settings.resolved_token_encryption_key()
        settings.resolved_jwt_secret()
    except SettingsFileError as exc:
        fail(str(exc))
    check_address(host, port)
    if settings.redis_url:
        from graphsvc.api.ratelimit import connect_redis, find_redis_problem

        problem = asyncio.run(find_redis_problem(connect_redis(settings.redis_url)))
        if problem is not None and problem[0]:
            fail(
                f"GRAPHSVC_REDIS_URL={database.redact_url(settings.redis_url)}: Redis refuses "
                f"graphsvc's requests: {problem[1]}"
            )


def check_address(host: str, port: int) -> None:
    """Whether this process may listen on host:port now (a port in use is refused here,
    not after the start line)."""
    try:
        family, kind, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        fail(
            f"--host {host} --port {port}: cannot listen there: {exc.strerror or exc}; stop "
            "what uses the port, or choose another with --port"
        )


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

    app = create_app(settings)

    class StoppingServer(uvicorn.Server):
        """uvicorn's server, which tells the app when its shutdown grace begins."""

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            app.stopping.begin(settings.shutdown_grace_seconds)
            await super().shutdown(sockets)

    config = uvicorn.Config(
        app,
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
    server = StoppingServer(config)
    server.run(sockets=None if sock is None else [sock])
    if not server.started:
        sys.exit(1)


def supervise_workers(
    serve_here: Callable[[socket.socket], None],
    host: str,
    port: int,
    count: int,
    forget_worker: Callable[[int], None],
) -> None:
    """Fork `count` workers, each listening on the port with SO_REUSEPORT, so that the
    kernel spreads new connections evenly over them (one socket shared by all was handed
    mostly to one worker: 40 connections in a row reached the same one); a worker that dies
    is replaced (the metrics told to forget the dead one: `forget_worker`), and SIGTERM or
    SIGINT stops them all, each finishing its requests under way."""
    reserved = reuse_port_socket(host, port)  # bound, not listening: fails early
    children: dict[int, int] = {}  # pid -> the worker's number, which its lines carry
    stopping = False

    def start_worker(number: int) -> None:
        # The child must not run the supervisor's `stop` (a replacement worker stopped while
        # it started kept serving, its supervisor waiting on it): stop signals wait, blocked,
        # until the child has its own handlers.
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # until it serves: see run_worker
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
            reserved.close()
            name_worker(number)
            log.info("worker %d starting", number)
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
        children[pid] = number
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):  # (the loop below may be changing it)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    for number in range(1, count + 1):
        start_worker(number)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        number = children.pop(pid, 0)
        forget_worker(pid)  # its gauges (connections in use...) no longer count
        if not stopping:
            log.warning(
                "worker %d (pid %d) exited (status %d); starting another",
                number,
                pid,
                os.waitstatus_to_exitcode(status),
            )
            time.sleep(1)  # a worker that cannot start must not spin
            if not stopping:  # a stop during the pause: no worker it did not stop
                start_worker(number)
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
    applied = migrate(settings)
    shown = database.redact_url(settings.resolved_database_url())
    if applied:
        plural = "" if len(applied) == 1 else "s"
        click.echo(
            f"migrated the schema at {shown} to revision {applied[-1]} "
            f"({len(applied)} migration{plural}: {', '.join(applied)})"
        )
    else:
        click.echo(f"the schema at {shown} was up to date already")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def demo(as_json: bool) -> None:
    """Load the demo dataset into an empty store with an Administrator and an API token; on a
    store that holds it already, print new credentials for it (the secret is set anew)."""
    from graphsvc.demo.dataset import open_demo

    settings = load_settings()
    secret = secrets.token_urlsafe(12)
    result, loaded = run_command_transaction(
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
