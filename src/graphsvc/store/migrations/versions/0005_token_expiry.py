"""API tokens may expire.

Revision ID: 0005
Revises: 0004
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("auth_tokens") as table:
        table.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index("auth_tokens_user", "auth_tokens", ["user_id"])


def downgrade() -> None:
    op.drop_index("auth_tokens_user", "auth_tokens")
    with op.batch_alter_table("auth_tokens") as table:
        table.drop_column("expires_at")
