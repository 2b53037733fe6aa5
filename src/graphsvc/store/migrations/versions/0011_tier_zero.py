"""Tier zero: the nodes marked as a domain's tier zero after each ingest (store/tier_zero.py).

Revision ID: 0011
Revises: 0010
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tier_zero",
        sa.Column(
            "node_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
        ),
        sa.Column("domain_id", sa.String(512), nullable=False),
    )
    op.create_index("tier_zero_domain", "tier_zero", ["domain_id", "node_id"])


def downgrade() -> None:
    op.drop_index("tier_zero_domain", "tier_zero")
    op.drop_table("tier_zero")
