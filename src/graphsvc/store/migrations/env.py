"""Alembic environment: runs the migrations on the URL that graphsvc passes in.

PostgreSQL goes through SQLAlchemy's asyncpg dialect (the driver the server uses), and
holds an advisory lock so that replicas starting together migrate one at a time.
"""

import asyncio
from collections.abc import Collection, Mapping
from typing import Any

from alembic import context
from alembic.migration import MigrationContext, MigrationInfo
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.ext.asyncio import create_async_engine

MIGRATION_LOCK_ID = 7_200_514_001


def note_applied(
    ctx: MigrationContext, step: MigrationInfo, heads: Collection[Any], run_args: Mapping[str, Any]
) -> None:
    """Keep each revision applied, for the caller to report (graphsvc db upgrade)."""
    context.config.attributes.setdefault("applied", []).append(step.up_revision_id)


def run_migrations(connection: Connection) -> None:
    context.configure(connection=connection, render_as_batch=True, on_version_apply=note_applied)
    with context.begin_transaction():
        context.run_migrations()


def run_postgres_migrations(connection: Connection) -> None:
    connection.execute(text(f"SELECT pg_advisory_lock({MIGRATION_LOCK_ID})"))
    connection.commit()
    try:
        run_migrations(connection)
    finally:
        connection.execute(text(f"SELECT pg_advisory_unlock({MIGRATION_LOCK_ID})"))
        connection.commit()


async def run_async(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(run_postgres_migrations)
    finally:
        await engine.dispose()


url: str = context.config.attributes["url"]
if url.startswith("postgresql"):
    asyncio.run(run_async(url))
else:
    engine = create_engine(url)
    with engine.connect() as connection:
        run_migrations(connection)
    engine.dispose()
