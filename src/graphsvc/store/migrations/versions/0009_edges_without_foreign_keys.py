"""Edges without foreign keys: only the ingest writer adds edges, between node ids it has
just read or created in the same transaction, and `graph.delete_nodes` deletes a node's
edges with it. The checks cost more than the rest of the insert once every ACE became an
edge: inserting 510,000 edges took 8.5 s with them and 3.6 s without on PostgreSQL (each
check locks the node row), 2.3 s and 1.7 s on SQLite.

Revision ID: 0009
Revises: 0008
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# SQLite's constraints have no names: the batch rebuild names them by this convention.
NAMING = {"fk": "edges_%(column_0_name)s_fkey"}
KEYS = (("start_id", "nodes"), ("end_id", "nodes"), ("kind_id", "kinds"))


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for column, _ in KEYS:
            op.drop_constraint(f"edges_{column}_fkey", "edges", type_="foreignkey")
        return
    with op.batch_alter_table("edges", naming_convention=NAMING) as batch:
        for column, _ in KEYS:
            batch.drop_constraint(f"edges_{column}_fkey", type_="foreignkey")


def downgrade() -> None:
    cascade = {"start_id": "CASCADE", "end_id": "CASCADE", "kind_id": None}
    if op.get_bind().dialect.name == "postgresql":
        for column, table in KEYS:
            op.create_foreign_key(
                f"edges_{column}_fkey", "edges", table, [column], ["id"], ondelete=cascade[column]
            )
        return
    with op.batch_alter_table("edges") as batch:
        for column, table in KEYS:
            batch.create_foreign_key(
                f"edges_{column}_fkey", table, [column], ["id"], ondelete=cascade[column]
            )
