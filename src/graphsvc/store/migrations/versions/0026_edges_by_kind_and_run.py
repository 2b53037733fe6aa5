"""One index of the relationships by kind, whether derived, run and environment, in place of
0025's two (by kind and whether derived; by run, environment, kind and whether derived).

Every relationship written updated both, and each index is a b-tree insert a row. The one
index serves both kinds of read: those by kind seek on its first columns, as before; a run's
counts seek each kind's run (`kind_id IN (SELECT id FROM kinds)` and the flag before the
run number: store/graph.count_run, store/data_quality.run_counts) and read the index alone.

Revision ID: 0026
Revises: 0025
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("edges_run_environment_kind", "edges")
    op.drop_index("edges_kind", "edges")
    op.create_index(
        "edges_kind_run", "edges", ["kind_id", "derived", "run_number", "environment_id"]
    )


def downgrade() -> None:
    op.drop_index("edges_kind_run", "edges")
    op.create_index("edges_kind", "edges", ["kind_id", "derived"])
    op.create_index(
        "edges_run_environment_kind",
        "edges",
        ["run_number", "environment_id", "kind_id", "derived"],
    )
