"""What every command shares: settings, one-line failures, the write transaction, and the
`graphsvc` group itself."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click
import msgspec
from pydantic import ValidationError

from graphsvc.crypto import KeyBox
from graphsvc.errors import ApiError
from graphsvc.ingest.records import IngestError
from graphsvc.logs import configure_logging, recording_audit
from graphsvc.settings import Settings, describe_settings_error
from graphsvc.store import db as database
from graphsvc.store.migrate import upgrade_schema

T = TypeVar("T")


INTERRUPTED = "interrupted: the transaction was rolled back, nothing was written"
STOP_GRACE_SECONDS = 5.0


def fail(message: str) -> None:
    print_error(message)
    sys.exit(1)


def print_error(message: str) -> None:
    click.echo(f"graphsvc: error: {message}", err=True)


def load_settings() -> Settings:
    """The settings, with logging set up from them (audit events go to standard error)."""
    try:
        settings = Settings()
    except ValidationError as exc:
        fail(f"invalid configuration: {describe_settings_error(exc)}")
        raise
    configure_logging(settings)
    return settings


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
    """Migrate, then run `work` in one write transaction: all of it lands or none of it,
    the audit events it raised with it. SIGTERM, like Ctrl-C, stops it with the transaction
    rolled back."""
    migrate(settings)

    async def audited(conn: database.Connection) -> T:
        """`work`, and the audit events it raised, stored in its transaction."""
        from graphsvc.accounts.audit_log import store_audit_events

        with recording_audit() as events:
            result = await work(conn)
        await store_audit_events(conn, events, None, "", "", settings.audit_retention_days)
        return result

    try:
        return asyncio.run(run_stoppable(settings.resolved_database_url(), audited))
    except (KeyboardInterrupt, asyncio.CancelledError):
        fail(INTERRUPTED)
    except ApiError as exc:
        fail(f"{exc.context}: {exc.message}")
    except IngestError as exc:
        fail(f"{exc} (nothing was written)")
    except database.DATABASE_ERRORS as exc:
        fail(f"{database.describe_database_error(exc)} (nothing was written)")
    raise AssertionError("unreachable")


async def run_stoppable(url: str, work: Callable[[database.Connection], Awaitable[T]]) -> T:
    """`work` in a transaction that SIGTERM cancels, as asyncio.run lets Ctrl-C cancel it.

    A cancel that lands while asyncpg is between a statement's answer and its bookkeeping
    can leave the driver waiting for an answer that never comes (seen under load, about one
    stop in four, with the old KeyboardInterrupt from a signal handler too). So a stop that
    has not ended within STOP_GRACE_SECONDS ends the process: the database then rolls the
    open transaction back itself, as it does for any client that goes away."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None

    def stop() -> None:
        main.cancel()
        loop.call_later(STOP_GRACE_SECONDS, leave)

    loop.add_signal_handler(signal.SIGTERM, stop)
    try:
        return await database.run_in_transaction(url, work)
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def leave() -> None:
    """Exit at once: a SystemExit here would send asyncio.run's cleanup to wait on the
    stuck statement too."""
    print_error(INTERRUPTED)
    sys.stderr.flush()
    os._exit(1)


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
