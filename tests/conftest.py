"""Test harness: every test runs against SQLite and PostgreSQL, on a fresh migrated database,
and every HTTP response it sees is validated against the served OpenAPI document."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import io
import json
import logging
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit, urlunsplit

import argon2
import asyncpg
import fastjsonschema
import httpx2 as httpx
import hypothesis
import pytest
from click.testing import CliRunner, Result
from coredis import Redis
from playwright.sync_api import Browser, sync_playwright
from starlette.testclient import TestClient

from graphsvc import crypto
from graphsvc.accounts import tokens, users
from graphsvc.api.app import App, create_app
from graphsvc.api.openapi import build_openapi
from graphsvc.cli import main as cli_main
from graphsvc.crypto import KeyBox
from graphsvc.demo.dataset import DemoResult, create_demo
from graphsvc.ingest.run import IngestResult, ingest_files
from graphsvc.logs import JsonLines
from graphsvc.settings import Secret, Settings
from graphsvc.signatures import sign_request
from graphsvc.store.data_version import READ_DATA_VERSION
from graphsvc.store.db import (
    Connection,
    MissingDatabase,
    asyncpg_dsn,
    create_missing_database,
    run_in_transaction,
)
from graphsvc.store.migrate import upgrade_schema

T = TypeVar("T")


def with_database(url: str, name: str) -> str:
    """The same server URL naming another database (the URL must name one)."""
    base, _, rest = url.rpartition("/")
    _, question, query = rest.partition("?")
    return f"{base}/{name}{question}{query}"


POSTGRES_URL = os.environ.get(
    "GRAPHSVC_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
# How every skip (or failure) for want of PostgreSQL begins: the terminal summary counts them.
POSTGRES_UNAVAILABLE = "PostgreSQL unavailable at "
# Each xdist worker (gw0, gw1, ...) empties and uses a Redis database of its own: 15, 14, ...
XDIST_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
BASE_REDIS_URL = os.environ.get("GRAPHSVC_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
REDIS_URL = with_database(
    BASE_REDIS_URL, str((int(BASE_REDIS_URL.rpartition("/")[2] or 15) - XDIST_WORKER) % 16)
)
# In CI a missing PostgreSQL or Redis fails the tests that need it instead of skipping them.
REQUIRE_SERVICES = os.environ.get("CI") == "true" or bool(
    os.environ.get("GRAPHSVC_TEST_REQUIRE_SERVICES")
)
# Real collector output, with its provenance and licence (see fixtures/README.md).
FIXTURES = Path(__file__).resolve().parent / "fixtures"
TEST_FERNET_KEY = "u9mJ5cDdQzF0bT0hC1a1m2Yc6QeCq3tYwVn4o7kXy8A="


# The files whose tests take seconds each (played quickstarts, served replicas, forked
# workers), collected first: xdist hands tests out in collection order, so the run's tail is
# the many short tests, which the workers finish together.
SLOW_FILES = (
    "test_quickstart.py",
    "test_workers.py",
    "test_upload_replicas.py",
    "test_shutdown.py",
    "test_ratelimit.py",
    "test_login_throttle.py",
    "test_replicas.py",
    "test_reference_sdk.py",
    "test_load_balancer.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name not in SLOW_FILES)


def pytest_configure(config: pytest.Config) -> None:
    """Secrets hashed in tests take argon2's cheapest parameters: a hash carries its own, so a
    login verifies one in microseconds in any process, instead of 0.2 s of CPU each."""
    crypto.password_hasher = argon2.PasswordHasher.from_parameters(argon2.profiles.CHEAPEST)
    # The property tests draw the same examples at every run, so that a run's result is the
    # code's and not the draw's (a departure of FalkorDB's drawn once took 283 s to shrink
    # and failed the run); HYPOTHESIS_PROFILE=explore draws new ones each run.
    hypothesis.settings.register_profile("suite", derandomize=True, database=None)
    hypothesis.settings.register_profile("explore")
    hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))
    # A run a shell started in the background (`pytest &`) inherits SIGINT ignored, and so
    # would the commands the tests start and then interrupt: they get Python's default back.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def masked_url(url: str) -> str:
    """The URL with its password (if any) as ***."""
    parts = urlsplit(url)
    userinfo, at, hostinfo = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hostinfo}"))


def postgres_reachable() -> str | None:
    """None when PostgreSQL answers at POSTGRES_URL, else why not. A server that answers
    without the URL's database gets it created (from its `postgres` database), if the role
    may: the tests make their own databases from a connection to that one."""
    dsn = asyncpg_dsn(POSTGRES_URL)

    async def probe() -> None:
        conn = await asyncpg.connect(dsn, timeout=3)
        await conn.close()

    async def probe_or_create() -> None:
        try:
            await probe()
        except asyncpg.InvalidCatalogNameError:
            # Every xdist worker may find it missing at once: one creates it, the others
            # find it made (or half made) by then.
            with contextlib.suppress(asyncpg.DuplicateDatabaseError, asyncpg.UniqueViolationError):
                await create_missing_database(dsn)
            await probe()

    try:
        asyncio.run(probe_or_create())
    except MissingDatabase as exc:  # the server answers, but the role may not CREATE DATABASE
        return str(exc)
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        return str(exc) or type(exc).__name__
    return None


def refuse_without_service(service: str, url: str, problem: str) -> None:
    """Skip the test, or in CI (or with GRAPHSVC_TEST_REQUIRE_SERVICES) fail it. The message
    begins `{service} unavailable at`, as `pytest_terminal_summary` looks for."""
    message = f"{service} unavailable at {masked_url(url)}: {problem}"
    if REQUIRE_SERVICES:
        pytest.fail(message)
    pytest.skip(message)


def require_postgres() -> None:
    """For a test that makes PostgreSQL databases of its own."""
    problem = postgres_reachable()
    if problem is not None:
        refuse_without_service("PostgreSQL", POSTGRES_URL, problem)


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """Why a report was skipped: its longrepr is (path, line, "Skipped: reason"), also
    when an xdist worker sent it to the controller."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple | list) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Iterator[None]:
    """Says loudly when the PostgreSQL half of the suite did not run: its skips are otherwise
    lines among the others. The outermost wrapper, so it comes after the short test summary,
    just above the counts. Runs in the xdist controller, which holds every worker's reports."""
    yield
    reasons = [
        skip_reason(report)
        for report in terminalreporter.stats.get("skipped", [])
        if isinstance(report, pytest.TestReport | pytest.CollectReport)
    ]
    ours = [reason for reason in reasons if reason.startswith(POSTGRES_UNAVAILABLE)]
    if not ours:
        return
    tried = masked_url(POSTGRES_URL)
    problems = sorted({reason.removeprefix(f"{POSTGRES_UNAVAILABLE}{tried}: ") for reason in ours})
    write = terminalreporter.write_line
    terminalreporter.write_sep("!", "PostgreSQL NOT TESTED", red=True, bold=True)
    write(
        f"POSTGRESQL NOT TESTED: {len(ours)} test(s) skipped, no usable PostgreSQL at {tried}",
        red=True,
        bold=True,
    )
    for problem in problems:
        write(f"  {problem}")
    write(
        "  To run them: start PostgreSQL there, or set GRAPHSVC_TEST_DATABASE_URL to a server "
        "and role that may create databases (postgresql://USER:PASSWORD@HOST:PORT/DBNAME; "
        "DBNAME is created if missing). GRAPHSVC_TEST_REQUIRE_SERVICES=1 makes them fail "
        "instead of skipping."
    )


def peak_memory_kib(pid: int) -> int:
    """The most memory the process has held (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def redis_reachable() -> str | None:
    async def probe() -> None:
        client = Redis.from_url(REDIS_URL, connect_timeout=2)
        await client.ping()

    try:
        asyncio.run(probe())
    except Exception as exc:  # coredis raises its own connection errors
        return str(exc) or type(exc).__name__
    return None


async def admin_sql(*statements: str) -> None:
    conn = await asyncpg.connect(asyncpg_dsn(POSTGRES_URL))
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


# What every table, column and index of the public schema is: a test that changed it (a
# downgrade, a dropped table) leaves a database that is dropped, not made again.
SCHEMA_FINGERPRINT = """
SELECT md5(string_agg(c.relname || ':' || c.relkind::text || ':' || coalesce(a.attname, '') || ':'
                      || coalesce(a.atttypid::text, ''), ',' ORDER BY c.relname, a.attnum))
FROM pg_class c
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relnamespace = 'public'::regnamespace
"""


class Snapshot:
    """A PostgreSQL template's rows, sequences and schema, to make a used copy of it again in
    place: emptying and refilling its tables takes 0.02 s where a new copy took 0.2 s and its
    drop 0.1 s on a quiet machine, and both forced a checkpoint of every database (0.77 s and
    0.42 s a test, measured in a full run of the suite)."""

    def __init__(self) -> None:
        self.fingerprint = ""
        self.tables: list[str] = []
        self.rows: dict[str, tuple[list[str], list[Any]]] = {}  # by table: columns, records
        self.sequences: list[tuple[str, int]] = []  # those used: their last value

    @classmethod
    async def take(cls, url: str) -> Snapshot:
        taken = cls()
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            taken.fingerprint = await conn.fetchval(SCHEMA_FINGERPRINT)
            taken.tables = [
                r["tablename"]
                for r in await conn.fetch(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
                )
            ]
            for table in taken.tables:
                columns = [
                    r["attname"]
                    for r in await conn.fetch(
                        "SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass"
                        " AND attnum > 0 AND NOT attisdropped AND attgenerated = ''"
                        " ORDER BY attnum",
                        f'public."{table}"',
                    )
                ]
                listed = ", ".join(f'"{c}"' for c in columns)
                records = await conn.fetch(f'SELECT {listed} FROM public."{table}"')
                if records:
                    taken.rows[table] = (columns, [tuple(r) for r in records])
            taken.sequences = [
                (r["name"], r["last_value"])
                for r in await conn.fetch(
                    "SELECT format('%I.%I', schemaname, sequencename) AS name, last_value"
                    " FROM pg_sequences WHERE schemaname = 'public' AND last_value IS NOT NULL"
                )
            ]
        finally:
            await conn.close()
        return taken

    async def restore(self, url: str) -> bool:
        """The database as the template was, if its schema is unchanged; False otherwise
        (or if anything failed: the caller drops it)."""
        try:
            conn = await asyncpg.connect(asyncpg_dsn(url))
        except Exception:
            return False
        try:
            # What the test left connected (a server it started) is cut off, as a drop WITH
            # (FORCE) would; the wait below covers the backends still ending.
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            if await conn.fetchval(SCHEMA_FINGERPRINT) != self.fingerprint:
                return False
            async with conn.transaction():
                await conn.execute("SET LOCAL lock_timeout = '10s'")
                # The template's rows hold their own foreign keys: no order to put them back in.
                await conn.execute("SET LOCAL session_replication_role = replica")
                listed = ", ".join(f'public."{t}"' for t in self.tables)
                await conn.execute(f"TRUNCATE {listed} RESTART IDENTITY")
                for table, (columns, records) in self.rows.items():
                    await conn.copy_records_to_table(
                        table, records=records, columns=columns, schema_name="public"
                    )
                for name, value in self.sequences:
                    await conn.execute("SELECT setval($1::regclass, $2)", name, value)
            return True
        except Exception:
            return False
        finally:
            await conn.close()


class Templates:
    """Per test process, two templates on each store, each made when first asked for: the
    migrated schema, and the schema with the demo dataset loaded. Each test gets a copy: on
    SQLite a copy of the file; on PostgreSQL a database copied from the template once, and
    made again from its `Snapshot` for the next test."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.sqlite_templates: dict[str, Path] = {}
        self.postgres_templates: dict[str, str] = {}
        self.postgres_snapshots: dict[str, Snapshot] = {}
        self.postgres_unused: dict[str, list[str]] = {"schema": [], "demo": []}
        self.postgres_error: str | None = None
        self.created: list[str] = []
        self.demos: dict[str, DemoResult] = {}  # what loading the demo answered, by store

    def sqlite_template(self, kind: str) -> Path:
        if kind not in self.sqlite_templates:
            path = self.folder / f"{kind}.sqlite3"
            if kind == "demo":
                shutil.copy(self.sqlite_template("schema"), path)
                self.load_demo(f"sqlite:///{path}", "sqlite")
            else:
                upgrade_schema(f"sqlite:///{path}")
            self.sqlite_templates[kind] = path
        return self.sqlite_templates[kind]

    def sqlite_copy(self, target: Path, kind: str = "schema") -> str:
        shutil.copy(self.sqlite_template(kind), target)
        return f"sqlite:///{target}"

    def postgres_template(self, kind: str) -> str:
        if self.postgres_error is None and not self.postgres_templates:
            self.postgres_error = postgres_reachable()
        if self.postgres_error is not None:
            refuse_without_service("PostgreSQL", POSTGRES_URL, self.postgres_error)
        if kind not in self.postgres_templates:
            name = f"graphsvc_tpl_{kind}_{os.getpid()}"
            made = f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name}"
            if kind == "demo":
                made = (made[0], f"{made[1]} TEMPLATE {self.postgres_template('schema')}")
            asyncio.run(admin_sql(*made))
            self.postgres_templates[kind] = name
            url = with_database(POSTGRES_URL, name)
            if kind == "demo":
                self.load_demo(url, "postgresql")
            else:
                upgrade_schema(url)
            self.postgres_snapshots[kind] = asyncio.run(Snapshot.take(url))
        return self.postgres_templates[kind]

    def postgres_database(self, kind: str) -> str:
        """A database as the template of `kind` is: one a test used and that was made again,
        or a new copy."""
        if self.postgres_unused[kind]:
            return with_database(POSTGRES_URL, self.postgres_unused[kind].pop())
        return self.postgres_copy(kind)

    def give_back_postgres(self, url: str, kind: str) -> None:
        """A used database made as its template again for the next test, or dropped."""
        if asyncio.run(self.postgres_snapshots[kind].restore(url)):
            self.postgres_unused[kind].append(url.rpartition("/")[2])
        else:
            self.drop_postgres_copy(url)

    def postgres_copy(self, kind: str = "schema") -> str:
        template = self.postgres_template(kind)
        name = f"graphsvc_t_{os.getpid()}_{uuid.uuid4().hex[:10]}"
        # FILE_COPY: 0.12 s a copy and 0.08 s its drop, against 0.39 s and 0.15 s for the
        # default WAL_LOG, measured on the schema template (the suite makes hundreds).
        asyncio.run(admin_sql(f"CREATE DATABASE {name} TEMPLATE {template} STRATEGY FILE_COPY"))
        self.created.append(name)
        return with_database(POSTGRES_URL, name)

    def drop_postgres_copy(self, url: str) -> None:
        name = url.rpartition("/")[2]
        asyncio.run(admin_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        self.created.remove(name)

    def load_demo(self, url: str, store: str) -> None:
        keys = KeyBox(TEST_FERNET_KEY.encode())
        self.demos[store] = asyncio.run(
            run_in_transaction(url, lambda conn: create_demo(conn, keys, DEMO_SECRET))
        )

    def drop_all(self) -> None:
        """The templates, and any copy a test made without the `database_url` fixture."""
        names = [*self.created, *self.postgres_templates.values()]
        if names:
            asyncio.run(admin_sql(*(f"DROP DATABASE IF EXISTS {n} WITH (FORCE)" for n in names)))


DEMO_SECRET = "demo-secret-0123"


# Every secret the tests give out by name; no log line of the whole run may hold one.
NAMED_SECRETS = (
    TEST_FERNET_KEY,
    "test-jwt-signing-key-of-sufficient-length-0123456789",
    "served-test-jwt-secret-of-enough-length-0123456789",
    "admin-secret",
    "demo-secret-0123",
    "worker-secret-1",
    "another-secret-2",
    "brand-new-secret-3",
    "a-piped-secret-123",
    "pw-0123456789",
    "right-secret",
    "sdk-test-secret",
    "scrape-token-0123456789",
)


@pytest.fixture(scope="session", autouse=True)
def no_secret_in_any_log() -> Iterator[None]:
    """Keeps every graphsvc log line of the run (at info and above, as served) and fails
    the run if any holds a secret a test gave out."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JsonLines())
    logger = logging.getLogger("graphsvc")
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield
    logger.removeHandler(handler)
    logger.setLevel(previous)
    text = buffer.getvalue()
    leaked = [secret for secret in NAMED_SECRETS if secret in text]
    assert not leaked, f"secrets in the logs of this run: {leaked}"


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Templates]:
    made = Templates(tmp_path_factory.mktemp("templates"))
    yield made
    made.drop_all()


@pytest.fixture
def redis_url() -> str:
    """A Redis database of its own, emptied before the test."""
    problem = redis_reachable()
    if problem is not None:
        refuse_without_service("Redis", REDIS_URL, problem)

    async def flush() -> None:
        client = Redis.from_url(REDIS_URL)
        await client.flushdb()

    asyncio.run(flush())
    return REDIS_URL


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> str:
    """Which store the test runs on: every test that takes a database runs on both."""
    param: str = request.param
    return param


@pytest.fixture
def database_url(
    request: pytest.FixtureRequest, store: str, templates: Templates, tmp_path: Path
) -> str:
    """A fresh migrated database; with the demo loaded when the test asks for `demo_env`."""
    kind = "demo" if "demo_env" in request.fixturenames else "schema"
    if store == "sqlite":
        return templates.sqlite_copy(tmp_path / "graphsvc.sqlite3", kind)
    url = templates.postgres_database(kind)
    request.addfinalizer(lambda: templates.give_back_postgres(url, kind))
    return url


# --- OpenAPI validation -------------------------------------------------------------------

OPENAPI = build_openapi()
PATH_PATTERNS = [
    (re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"), template)
    for template in OPENAPI["paths"]
]


def documented_response(method: str, path: str, status: int) -> dict[str, Any]:
    """The documented answer (its content and headers) of a status of a request."""
    error = {"$ref": "#/components/schemas/ErrorBody"}
    template = next((t for p, t in PATH_PATTERNS if p.match(path)), None)
    if template is None:  # no such route: the error body, 404 (or 429 before routing)
        assert status in (404, 429), f"{path} is not in the OpenAPI document"
        return {"content": {"application/json": {"schema": error}}}
    operation = OPENAPI["paths"][template].get(method.lower())
    if operation is None and status == 405:  # a method the path lacks has no operation
        return {"content": {"application/json": {"schema": error}}}
    assert operation is not None, f"{method} {template} is not in the OpenAPI document"
    response = operation["responses"].get(str(status))
    assert response is not None, f"{method} {template} does not document status {status}"
    if "$ref" in response:
        response = OPENAPI["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    documented: dict[str, Any] = response
    return documented


def check_against_openapi(method: str, path: str, response: httpx.Response) -> None:
    documented = documented_response(method, path, response.status_code)
    for name in documented.get("headers", {}):
        assert name.lower() in response.headers, f"{method} {path}: no {name} header"
    if "content" not in documented:  # a 304
        assert response.content == b"", f"{method} {path} {response.status_code} has a body"
        assert "content-length" not in response.headers
        return
    sent_type = response.headers["content-type"]
    # The documented media type the answer's is (a download documents several).
    matching = [
        (media_type, content)
        for media_type, content in documented["content"].items()
        if sent_type == media_type
        or (media_type == "application/json" and sent_type.startswith("application/json"))
        or (media_type.endswith("/*") and sent_type.startswith(media_type[:-1]))
    ]
    assert matching, f"{method} {path}: {sent_type} is not documented"
    media_type, content = matching[0]
    if media_type != "application/json":  # the metrics' text, a page: no JSON to validate
        return
    try:
        compiled_schema(json.dumps(content["schema"], sort_keys=True))(response.json())
    except fastjsonschema.JsonSchemaValueException as error:
        raise AssertionError(
            f"{method} {path} {response.status_code} breaks the OpenAPI document: {error}"
        ) from None


# jsonschema took 22.7 ms to validate a list of 200 entities and fastjsonschema 1.0 ms: every
# response of the suite is validated, a third of the time of the tests that list most.
# The document's keywords are all draft 7's (fastjsonschema's); its formats as jsonschema's
# format checker read them (int32, int64 and binary: not checked).
FORMATS: dict[str, Any] = {
    "uuid": r"^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$",
    "int32": "",
    "int64": "",
    "binary": "",
}


@functools.cache
def compiled_schema(schema: str) -> Callable[[Any], Any]:
    """A validator of one documented schema (as JSON), compiled once a test process."""
    validate: Callable[[Any], Any] = fastjsonschema.compile(
        {**json.loads(schema), "components": OPENAPI["components"]},
        formats=FORMATS,
        use_default=False,
    )
    return validate


# --- the environment a test drives --------------------------------------------------------


class Env:
    def __init__(self, settings: Settings, client: TestClient) -> None:
        self.settings = settings
        self.client = client
        self.keys = KeyBox(settings.resolved_token_encryption_key())
        self.url = settings.resolved_database_url()
        self.token = tokens.CreatedToken("", "", None)

    def create_admin(self) -> None:
        self.token = self.user_with_token("admin", "Administrator", secret="admin-secret")

    def cli(self, *args: str, stdin: str | None = None) -> Result:
        """A `graphsvc` command on this env's store, in process."""
        environment = {
            "GRAPHSVC_DATABASE_URL": self.url,
            "GRAPHSVC_DATA_DIR": str(self.settings.data_dir),
            "GRAPHSVC_TOKEN_ENCRYPTION_KEY": TEST_FERNET_KEY,
        }
        done = CliRunner().invoke(cli_main, list(args), env=environment, input=stdin)
        self.wait_until_the_app_knows()
        return done

    def run_in_transaction(self, work: Callable[[Connection], Awaitable[T]]) -> T:
        """`work` in one write transaction on a connection of its own, as another process
        writes; the app knows of it when this returns."""
        done = asyncio.run(run_in_transaction(self.url, work))
        self.wait_until_the_app_knows()
        return done

    def wait_until_the_app_knows(self) -> None:
        """Wait until the app knows the store's data version. PostgreSQL tells it of another
        connection's commit by NOTIFY, a moment after the commit: a request sent before then
        may be answered from memory as it was (tests/test_answers.py tests that lag itself).
        SQLite's version is read at each request."""
        if not self.url.startswith("postgresql"):
            return
        version = asyncio.run(read_store_version(self.url))
        app = cast(App, self.client.app)
        wait_until(
            lambda: (app.db.data_version() or 0) >= version,
            timeout=10,
            what=f"the app to be told of data version {version}",
        )

    def user_with_token(
        self,
        name: str,
        role: str,
        disabled: bool = False,
        secret: str | None = None,
    ) -> tokens.CreatedToken:
        async def work(conn: Connection) -> tokens.CreatedToken:
            await users.create_user(conn, name, role, secret, disabled)
            return await tokens.create_user_token(conn, self.keys, name)

        return self.run_in_transaction(work)

    def request(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str | bytes] | None = None,
        content: bytes | None = None,
        validate: bool = True,
    ) -> httpx.Response:
        # Values may be bytes (raw header bytes a test sends), which httpx takes as they are.
        sent = cast(Mapping[str, str], headers or {})
        response = self.client.request(method, path, headers=sent, content=content)
        assert response.headers.get("requestid"), "every response carries RequestID"
        if validate:
            check_against_openapi(method, path.split("?", 1)[0], response)
        return response

    def signed_headers(
        self,
        method: str,
        uri: str,
        token: tokens.CreatedToken | None = None,
        date: datetime | None = None,
        body: bytes = b"",
    ) -> dict[str, str]:
        return signed_headers(token or self.token, method, uri, date, body)

    def get(
        self,
        uri: str,
        token: tokens.CreatedToken | None = None,
        headers: Mapping[str, str | bytes] | None = None,
    ) -> httpx.Response:
        """A GET signed with the admin token (or `token`) over the exact URI sent."""
        return self.request(
            "GET", uri, {**self.signed_headers("GET", uri, token), **(headers or {})}
        )

    def send_login(
        self, username: str, secret: str, headers: Mapping[str, str] | None = None
    ) -> httpx.Response:
        body = b'{"login_method": "secret", "username": "%s", "secret": "%s"}' % (
            username.encode(),
            secret.encode(),
        )
        return self.request("POST", "/api/v2/login", headers, content=body)

    def login(self, username: str = "admin", secret: str = "admin-secret") -> str:
        """A session's JWT; the login must succeed."""
        response = self.send_login(username, secret)
        assert response.status_code == 200, response.text
        jwt: str = response.json()["data"]["session_token"]
        return jwt


def signed_headers(
    token: tokens.CreatedToken,
    method: str,
    uri: str,
    date: datetime | str | None = None,
    body: bytes = b"",
) -> dict[str, str]:
    """The three headers of a request signed with `token`, dated now, at `date`, or with
    `date` as the RequestDate text itself (to send offsets and forms as written)."""
    if not isinstance(date, str):
        date = (date or datetime.now(UTC)).isoformat().replace("+00:00", "Z")
    return {
        "Authorization": f"svcsignature {token.id}",
        "RequestDate": date,
        "Signature": sign_request(token.key, method, uri, date, body),
    }


def ingest(env: Env, *paths: Path) -> IngestResult:
    """Ingest files as one run, in one transaction, as `graphsvc ingest` does."""
    return env.run_in_transaction(lambda conn: ingest_files(conn, list(paths)))


async def read_store_version(url: str) -> int:
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        return int(await connection.fetchval(READ_DATA_VERSION))
    finally:
        await connection.close()


def wait_until(
    predicate: Callable[[], T | None], timeout: float = 30.0, what: str = "the condition"
) -> T:
    """Wait for an event instead of sleeping for a guessed time: poll `predicate` (at first
    every few milliseconds, then every 0.05 s at most) until it answers something true, and
    return that. Past `timeout` seconds the test fails, naming `what` it waited for. A loaded
    machine only makes it wait longer, never fail early; a quick one waits no longer than
    the event takes."""
    deadline = time.monotonic() + timeout
    pause = 0.002
    while not (found := predicate()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}, in vain")
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    return found


def tcp_sockets_of(pid: int) -> list[tuple[tuple[str, int], tuple[str, int], int, int]]:
    """The IPv4 TCP sockets process `pid` holds open (Linux /proc), each as its local and
    remote address, its state (1: established, 10: listening) and the bytes received that
    the process has not read yet."""
    held = set()
    with contextlib.suppress(OSError):  # the process is gone: it holds none
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):  # closed meanwhile
                held.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    if not held:
        return []

    def address(text: str) -> tuple[str, int]:
        host, port = text.split(":")
        return socket.inet_ntoa(struct.pack("<I", int(host, 16))), int(port, 16)

    found = []
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if f"socket:[{fields[9]}]" in held:
            unread = int(fields[4].partition(":")[2], 16)
            found.append((address(fields[1]), address(fields[2]), int(fields[3], 16), unread))
    return found


def has_read_all_sent(pid: int, clients: list[socket.socket]) -> bool:
    """Whether process `pid` (a served one) has accepted each of these clients' connections
    and read everything they sent so far: what was sent has reached the server's code."""
    ends = {client.getsockname() for client in clients}
    read = {remote for _, remote, _, unread in tcp_sockets_of(pid) if unread == 0}
    return ends <= read


def listens(pid: int, port: int) -> bool:
    """Whether process `pid` still holds a socket listening on `port`."""
    return any(local[1] == port and state == 10 for local, _, state, _ in tcp_sockets_of(pid))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def server_environment(database_url: str, folder: Path, **settings: str) -> dict[str, str]:
    """GRAPHSVC_* variables for a process of the test's own: this store, the test's keys, and
    any settings given by name (header_timeout_seconds="1")."""
    temporary = folder / "tmp"  # its own: a process clears the dead processes' job folders
    temporary.mkdir(parents=True, exist_ok=True)
    return {
        "TMPDIR": str(temporary),
        "GRAPHSVC_DATABASE_URL": database_url,
        "GRAPHSVC_DATA_DIR": str(folder / "data"),
        "GRAPHSVC_TOKEN_ENCRYPTION_KEY": TEST_FERNET_KEY,
        "GRAPHSVC_JWT_SECRET": "served-test-jwt-secret-of-enough-length-0123456789",
        **{f"GRAPHSVC_{name.upper()}": value for name, value in settings.items()},
    }


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """The system's Chromium (Debian's package), driven by Playwright, for one test.
    Playwright's synchronous API runs an event loop in this thread while it is open, so it
    opens after a test's own asyncio work (the store's copy, an ingest) and closes before
    that of the fixtures' teardown."""
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        refuse_without_service("Chromium", "chromium", "not on PATH (apt-get install chromium)")
    assert executable is not None
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable)
        try:
            yield launched
        finally:
            launched.close()


@contextlib.contextmanager
def served(
    environment: dict[str, str],
    *arguments: str,
    preexec_fn: Callable[[], None] | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A `graphsvc serve` process of the test's own with these GRAPHSVC_* variables (and
    any further `serve` arguments); yields its base URL and the process once /health
    answers, and stops it afterwards. `preexec_fn` runs in the child before it starts.

    Its standard error goes to a file, `process.stderr` once it has stopped: a pipe nobody
    reads while it serves fills at 64 KiB (a slow start's request lines at level info),
    and a server blocked writing to it never stops."""
    port = free_port()
    logged = tempfile.TemporaryFile()  # noqa: SIM115 - open past the block, for the test to read
    process = subprocess.Popen(
        [sys.executable, "-m", "graphsvc", "serve", "--port", str(port), *arguments],
        env={**os.environ, "GRAPHSVC_LOG_LEVEL": "warning", **environment},
        stdout=subprocess.DEVNULL,
        stderr=logged,
        preexec_fn=preexec_fn,
        start_new_session=True,  # its own process group, workers included (see below)
    )
    base = f"http://127.0.0.1:{port}"

    def said() -> str:
        logged.seek(0)
        return logged.read().decode(errors="replace")

    def healthy() -> bool:
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        assert process.poll() is None, said()
        return False

    try:
        wait_until(healthy, timeout=30, what=f"{base}/health to answer 200")
        yield base, process
    finally:
        process.terminate()
        # Within the shutdown grace (30 s by default): on a loaded machine (CI with other
        # test processes) a supervisor stopping two workers took over 10 s.
        try:
            process.wait(35)
        except subprocess.TimeoutExpired:
            # The test fails, but leaves no server behind: one that outlived its grace once
            # kept serving, with its workers, for an hour after the suite.
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
        finally:
            logged.seek(0)
            process.stderr = logged  # what it wrote, for the test to read


def make_settings(tmp_path: Path, database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path / "data",
        "database_url": database_url,
        "token_encryption_key": Secret(TEST_FERNET_KEY),
        "jwt_secret": Secret("test-jwt-signing-key-of-sufficient-length-0123456789"),
        # Off unless a test turns them on: limits would refuse, a token cache would delay the
        # revocations that tests make and check at once, and an ingest worker would poll the
        # store of every test.
        "rate_limit_per_second": 0,
        "token_cache_seconds": 0,
        "ingester": False,
    }
    return Settings(**{**values, **overrides})


@pytest.fixture
def make_env(database_url: str, tmp_path: Path) -> Iterator[Callable[..., Env]]:
    """Builds an Env with settings overrides; the app runs until the test ends."""
    clients: list[TestClient] = []

    def build(**overrides: Any) -> Env:
        settings = make_settings(tmp_path, database_url, **overrides)
        client = TestClient(create_app(settings), raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return Env(settings, client)

    yield build
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def uploading(make_env: Callable[..., Env]) -> tuple[Env, tokens.CreatedToken]:
    """A store with an admin, a worker that looks for jobs often, and an Upload-Only token."""
    made = make_env(ingester=True, ingest_poll_seconds=0.05)
    made.create_admin()
    return made, made.user_with_token("collector", "Upload-Only")


@pytest.fixture
def env(make_env: Callable[..., Env]) -> Env:
    made = make_env()
    made.create_admin()
    return made


@pytest.fixture
def demo_env(
    make_env: Callable[..., Env], templates: Templates, store: str
) -> tuple[Env, DemoResult]:
    """The demo dataset (a copy of its template), with the demo's Administrator token as the
    env's token."""
    made = make_env()
    result = copy.deepcopy(templates.demos[store])
    made.token = tokens.CreatedToken(result.token_id, result.token_key, None)
    return made, result
