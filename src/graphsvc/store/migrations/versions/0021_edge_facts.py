"""Stale facts: `edges.fact_owner` and `edges.fact` say which object's record stated a
collected relationship and in which group of its facts (its ACEs, one local group, its
trusts...), so that a newer collection stating the same group for that object replaces it
whole. `stated_facts` holds, while an ingest run lasts, the groups its records stated for
objects collected before (ingest/writer.py); the run empties it before it commits.

Relationships collected before this revision have no fact: they stay until the object's
next collection restates them (which gives them their fact) or clear-database.

Revision ID: 0021
Revises: 0020
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("edges", sa.Column("fact_owner", sa.BigInteger(), nullable=True))
    op.add_column("edges", sa.Column("fact", sa.Text(), nullable=True))
    op.create_table(
        "stated_facts",
        sa.Column("run_number", sa.BigInteger(), nullable=False),
        sa.Column("node_id", sa.BigInteger(), nullable=False),
        sa.Column("fact", sa.Text(), nullable=False),
        sa.Column("seen", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_number", "node_id", "fact"),
    )


def downgrade() -> None:
    op.drop_table("stated_facts")
    with op.batch_alter_table("edges") as batch:
        batch.drop_column("fact")
        batch.drop_column("fact_owner")
