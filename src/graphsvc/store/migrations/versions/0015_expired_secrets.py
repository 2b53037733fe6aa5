"""A user's login secret can be marked expired (the reference's `needs_password_reset`): its
sessions may then only read the user and set a new secret.

Revision ID: 0015
Revises: 0014
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("users") as table:
        table.add_column(
            sa.Column("secret_expired", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("users") as table:
        table.drop_column("secret_expired")
