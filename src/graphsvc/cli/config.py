"""`graphsvc config check`: what a server would refuse or trip on, found before it starts,
without starting it or writing anything: every GRAPHSVC_* variable, the key files, the
store and its schema, Redis, and the folder of the shortest-path index. One line a check;
the exit status says whether a server may start on it."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

if TYPE_CHECKING:
    from graphsvc.settings import Settings

EXIT_PROBLEM = 1  # a check failed: a server would refuse to start, or fail once serving
Outcome = Literal["ok", "note", "problem"]


@dataclass(frozen=True)
class Check:
    name: str
    outcome: Outcome  # note: worth knowing, no obstacle
    detail: str


def check_settings() -> tuple[list[Check], Settings | None]:
    """The variables: unknown ones (with the nearest valid name) and invalid values."""
    from graphsvc.settings import (
        Settings,
        SettingsError,
        describe_settings_error,
        describe_unknown_variables,
    )

    unknown = describe_unknown_variables(os.environ)
    if unknown is not None:
        return [Check("settings", "problem", unknown)], None
    try:
        settings = Settings.from_environment()
    except SettingsError as exc:
        return [Check("settings", "problem", describe_settings_error(exc))], None
    given = sorted(name for name in os.environ if name.startswith("GRAPHSVC_"))
    detail = f"{len(given)} GRAPHSVC_ variable(s) set" + (f": {', '.join(given)}" if given else "")
    return [Check("settings", "ok", detail)], settings


def check_key_file(path: Path, what: str, fernet: bool) -> Check:
    """A generated key's file: missing (made at the first start), or readable, owner-only
    and a key."""
    from graphsvc.settings import is_fernet_key

    name = f"{what} key"
    if not path.exists():
        return Check(name, "note", f"{path} does not exist yet: the first start makes it")
    try:
        text = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not text"
        return Check(name, "problem", f"{path}: {reason}: restore it from a backup")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        return Check(name, "problem", f"{path} is open to others (mode {mode:o}): chmod 600 it")
    if not text or (fernet and not is_fernet_key(text)):
        return Check(name, "problem", f"{path} does not hold a key (was it edited?): restore it")
    return Check(name, "ok", f"{path}, owner-only")


def check_keys(settings: Settings) -> list[Check]:
    found = []
    if settings.jwt_secret is None:
        found.append(check_key_file(settings.data_dir / "jwt-signing.key", "session", False))
    else:
        found.append(Check("session key", "ok", "GRAPHSVC_JWT_SECRET"))
    if settings.token_encryption_key is None:
        path = settings.data_dir / "token-encryption.key"
        found.append(check_key_file(path, "token encryption", True))
    else:
        found.append(Check("token encryption key", "ok", "GRAPHSVC_TOKEN_ENCRYPTION_KEY"))
    return found


async def check_store(settings: Settings) -> Check:
    """The store answers, and its schema is this graphsvc's (behind: a server upgrades it)."""
    from graphsvc.store import db as database
    from graphsvc.store.migrate import head_revision, stored_revision

    url = settings.resolved_database_url()
    shown = database.redact_url(url)
    if url.startswith("sqlite:///") and not os.path.exists(url.removeprefix("sqlite:///")):
        return Check("store", "note", f"{shown} does not exist yet: the first start makes it")
    db = database.create_database(url, pool_size=1)
    try:
        async with asyncio.timeout(10):
            await db.open()
            try:
                async with db.reading() as conn:
                    stored = await stored_revision(conn)
            finally:
                await db.close()
    except TimeoutError:
        return Check("store", "problem", f"{shown}: no answer within 10 s")
    except Exception as exc:  # a driver's own errors, which differ by store
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Check("store", "problem", f"{shown}: {reason}")
    head = head_revision()
    if stored == head:
        return Check("store", "ok", f"{shown}, schema at revision {head}")
    if stored is not None and stored > head:
        return Check(
            "store", "problem", f"{shown} is at revision {stored}, newer than this graphsvc's "
            f"{head}: run the graphsvc that upgraded it",
        )  # fmt: skip
    at = f"at revision {stored}" if stored else "without a schema"
    return Check(
        "store", "note", f"{shown} is {at}: the server upgrades it to {head} as it starts "
        "(or `graphsvc db upgrade`)",
    )  # fmt: skip


async def check_redis(settings: Settings) -> Check:
    if not settings.redis_url:
        return Check("redis", "note", "not set: rate limits count per process")
    # Only with a Redis to check: its client's import is 0.2 s of CPU.
    from graphsvc.api.ratelimit import connect_redis, find_redis_problem
    from graphsvc.store import db as database

    shown = database.redact_url(settings.redis_url)
    problem = await find_redis_problem(connect_redis(settings.redis_url))
    if problem is None:
        return Check("redis", "ok", shown)
    answered, reason = problem
    if answered:
        return Check("redis", "problem", f"{shown} refuses graphsvc's requests: {reason}")
    return Check(
        "redis", "problem", f"{shown} does not answer ({reason}): limits would count per "
        "process until it does",
    )  # fmt: skip


def check_index_folder(settings: Settings) -> Check:
    """The shortest-path index's folder: the service's own, if it exists already."""
    folder = settings.resolved_path_index_folder().parent
    if not folder.exists():
        return Check("path index folder", "note", f"{folder} does not exist yet: made when needed")
    info = folder.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return Check("path index folder", "problem", f"{folder} is not a folder of its own")
    if info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & 0o077:
        return Check(
            "path index folder", "note", f"{folder} is not this user's alone: each process "
            "keeps its index in memory",
        )  # fmt: skip
    return Check("path index folder", "ok", str(folder))


def run_checks() -> list[Check]:
    found, settings = check_settings()
    if settings is None:
        return found
    found += check_keys(settings)

    async def connected() -> list[Check]:
        return [await check_store(settings), await check_redis(settings)]

    found += asyncio.run(connected())
    found.append(check_index_folder(settings))
    return found


@click.group()
def config() -> None:
    """The configuration (GRAPHSVC_* variables, key files, store, Redis)."""


@config.command("check")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def check(as_json: bool) -> None:
    """Check what a server would start on, without starting it or writing anything: one line
    a check (ok, note, or problem); exit status 1 when a check found a problem."""
    found = run_checks()
    problems = [c for c in found if c.outcome == "problem"]
    if as_json:
        click.echo(json.dumps({"ok": not problems, "checks": [asdict(c) for c in found]}))
    else:
        for each in found:
            click.echo(f"{each.outcome:<8} {each.name}: {each.detail}")
    if problems:
        raise SystemExit(EXIT_PROBLEM)
