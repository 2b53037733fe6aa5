"""Source kinds and clearings of the graph: what `POST /api/v2/clear-database` names and
leaves behind.

`source_kinds` holds the reference's source kinds by number: Base (1) and AZBase (2), as the
reference seeds them, then each OpenGraph `metadata.source_kind` an ingest brings. A store
made before this revision has its OpenGraph source kinds only once a file of each is
ingested again (which nodes carry one as their kind is not recorded apart).

`graph_clearings` holds each clearing that deleted nodes or relationships: the graph's
version counts them (store/paths.py `GraphVersion`), since a clearing is no ingest run and
would otherwise leave the path index and every kept answer on the graph before it.

Revision ID: 0019
Revises: 0018
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    source_kinds = op.create_table(
        "source_kinds",
        # Numbered by the store (store/clearing.py), not by a sequence: 1 and 2 are seeded.
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("name", sa.Text(), nullable=False, unique=True),
    )
    op.bulk_insert(source_kinds, [{"id": 1, "name": "Base"}, {"id": 2, "name": "AZBase"}])
    op.create_table(
        "graph_clearings",
        sa.Column(
            "id", sa.Uuid(as_uuid=False).with_variant(sa.String(36), "sqlite"), primary_key=True
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cleared", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("graph_clearings")
    op.drop_table("source_kinds")
