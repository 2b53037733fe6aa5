"""An ingest run keeps how long it took.

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("ingest_runs") as table:
        table.add_column(sa.Column("duration_seconds", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ingest_runs") as table:
        table.drop_column("duration_seconds")
