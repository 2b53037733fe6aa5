"""Each batch of aggregation rows a run stores is counted once, so that the total of a long
window adds one number per run instead of counting every row.

Revision ID: 0008
Revises: 0007
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "aggregation_batches",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("environment_kind_id", sa.Integer(), nullable=False),
        sa.Column("extension_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("row_count", sa.Integer(), nullable=False),
    )
    # Covering: a window's total is summed from the index alone.
    op.create_index(
        "aggregation_batches_window",
        "aggregation_batches",
        ["environment_kind_id", "created_at", "extension_id", "row_count"],
    )
    op.execute(
        """INSERT INTO aggregation_batches
            (run_id, environment_kind_id, extension_id, created_at, row_count)
        SELECT run_id, environment_kind_id, extension_id, created_at, count(*)
        FROM data_quality_aggregations WHERE deleted_at IS NULL
        GROUP BY run_id, environment_kind_id, extension_id, created_at"""
    )


def downgrade() -> None:
    op.drop_index("aggregation_batches_window", "aggregation_batches")
    op.drop_table("aggregation_batches")
