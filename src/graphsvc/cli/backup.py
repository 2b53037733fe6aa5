"""`graphsvc backup FOLDER`: what to keep of a store (docs/operations.md), into a new folder
only its owner may read: a SQLite store copied through SQLite's online backup, consistent
while servers write it; for PostgreSQL, the pg_dump command to run (its snapshot is
consistent too, and its version must match the server's, which graphsvc cannot know);
and the two key files, or which variables hold the keys."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import click

from graphsvc.cli.common import fail, load_settings

STORE_COPY = "graphsvc.sqlite3"
DUMP = "graphsvc.dump"
KEY_FILES = (
    ("token-encryption.key", "token_encryption_key", "GRAPHSVC_TOKEN_ENCRYPTION_KEY"),
    ("jwt-signing.key", "jwt_secret", "GRAPHSVC_JWT_SECRET"),
)


def copy_sqlite(source: Path, target: Path) -> None:
    """The store as one consistent file: SQLite's online backup, page by page, restarted by
    SQLite when a write lands meanwhile (a plain copy of a file being written can hold half
    a transaction)."""
    store = sqlite3.connect(source)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        copy = sqlite3.connect(target)
        try:
            store.backup(copy)
        finally:
            copy.close()
    finally:
        store.close()


@click.command()
@click.argument("folder", type=click.Path(path_type=Path))
def backup(folder: Path) -> None:
    """Back the store and its keys up into FOLDER (new; owner-only): a SQLite store copied
    while servers run; for PostgreSQL, the pg_dump command to run, printed. docs/operations.md
    says how to restore."""
    settings = load_settings()
    url = settings.resolved_database_url()
    if url.startswith("sqlite:///"):
        source = Path(url.removeprefix("sqlite:///"))
        if not source.exists():
            fail(f"no store at {source}: nothing to back up")
    try:
        folder.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        fail(f"{folder} exists: back up into a new folder (an older backup is never mixed in)")
    except OSError as exc:
        fail(f"{folder}: {exc.strerror}")
    if url.startswith("sqlite:///"):
        try:
            copy_sqlite(source, folder / STORE_COPY)
        except (sqlite3.Error, OSError) as exc:
            fail(f"copying {source} into {folder / STORE_COPY}: {exc}")
        click.echo(f"copied the store {source} to {folder / STORE_COPY}")
    else:
        # The URL is named, never written out: it may hold the database's password.
        click.echo(
            "the store is PostgreSQL: run, where GRAPHSVC_DATABASE_URL is set\n"
            f'  pg_dump --format=custom --file={folder / DUMP} "$GRAPHSVC_DATABASE_URL"'
        )
    for name, setting, variable in KEY_FILES:
        if getattr(settings, setting) is not None:
            click.echo(f"the key of {variable} is in the environment: keep it with the backup")
            continue
        key = settings.data_dir / name
        if not key.exists():
            click.echo(f"no {key}: the server has not made it yet")
            continue
        shutil.copy2(key, folder / name)
        os.chmod(folder / name, 0o600)
        click.echo(f"copied {key}")
