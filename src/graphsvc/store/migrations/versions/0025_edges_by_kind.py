"""Relationships indexed by kind and whether derived, and a run's by environment, kind and
whether derived.

The analysis and the tagging read relationships kind by kind (the raw owners' ACEs, the
trusts, the local groups' rights, the two kinds Tier Zero's selectors follow): with no index
led by the kind, each read scanned every relationship, 0.85 s at the 1 GB collection's six
million. The index of the derived ones by kind becomes one of all by kind and whether
derived, which serves both.

A run's statistics count its relationships by environment and kind, the derived ones apart
(store/data_quality.run_counts, store/graph.count_run): through the index by run and
environment, each of five million rows was read from the table, 4.7 s; with the kind and the
flag in the index, the counts come from it alone. It replaces the index by run and
environment, which it serves too.

The 1 GB collection's run, timed step by step in one run each: the analysis 13.7 s to 9.0,
the tagging 6.3 to 5.2, the statistics 6.0 to 2.3, the run's count 1.0 to 0.5; the
relationships' inserts 26.0 to 30.3 s with the ingest's page cache (store/graph.page_cache;
with SQLite's own 2 MiB, 35.2 s).

Revision ID: 0025
Revises: 0024
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("edges_derived_kind", "edges")
    op.create_index("edges_kind", "edges", ["kind_id", "derived"])
    op.drop_index("edges_run_environment", "edges")
    op.create_index(
        "edges_run_environment_kind",
        "edges",
        ["run_number", "environment_id", "kind_id", "derived"],
    )


def downgrade() -> None:
    op.drop_index("edges_run_environment_kind", "edges")
    op.create_index("edges_run_environment", "edges", ["run_number", "environment_id"])
    op.drop_index("edges_kind", "edges")
    op.create_index(
        "edges_derived_kind",
        "edges",
        ["kind_id"],
        postgresql_where=sa.text("derived"),
        sqlite_where=sa.text("derived"),
    )
