"""An index of the derived relationships by kind: the analysis compares what it derives with
what is stored one kind at a time (store/analysis.replace_derived_edges), each kind's read
through it instead of every derived relationship (three million in a tenant of 100,000
Azure objects).

Revision ID: 0024
Revises: 0023
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "edges_derived_kind",
        "edges",
        ["kind_id"],
        postgresql_where=sa.text("derived"),
        sqlite_where=sa.text("derived"),
    )


def downgrade() -> None:
    op.drop_index("edges_derived_kind", "edges")
