"""File-upload jobs: the jobs, their files, the files' bytes, and the one ingest lease.

The uploaded bytes live in the database, in chunks, so that every replica can read what any
replica received without a shared folder.

Revision ID: 0007
Revises: 0006
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def uuid_type() -> sa.types.TypeEngine[str]:
    return sa.Uuid(as_uuid=False).with_variant(sa.String(36), "sqlite")


def big_id() -> sa.types.TypeEngine[int]:
    # SQLite only autoincrements a column declared exactly INTEGER PRIMARY KEY.
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def time(name: str, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "file_upload_jobs",
        sa.Column("id", big_id(), primary_key=True, autoincrement=True),
        sa.Column("user_id", uuid_type(), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("status", sa.SmallInteger(), nullable=False),
        sa.Column("status_message", sa.Text(), nullable=False, server_default=""),
        time("start_time"),
        time("end_time", nullable=True),
        time("last_ingest", nullable=True),
        time("created_at"),
        time("updated_at"),
        sa.Column("run_id", uuid_type(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
    )
    op.create_index("file_upload_jobs_status", "file_upload_jobs", ["status", "id"])
    op.create_index("file_upload_jobs_user", "file_upload_jobs", ["user_id", "id"])
    op.create_table(
        "file_upload_files",
        sa.Column("id", big_id(), primary_key=True, autoincrement=True),
        sa.Column(
            "job_id",
            big_id(),
            sa.ForeignKey("file_upload_jobs.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("content_type", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        time("uploaded_at"),
    )
    op.create_index("file_upload_files_job", "file_upload_files", ["job_id", "id"])
    op.create_table(
        "file_upload_chunks",
        sa.Column(
            "file_id",
            big_id(),
            sa.ForeignKey("file_upload_files.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("data", sa.LargeBinary(), nullable=False),
    )
    lease = op.create_table(
        "ingest_lease",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("holder", sa.String(255), nullable=True),
        sa.Column("job_id", big_id(), nullable=True),
        time("expires_at", nullable=True),
    )
    op.bulk_insert(lease, [{"name": "ingest"}])


def downgrade() -> None:
    op.drop_table("ingest_lease")
    op.drop_table("file_upload_chunks")
    op.drop_table("file_upload_files")
    op.drop_table("file_upload_jobs")
