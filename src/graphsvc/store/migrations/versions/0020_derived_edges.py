"""Derived relationships: `edges.derived` marks the relationships the analysis made from
others over the whole graph (analysis/), which the next analysis deletes and makes again;
a partial index finds them without reading every edge. `analyses` holds when each analysis
began and ended (`GET /api/v2/datapipe/status`).

Relationships derived before this revision (DCSync and SyncLAPSPassword, made from one
ingest run's records) are marked derived here: the next analysis makes them again from the
whole graph.

Revision ID: 0020
Revises: 0019
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "edges", sa.Column("derived", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    op.execute(
        sa.text(
            "UPDATE edges SET derived = true WHERE kind_id IN "
            "(SELECT id FROM kinds WHERE name IN ('DCSync', 'SyncLAPSPassword'))"
        )
    )
    op.create_table(
        "analyses",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("derived", sa.Integer(), nullable=False),
    )
    op.create_index(
        "edges_derived",
        "edges",
        ["id"],
        postgresql_where=sa.text("derived"),
        sqlite_where=sa.text("derived"),
    )


def downgrade() -> None:
    op.drop_table("analyses")
    op.drop_index("edges_derived", "edges")
    with op.batch_alter_table("edges") as batch:
        batch.drop_column("derived")
