"""Nodes and edges name their ingest run by a number instead of its id, and edges lose
`created_at` (never read).

Every edge carried its run's id as text (36 bytes on SQLite, 16 on PostgreSQL), once in
the row and once more in the index that finds a run's edges. On the 1 GB benchmark
collection (5.2 million edges), SQLite's store shrank from 1.76 to 1.17 GB with a short run
key and no `created_at`, and its ingest took 67 s instead of 75 s. The run's id stays what
the API and the statistics show; `ingest_runs.number` is the key the graph keeps.

Numbers come from the sequence `ingest_run_number` on PostgreSQL (concurrent ingests never
share one) and from the largest stored number on SQLite (store/dialect.py `next_number`). A node
or edge whose run has no record (none should exist) gets 0, so that it still counts as
collected.

Revision ID: 0017
Revises: 0016
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GRAPH_TABLES = ("nodes", "edges")
# The run id a downgrade gives rows of run number 0.
UNRECORDED_RUN = "00000000-0000-0000-0000-000000000000"


def upgrade() -> None:
    bind = op.get_bind()
    op.add_column("ingest_runs", sa.Column("number", sa.Integer(), nullable=True))
    runs = bind.execute(sa.text("SELECT id FROM ingest_runs ORDER BY created_at, id")).all()
    for number, (run_id,) in enumerate(runs, start=1):
        bind.execute(
            sa.text("UPDATE ingest_runs SET number = :number WHERE id = :id"),
            {"number": number, "id": run_id},
        )
    with op.batch_alter_table("ingest_runs") as batch:
        batch.alter_column("number", existing_type=sa.Integer(), nullable=False)
    op.create_index("ingest_runs_number", "ingest_runs", ["number"], unique=True)
    if bind.dialect.name == "postgresql":
        op.execute("CREATE SEQUENCE ingest_run_number OWNED BY ingest_runs.number")
        if runs:
            op.execute(f"SELECT setval('ingest_run_number', {len(runs)})")

    for table in GRAPH_TABLES:
        op.add_column(table, sa.Column("run_number", sa.Integer(), nullable=True))
        op.execute(
            f"""UPDATE {table} SET run_number = coalesce(
                (SELECT r.number FROM ingest_runs r WHERE r.id = {table}.run_id), 0)
            WHERE run_id IS NOT NULL"""
        )
        op.drop_index(f"{table}_run_environment", table)
        op.drop_column(table, "run_id")
        op.create_index(f"{table}_run_environment", table, ["run_number", "environment_id"])
    op.drop_column("edges", "created_at")


def downgrade() -> None:
    bind = op.get_bind()
    run_id = sa.Uuid(as_uuid=False).with_variant(sa.String(36), "sqlite")
    op.add_column("edges", sa.Column("created_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE edges SET created_at = updated_at")
    with op.batch_alter_table("edges") as batch:
        batch.alter_column("created_at", existing_type=sa.DateTime(timezone=True), nullable=False)
    for table in GRAPH_TABLES:
        op.add_column(table, sa.Column("run_id", run_id, nullable=True))
        unrecorded = (
            f"CAST('{UNRECORDED_RUN}' AS uuid)"
            if bind.dialect.name == "postgresql"
            else f"'{UNRECORDED_RUN}'"
        )
        op.execute(
            f"""UPDATE {table} SET run_id = coalesce(
                (SELECT r.id FROM ingest_runs r WHERE r.number = {table}.run_number),
                {unrecorded})
            WHERE run_number IS NOT NULL"""
        )
        op.drop_index(f"{table}_run_environment", table)
        op.drop_column(table, "run_number")
        op.create_index(f"{table}_run_environment", table, ["run_id", "environment_id"])
    if bind.dialect.name == "postgresql":
        op.execute("DROP SEQUENCE ingest_run_number")
    op.drop_index("ingest_runs_number", "ingest_runs")
    op.drop_column("ingest_runs", "number")
