"""Bring a database's schema to the newest alembic revision, or tell whether it is there."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from graphsvc.store.db import Connection, database_errors, sqlalchemy_url
from graphsvc.store.sqlite import create_private_file

if TYPE_CHECKING:
    from alembic.config import Config

VERSIONS = Path(__file__).parent / "migrations" / "versions"


def head_revision() -> str:
    """The newest revision this graphsvc has: each revision is named by its number, and its
    file begins with it (tests/test_db.py holds that to alembic's own head). Read from the
    file names, not through alembic, whose imports cost a read-only command 0.27 s."""
    return max(path.name.split("_", 1)[0] for path in VERSIONS.glob("[0-9]*_*.py"))


async def stored_revision(conn: Connection) -> str | None:
    """The revision the store's schema is at; None where it has none (not created)."""
    try:
        revision = await conn.fetchval("SELECT version_num FROM alembic_version")
    except database_errors():
        return None
    return None if revision is None else str(revision)


def alembic_config(database_url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    config.attributes["url"] = sqlalchemy_url(database_url)
    return config


def upgrade_schema(database_url: str) -> list[str]:
    """The revisions applied, oldest first (none: the schema was up to date). Must be called
    outside a running event loop: alembic drives asyncpg with asyncio.run."""
    if database_url.startswith("sqlite:///"):
        create_private_file(Path(database_url.removeprefix("sqlite:///")))
    from alembic import command

    config = alembic_config(database_url)
    command.upgrade(config, "head")
    applied: list[str] = config.attributes.get("applied", [])
    return applied
