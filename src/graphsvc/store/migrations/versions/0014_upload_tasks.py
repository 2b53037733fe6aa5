"""A file-upload job's per-file results (the reference's completed tasks): one row per
document the job's ingest read, or would have read, with its errors and warnings.

Revision ID: 0014
Revises: 0013
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    big_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "file_upload_tasks",
        sa.Column("id", big_id, primary_key=True),
        sa.Column(
            "job_id",
            big_id,
            sa.ForeignKey("file_upload_jobs.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("file_name", sa.Text(), nullable=False),
        sa.Column("parent_file_name", sa.Text(), nullable=False),
        sa.Column("errors", sa.Text(), nullable=False),  # a JSON list of strings
        sa.Column("warnings", sa.Text(), nullable=False),  # the same
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("file_upload_tasks_job", "file_upload_tasks", ["job_id"])


def downgrade() -> None:
    op.drop_index("file_upload_tasks_job", "file_upload_tasks")
    op.drop_table("file_upload_tasks")
