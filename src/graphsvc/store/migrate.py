"""Bring a database's schema to the newest alembic revision."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from graphsvc.store.db import create_private_file, sqlalchemy_url


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    config.attributes["url"] = sqlalchemy_url(database_url)
    return config


def upgrade_schema(database_url: str) -> list[str]:
    """The revisions applied, oldest first (none: the schema was up to date). Must be called
    outside a running event loop: alembic drives asyncpg with asyncio.run."""
    if database_url.startswith("sqlite:///"):
        create_private_file(Path(database_url.removeprefix("sqlite:///")))
    config = alembic_config(database_url)
    command.upgrade(config, "head")
    applied: list[str] = config.attributes.get("applied", [])
    return applied
