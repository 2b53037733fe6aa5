"""The store's data version: one row that every write transaction which can change an answer
moves forward as it commits (by a random step, store/data_version.py), so that a server can
tell that its cached answers, and the ETags it gave out, still hold by reading one value.

It starts at a random value: a store made again from nothing must not count through values
that clients of the one before may still hold in their ETags.

Revision ID: 0016
Revises: 0015
"""

import secrets
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    table = op.create_table(
        "data_version",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
    )
    op.bulk_insert(table, [{"id": 1, "version": secrets.randbits(40)}])


def downgrade() -> None:
    op.drop_table("data_version")
