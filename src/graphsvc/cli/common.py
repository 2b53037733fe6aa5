"""What every command shares: settings, one-line failures, the write transaction, the read
that writes nothing, and the `graphsvc` group itself."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import click

from graphsvc.signals import EXIT_INTERRUPTED, STOP_SIGNALS, interrupt

# The settings, logging, asyncio, the store, the ingest and the key box are
# imported where a command needs them: at the top they were 0.13 s (settings, logging and
# asyncio) and 0.3 s more of imports that `graphsvc sign`, which needs none of them, paid on
# every call.
if TYPE_CHECKING:
    from graphsvc.crypto import KeyBox
    from graphsvc.settings import Settings
    from graphsvc.store import db as database

T = TypeVar("T")


INTERRUPTED = "interrupted: the transaction was rolled back, nothing was written"
STOP_GRACE_SECONDS = 5.0


def fail(message: str, status: int = 1) -> None:
    print_error(message)
    sys.exit(status)


def fail_interrupted(message: str) -> None:
    """Exit EXIT_INTERRUPTED saying `message`, and nothing after it: asyncio is not heard
    from again. A stop that lands while a connection is being made leaves asyncpg's
    "unexpected connection_lost()" on a future nobody awaits any more, which asyncio logs
    as an error when it is collected as the process ends: a second, alarming line after the
    command said it was interrupted (seen once in CI, `graphsvc domains` stopped while it
    connected; tests/test_shutdown.py)."""
    logging.getLogger("asyncio").disabled = True
    fail(message, EXIT_INTERRUPTED)


def print_error(message: str) -> None:
    click.echo(f"graphsvc: error: {message}", err=True)


def load_settings() -> Settings:
    """The settings, with logging set up from them (audit events go to standard error)."""
    from graphsvc.logs import configure_logging
    from graphsvc.settings import (
        Settings,
        SettingsError,
        describe_settings_error,
        describe_unknown_variables,
    )

    unknown = describe_unknown_variables(os.environ)
    if unknown is not None:
        fail(f"invalid configuration: {unknown}")
    try:
        settings = Settings.from_environment()
    except SettingsError as exc:
        fail(f"invalid configuration: {describe_settings_error(exc)}")
        raise
    configure_logging(settings)
    return settings


def migrate(settings: Settings) -> list[str]:
    """Create the PostgreSQL database if it is missing (and may be), then bring the schema to
    the newest version; the revisions applied. Says which store it is when neither
    GRAPHSVC_DATABASE_URL nor GRAPHSVC_DATA_DIR chose it."""
    import asyncio

    from graphsvc.store import db as database

    url = settings.resolved_database_url()
    shown = database.redact_url(url)
    name_a_default_store(shown)
    from graphsvc.store.migrate import upgrade_schema  # alembic: 0.27 s of imports

    try:
        if asyncio.run(database.create_missing_database(url)):
            click.echo(f"created the database {shown}", err=True)
        return upgrade_schema(url)
    except database.MissingDatabase as exc:
        fail(str(exc))
    except Exception as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        fail(f"cannot migrate the database at {shown}: {reason}")
    raise AssertionError("unreachable")


def name_a_default_store(shown: str) -> None:
    """Say which store a command uses when neither GRAPHSVC_DATABASE_URL nor
    GRAPHSVC_DATA_DIR chose it."""
    if not {"GRAPHSVC_DATABASE_URL", "GRAPHSVC_DATA_DIR"} & os.environ.keys():
        click.echo(
            f"graphsvc: the store is {shown}, the default: set GRAPHSVC_DATA_DIR or "
            "GRAPHSVC_DATABASE_URL to choose one",
            err=True,
        )


def read_store(settings: Settings, work: Callable[[database.Connection], Awaitable[T]]) -> T:
    """Run `work` on a connection that only reads: no migration, no write transaction, and
    the data version left where it is, so that no server's answers or clients' tags go
    stale for a look at the store. A store that is missing, or not at this graphsvc's
    schema, is named with the command that brings it there."""
    import asyncio

    from graphsvc.store import db as database
    from graphsvc.store.migrate import head_revision, stored_revision

    url = settings.resolved_database_url()
    shown = database.redact_url(url)
    name_a_default_store(shown)
    if url.startswith("sqlite:///") and not os.path.exists(url.removeprefix("sqlite:///")):
        fail(f"no store at {shown}: `graphsvc db upgrade` creates it (or `graphsvc demo`)")

    async def checked() -> T:
        db = database.create_database(url, pool_size=1)
        await db.open()
        try:
            async with db.reading() as conn:
                stored, head = await stored_revision(conn), head_revision()
                if stored != head:
                    at = f"at revision {stored}" if stored else "without a schema"
                    fail(
                        f"the store at {shown} is {at}, and this graphsvc reads revision "
                        f"{head}: run `graphsvc db upgrade` (a server upgrades it as it starts)"
                    )
                return await work(conn)
        finally:
            await db.close()

    with failing_as_commands_do("nothing was changed"):
        try:
            return asyncio.run(checked())
        except KeyboardInterrupt:
            fail_interrupted("interrupted")
    raise AssertionError("unreachable")


@contextlib.contextmanager
def failing_as_commands_do(outcome: str) -> Iterator[None]:
    """A command's expected errors as one line each: an API error's context and message,
    an ingest's, the store's; `outcome` says what became of the command's work."""
    from graphsvc.errors import ApiError
    from graphsvc.ingest.records import IngestError
    from graphsvc.store import db as database

    try:
        yield
    except ApiError as exc:
        fail(f"{exc.context}: {exc.message}")
    except IngestError as exc:
        fail(f"{exc} ({outcome})")
    except database.database_errors() as exc:
        fail(f"{database.describe_database_error(exc)} ({outcome})")


def run_command_transaction(
    settings: Settings, work: Callable[[database.Connection], Awaitable[T]]
) -> T:
    """Migrate, then run `work` in one write transaction: all of it lands or none of it,
    the audit events it raised with it. SIGTERM, like Ctrl-C, stops it with the transaction
    rolled back."""
    import asyncio

    from graphsvc.logs import recording_audit

    migrate(settings)

    async def audited(conn: database.Connection) -> T:
        """`work`, and the audit events it raised, stored in its transaction."""
        from graphsvc.accounts.audit_log import store_audit_events

        with recording_audit() as events:
            result = await work(conn)
        await store_audit_events(conn, events, None, "", "", settings.audit_retention_days)
        return result

    with failing_as_commands_do("nothing was written"):
        try:
            return asyncio.run(run_stoppable(settings.resolved_database_url(), audited))
        except (KeyboardInterrupt, asyncio.CancelledError):
            fail_interrupted(INTERRUPTED)
    raise AssertionError("unreachable")


async def run_stoppable(url: str, work: Callable[[database.Connection], Awaitable[T]]) -> T:
    """`work` in a transaction that the first SIGTERM or SIGINT cancels (rolled back, then
    EXIT_INTERRUPTED); further signals are ignored while it stops.

    A signal that comes once `work` has finished does not cancel the commit: the command
    ends as if it had come a moment later, with the data written and said so. (Cancelling a
    COMMIT under way leaves unknown whether it landed.)

    A cancel that lands while asyncpg is between a statement's answer and its bookkeeping
    can leave the driver waiting for an answer that never comes (seen under load, about one
    stop in four). So a stop that has not ended within STOP_GRACE_SECONDS ends the process:
    the database then rolls the open transaction back itself, as it does for any client
    that goes away; the commit was never sent."""
    import asyncio

    from graphsvc.store import db as database

    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    committing = False
    signalled: list[str] = []

    def stop(name: str) -> None:
        if signalled:
            return
        signalled.append(name)
        if committing:
            return
        main.cancel()
        loop.call_later(STOP_GRACE_SECONDS, leave)

    async def work_then_commit(conn: database.Connection) -> T:
        nonlocal committing
        result = await work(conn)
        committing = True
        return result

    # A signal the command was started ignoring stays ignored (SIGINT, for a job a shell
    # started in the background).
    heeded = [s for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]
    for stopping in heeded:
        loop.add_signal_handler(stopping, stop, stopping.name)
    try:
        result = await database.run_in_transaction(url, work_then_commit)
    finally:
        for stopping in heeded:
            loop.remove_signal_handler(stopping)
    # Written: a signal from here on lets the command finish saying so (it has only its
    # answer left to print), where the default would kill it with a status that reads as
    # a failure.
    for stopping in heeded:
        signal.signal(stopping, note_late_stop)
    if signalled:
        note_late_stop(signal.Signals[signalled[0]], None)
    return result


def note_late_stop(signum: int, frame: object) -> None:
    print_error(f"{signal.Signals(signum).name} came after the commit: the data is written")


def leave() -> None:
    """Exit at once: a SystemExit here would send asyncio.run's cleanup to wait on the
    stuck statement too."""
    print_error(INTERRUPTED)
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


def read_stdin_secret(option: str) -> str:
    """The first line of standard input, for options that must stay off the command line."""
    secret = sys.stdin.readline().rstrip("\r\n")
    if not secret:
        fail(f"{option}: standard input gave no secret (pipe it in, one line)")
    return secret


def token_key_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The API token a signing command signs with: --token-id, and its key from standard
    input, GRAPHSVC_TOKEN_KEY or --token-key (read it with `read_token_key`)."""
    for option in reversed(
        [
            click.option("--token-id", envvar="GRAPHSVC_TOKEN_ID", required=True),
            click.option(
                "--token-key-stdin", is_flag=True, help="Read the token key from standard input."
            ),
            click.option(
                "--token-key",
                envvar="GRAPHSVC_TOKEN_KEY",
                default=None,
                help="The key itself (better: GRAPHSVC_TOKEN_KEY or --token-key-stdin).",
            ),
        ]
    ):
        command = option(command)
    return command


def read_token_key(token_key_stdin: bool, token_key: str | None) -> str:
    """The token key `token_key_options` took, from standard input when asked to."""
    if token_key_stdin:
        token_key = read_stdin_secret("--token-key-stdin")
    if not token_key:
        fail("no token key: set GRAPHSVC_TOKEN_KEY or pass --token-key-stdin")
    assert token_key is not None
    return token_key


def emit(as_json: bool, data: Any, text: str) -> None:
    import msgspec

    click.echo(msgspec.json.encode(data).decode() if as_json else text)


def keys_of(settings: Settings) -> KeyBox:
    from graphsvc.crypto import KeyBox
    from graphsvc.settings import SettingsFileError

    try:
        return KeyBox(settings.resolved_token_encryption_key())
    except SettingsFileError as exc:
        fail(str(exc))
        raise


class Commands(click.Group):
    """Every failure is one `graphsvc: error:` line and exit status 1, usage errors too
    (a bad option value, a missing file): click would print three lines and exit 2. A
    command stopped by SIGINT or SIGTERM exits EXIT_INTERRUPTED.

    Commands are imported when called (`lazy`: name -> module): every module at once took
    0.65 s of imports, which `graphsvc sign`, run once per request in the README, paid
    each time."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMAND_MODULES:
            return None
        module_name, _, attribute = COMMAND_MODULES[name].partition(":")
        module = importlib.import_module(module_name)
        command: click.Command = getattr(module, attribute or name.replace("-", "_"))
        return command

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        signal.signal(signal.SIGTERM, interrupt)
        try:
            return super().main(*args, **kwargs)
        except click.ClickException as exc:
            fail(exc.format_message())
        except click.exceptions.Abort as exc:
            if isinstance(exc.__context__, KeyboardInterrupt):
                fail_interrupted("interrupted")
            fail("aborted")
        return None


# Each command, in the order `graphsvc --help` lists them, and the module that defines it
# (and its function's name there, after a colon, when that is not the command's).
COMMAND_MODULES = {
    "serve": "graphsvc.cli.server",
    "db": "graphsvc.cli.server",
    "config": "graphsvc.cli.config",
    "backup": "graphsvc.cli.backup",
    "demo": "graphsvc.cli.server",
    "examples": "graphsvc.cli.signing",
    "sign": "graphsvc.cli.signing",
    "ingest": "graphsvc.cli.data",
    "upload": "graphsvc.cli.upload",
    "schema": "graphsvc.cli.data",
    "find": "graphsvc.cli.data",
    "path": "graphsvc.cli.data",
    "exposure": "graphsvc.cli.data",
    "list": "graphsvc.cli.data:entity_list",
    "query": "graphsvc.cli.query",
    "domains": "graphsvc.cli.data",
    "clear-database": "graphsvc.cli.data",
    "user": "graphsvc.cli.accounts",
    "token": "graphsvc.cli.accounts",
    "saml": "graphsvc.cli.accounts",
    "client": "graphsvc.cli.accounts",
}


@click.group(cls=Commands)
@click.version_option(package_name="graphsvc", message="graphsvc %(version)s")
def main() -> None:
    """graphsvc: a server of the Graph Analysis Service API v2."""
