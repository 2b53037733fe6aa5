"""Environment attribution of nodes and edges, and per-instance data-quality statistics.

Revision ID: 0003
Revises: 0002
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The object id of the environment instance (AD domain SID, Azure tenant id, OpenGraph
    # environment node) a collected node belongs to, or that produced an edge.
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("environment_id", sa.String(512), nullable=True))
    with op.batch_alter_table("edges") as batch:
        batch.add_column(sa.Column("environment_id", sa.String(512), nullable=True))
    op.create_index("nodes_run_environment", "nodes", ["run_id", "environment_id"])
    op.create_index("edges_run_environment", "edges", ["run_id", "environment_id"])
    op.create_table(
        "data_quality_environment_stats",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column(
            "extension_id", sa.Integer(), sa.ForeignKey("schema_extensions.id"), nullable=False
        ),
        sa.Column("environment_kind_id", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.String(512), nullable=False),
        sa.Column("metric_type", sa.String(16), nullable=False),
        sa.Column("metric_name", sa.String(255), nullable=False),
        sa.Column("metric_value", sa.Float(precision=53), nullable=False),
        sa.Column("kind_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(
        "dq_environment_stats_run", "data_quality_environment_stats", ["run_id", "environment_id"]
    )


def downgrade() -> None:
    op.drop_table("data_quality_environment_stats")
    op.drop_index("edges_run_environment", "edges")
    op.drop_index("nodes_run_environment", "nodes")
    with op.batch_alter_table("edges") as batch:
        batch.drop_column("environment_id")
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("environment_id")
