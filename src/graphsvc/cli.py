"""The `graphsvc` command: serve, db upgrade, demo, ingest, user/token/saml/client create, sign."""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec
from pydantic import ValidationError

from graphsvc import service, wire
from graphsvc.crypto import KeyBox, sign_request
from graphsvc.errors import ApiError
from graphsvc.ingest.records import IngestError
from graphsvc.ingest.sources import Progress, Source
from graphsvc.settings import Settings, describe_settings_error
from graphsvc.store import db as database
from graphsvc.store.migrate import upgrade_schema

T = TypeVar("T")


def fail(message: str) -> None:
    click.echo(f"graphsvc: error: {message}", err=True)
    sys.exit(1)


def load_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        fail(f"invalid configuration: {describe_settings_error(exc)}")
        raise


def migrate(settings: Settings) -> None:
    """Create the PostgreSQL database if it is missing (and may be), then bring the schema to
    the newest version."""
    url = settings.resolved_database_url()
    shown = database.redact_url(url)
    try:
        if asyncio.run(database.create_missing_database(url)):
            click.echo(f"created the database {shown}", err=True)
        upgrade_schema(url)
    except database.MissingDatabase as exc:
        fail(str(exc))
    except Exception as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        fail(f"cannot migrate the database at {shown}: {reason}")


def run_in_transaction(
    settings: Settings, work: Callable[[database.Connection], Awaitable[T]]
) -> T:
    """Migrate, then run `work` in one write transaction: all of it lands or none of it."""
    migrate(settings)
    try:
        return asyncio.run(database.run_in_transaction(settings.resolved_database_url(), work))
    except ApiError as exc:
        fail(f"{exc.context}: {exc.message}")
    except IngestError as exc:
        fail(f"{exc} (nothing was written)")
    except database.DATABASE_ERRORS as exc:
        fail(f"{database.describe_database_error(exc)} (nothing was written)")
    raise AssertionError("unreachable")


def read_stdin_secret(option: str) -> str:
    """The first line of standard input, for options that must stay off the command line."""
    secret = sys.stdin.readline().rstrip("\r\n")
    if not secret:
        fail(f"{option}: standard input gave no secret (pipe it in, one line)")
    return secret


def emit(as_json: bool, data: Any, text: str) -> None:
    click.echo(msgspec.json.encode(data).decode() if as_json else text)


def keys_of(settings: Settings) -> KeyBox:
    return KeyBox(settings.resolved_token_encryption_key())


class Commands(click.Group):
    """Every failure is one `graphsvc: error:` line and exit status 1, usage errors too
    (a bad option value, a missing file): click would print three lines and exit 2."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            return super().main(*args, **kwargs)
        except click.ClickException as exc:
            fail(exc.format_message())
        except click.exceptions.Abort:
            fail("aborted")
        return None


@click.group(cls=Commands)
@click.version_option(package_name="graphsvc", message="graphsvc %(version)s")
def main() -> None:
    """graphsvc: a server of the Graph Analysis Service API v2."""


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
def serve(host: str, port: int) -> None:
    """Run migrations if needed, then serve the API."""
    import uvicorn

    from graphsvc.api.app import create_app
    from graphsvc.api.server import GuardedHttpProtocol, raise_open_file_limit

    settings = load_settings()
    migrate(settings)
    # Each connection holds a file; keep a margin for the database, Redis and logs.
    open_files = raise_open_file_limit()
    protocol = GuardedHttpProtocol.configure(
        settings.header_timeout_seconds, min(settings.max_connections, open_files - 64)
    )
    uvicorn.run(
        create_app(settings),
        host=host,
        port=port,
        log_level=settings.log_level,
        proxy_headers=False,
        http=protocol,
    )


@main.group()
def db() -> None:
    """Database schema."""


@db.command()
def upgrade() -> None:
    """Bring the schema to the newest version."""
    settings = load_settings()
    migrate(settings)
    click.echo(f"schema is up to date at {database.redact_url(settings.resolved_database_url())}")


@main.command()
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


class IngestProgress:
    """A progress bar on a terminal; elsewhere a plain line per file and every few seconds."""

    def __init__(self, total: int) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.bar = (
            click.progressbar(length=self.total, label="ingesting", file=sys.stderr)
            if sys.stderr.isatty()
            else None
        )
        self.last_line = time.monotonic()  # the first line comes after five seconds

    def __call__(self, source: Source) -> Progress:
        if self.bar is None:
            click.echo(f"reading {source.label} ({source.size:,} bytes)", err=True)

        def advance(count: int) -> None:
            self.done += count
            if self.bar is not None:
                self.bar.update(count)
            elif time.monotonic() - self.last_line > 5:
                self.last_line = time.monotonic()
                click.echo(f"  {100 * self.done // self.total}% of the input read", err=True)

        return advance

    def close(self) -> None:
        if self.bar is not None:
            self.bar.render_finish()


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def ingest(paths: tuple[Path, ...], as_json: bool) -> None:
    """Load collector output as one run: SharpHound and AzureHound JSON, OpenGraph JSON,
    SharpHound zips, and folders of these."""
    from graphsvc.ingest import ingest_files
    from graphsvc.ingest.sources import expand

    try:
        total = sum(s.size for s in expand(list(paths)))
    except IngestError as exc:
        fail(str(exc))
    progress = IngestProgress(total)
    try:
        result = run_in_transaction(
            load_settings(), lambda conn: ingest_files(conn, paths, progress)
        )
    finally:
        progress.close()
    emit(
        as_json,
        {
            "run_id": result.run_id,
            "files": result.files,
            "nodes": result.nodes,
            "edges": result.edges,
            "created_at": result.created_at,
        },
        f"run {result.run_id}: {result.nodes} nodes, {result.edges} edges from "
        f"{len(result.files)} file(s)",
    )


@main.group()
def schema() -> None:
    """Graph schema extensions and their environment kinds."""


@schema.command("list")
@click.option("--json", "as_json", is_flag=True)
def schema_list(as_json: bool) -> None:
    """Extensions and environment kinds, with the ids the API asks for."""
    from graphsvc.store import extensions

    registered = run_in_transaction(load_settings(), extensions.list_extensions)
    data: list[dict[str, Any]] = [
        {
            "id": x.id,
            "name": x.name,
            "display_name": x.display_name,
            "version": x.version,
            "builtin": x.is_builtin,
            "environment_kinds": [
                {"id": env.kind_id, "name": env.kind, "source_kind": env.source_kind}
                for env in x.environments
            ],
        }
        for x in registered
    ]
    lines = []
    for x in data:
        lines.append(f"extension {x['id']}: {x['name']} ({x['display_name']}, {x['version']})")
        lines += [f"  environment kind {k['id']}: {k['name']}" for k in x["environment_kinds"]]
    emit(as_json, data, "\n".join(lines))


@schema.command("register")
@click.argument("definition", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
def schema_register(definition: Path, as_json: bool) -> None:
    """Register an OpenGraph schema extension from a JSON file:
    {"name", "display_name", "version", "node_kinds": [...], "relationship_kinds": [...],
    "environment_kinds": [{"kind": ..., "source_kind": ...}]}."""
    try:
        spec = msgspec.json.decode(definition.read_bytes(), type=wire.ExtensionDefinition)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        fail(f"{definition}: not an extension definition ({exc})")

    async def work(conn: database.Connection) -> int:
        try:
            return await service.register_extension(conn, spec)
        except ApiError as exc:  # named by the file, which is what the user passed
            raise ApiError(exc.status, exc.message, str(definition)) from None

    extension_id = run_in_transaction(load_settings(), work)
    emit(
        as_json,
        {"id": extension_id, "name": spec.name},
        f"extension {spec.name} registered: id {extension_id}",
    )


@main.group()
def user() -> None:
    """Users."""


@user.command("create")
@click.argument("name")
@click.option(
    "--role", required=True, help="Read-Only, Upload-Only, User, Power User or Administrator"
)
@click.option(
    "--secret-stdin",
    is_flag=True,
    help="Read the password for POST /api/v2/login from the first line of standard input.",
)
@click.option(
    "--secret",
    envvar="GRAPHSVC_USER_SECRET",
    default=None,
    help="The password itself (better: GRAPHSVC_USER_SECRET or --secret-stdin, which stay "
    "out of shell history and ps).",
)
@click.option("--disabled", is_flag=True)
@click.option("--json", "as_json", is_flag=True)
def user_create(
    name: str, role: str, secret_stdin: bool, secret: str | None, disabled: bool, as_json: bool
) -> None:
    """Create a user with a role."""
    if secret_stdin:
        secret = read_stdin_secret("--secret-stdin")
    user_id = run_in_transaction(
        load_settings(), lambda conn: service.create_user(conn, name, role, secret, disabled)
    )
    emit(
        as_json,
        {"id": user_id, "name": name, "role": role, "disabled": disabled},
        f"user {name} ({role}) created: {user_id}",
    )


@main.group()
def token() -> None:
    """API tokens for signed requests."""


@token.command("create")
@click.option("--user", "user_name", required=True)
@click.option("--name", default=None, help="A label for the token.")
@click.option("--json", "as_json", is_flag=True)
def token_create(user_name: str, name: str | None, as_json: bool) -> None:
    """Create an API token; its key is printed once and stored only encrypted."""
    settings = load_settings()
    created = run_in_transaction(
        settings, lambda conn: service.create_user_token(conn, keys_of(settings), user_name, name)
    )
    emit(
        as_json,
        {"id": created.id, "key": created.key, "user_id": created.user_id},
        f"token id:  {created.id}\ntoken key: {created.key}   (shown once; keep it)",
    )


@main.group()
def saml() -> None:
    """SAML providers."""


@saml.command("create")
@click.option("--name", required=True)
@click.option("--display-name", required=True)
@click.option("--idp-issuer-uri", required=True)
@click.option("--idp-sso-uri", required=True)
@click.option("--principal-attribute-mapping", "mappings", multiple=True)
@click.option("--json", "as_json", is_flag=True)
def saml_create(
    name: str,
    display_name: str,
    idp_issuer_uri: str,
    idp_sso_uri: str,
    mappings: tuple[str, ...],
    as_json: bool,
) -> None:
    """Register a SAML identity provider."""
    settings = load_settings()
    base = settings.public_url or "http://127.0.0.1:8000"

    async def work(conn: database.Connection) -> Any:
        provider_id = await service.create_saml_provider(
            conn, name, display_name, idp_issuer_uri, idp_sso_uri, mappings
        )
        return (await service.get_saml_provider(conn, provider_id, base)).data

    provider = run_in_transaction(settings, work)
    emit(as_json, provider, f"SAML provider {name} created: id {provider.id}")


@main.group()
def client() -> None:
    """Collection clients (Enterprise edition)."""


@client.command("create")
@click.option("--name", required=True)
@click.option("--ip-address", default="")
@click.option("--hostname", default="")
@click.option("--json", "as_json", is_flag=True)
def client_create(name: str, ip_address: str, hostname: str, as_json: bool) -> None:
    """Register a collection client with its token (the token key is printed once)."""
    settings = load_settings()
    if settings.edition != "enterprise":
        fail("collection clients are an Enterprise edition feature (GRAPHSVC_EDITION=enterprise)")

    async def work(conn: database.Connection) -> Any:
        client_id, created = await service.create_client(
            conn, keys_of(settings), name, ip_address, hostname
        )
        return (await service.get_client(conn, client_id)).data, created

    found, created = run_in_transaction(settings, work)
    data = {**msgspec.to_builtins(found), "token_key": created.key}
    emit(
        as_json,
        data,
        f"client {name} created: {found.id}\n"
        f"token id:  {created.id}\ntoken key: {created.key}   (shown once; keep it)",
    )


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


@main.command()
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
        date = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
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


@main.command()
@click.argument("method")
@click.argument("uri")
@click.option("--token-id", envvar="GRAPHSVC_TOKEN_ID", required=True)
@click.option("--token-key-stdin", is_flag=True, help="Read the token key from standard input.")
@click.option(
    "--token-key",
    envvar="GRAPHSVC_TOKEN_KEY",
    default=None,
    help="The key itself (better: GRAPHSVC_TOKEN_KEY or --token-key-stdin).",
)
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
    if token_key_stdin:
        token_key = read_stdin_secret("--token-key-stdin")
    if not token_key:
        fail("no token key: set GRAPHSVC_TOKEN_KEY or pass --token-key-stdin")
    assert token_key is not None
    date = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    signature = sign_request(token_key, method, uri, date, body.read() if body else b"")
    headers = {
        "Authorization": f"svcsignature {token_id}",
        "RequestDate": date,
        "Signature": signature,
    }
    if as_curl:
        click.echo(" ".join(f"-H '{k}: {v}'" for k, v in headers.items()))
    else:
        click.echo(json.dumps(headers, indent=2))
