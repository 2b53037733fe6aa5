"""An aggregation window is counted and paged from one index, without reading the rows.

Revision ID: 0004
Revises: 0003
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The filters (deleted_at, extension_id) ride along in the index, so counting a window
    # of a long history never touches the table, and the newest-first page is read in index
    # order and stops at its limit.
    op.drop_index("dq_aggregations_env_time", "data_quality_aggregations")
    op.create_index(
        "dq_aggregations_window",
        "data_quality_aggregations",
        ["environment_kind_id", "created_at", "id", "deleted_at", "extension_id"],
    )


def downgrade() -> None:
    op.drop_index("dq_aggregations_window", "data_quality_aggregations")
    op.create_index(
        "dq_aggregations_env_time",
        "data_quality_aggregations",
        ["environment_kind_id", "created_at", "id"],
    )
