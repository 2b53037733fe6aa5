"""The partial index of the derived relationships' ids (0020's `edges_derived`) dropped.

Every read of derived relationships names their kind since 0024 (the analysis' deletes, its
counts, the run's statistics), which 0026's index by kind and whether derived leads with:
none needs this one (SQLite's plans checked by tests/test_edge_indexes.py), while each
derived relationship written (760,279 at the 1 GB collection's analysis) was one insert
more in it. Dropped for that, not for speed:
the analysis' three largest inserts took 3.14, 2.22 and 0.87 s without it against 3.06,
2.27 and 0.72 s with it (one run each, SQLite).

Revision ID: 0027
Revises: 0026
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("edges_derived", "edges")


def downgrade() -> None:
    op.create_index(
        "edges_derived",
        "edges",
        ["id"],
        postgresql_where=sa.text("derived"),
        sqlite_where=sa.text("derived"),
    )
