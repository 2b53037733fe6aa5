"""Saved queries (the reference's `saved-queries` routes): a user's named Cypher queries, and
who else sees each (`saved_query_shares`: one row a user it is shared with; `public` on the
query itself makes it everyone's).

Revision ID: 0022
Revises: 0021
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def uuid_type() -> sa.types.TypeEngine[str]:
    return sa.Uuid(as_uuid=False).with_variant(sa.String(36), "sqlite")


def upgrade() -> None:
    op.create_table(
        "saved_queries",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column(
            "user_id", uuid_type(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("public", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("user_id", "name", name="saved_queries_user_name"),
    )
    op.create_table(
        "saved_query_shares",
        sa.Column(
            "query_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("saved_queries.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column(
            "user_id",
            uuid_type(),
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("saved_query_shares_user", "saved_query_shares", ["user_id"])


def downgrade() -> None:
    op.drop_index("saved_query_shares_user", "saved_query_shares")
    op.drop_table("saved_query_shares")
    op.drop_table("saved_queries")
