"""Accounts as the reference keeps them: the `graphdb/Ingest` permission its file-upload
routes ask for (held by Upload-Only instead of `graphdb/Write`, and by Power User and
Administrator besides theirs), and a user's first and last name, e-mail address and last
login.

Revision ID: 0012
Revises: 0011
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INGEST_HOLDERS = ("Upload-Only", "Power User", "Administrator")


def upgrade() -> None:
    op.execute(
        """INSERT INTO permissions (id, authority, name)
        SELECT max(id) + 1, 'graphdb', 'Ingest' FROM permissions"""
    )
    for role in INGEST_HOLDERS:
        op.execute(
            f"""INSERT INTO roles_permissions (role_id, permission_id)
            SELECT r.id, p.id FROM roles r, permissions p
            WHERE r.name = '{role}' AND p.authority = 'graphdb' AND p.name = 'Ingest'"""
        )
    op.execute(
        """DELETE FROM roles_permissions
        WHERE role_id = (SELECT id FROM roles WHERE name = 'Upload-Only')
            AND permission_id = (SELECT id FROM permissions
                                 WHERE authority = 'graphdb' AND name = 'Write')"""
    )
    with op.batch_alter_table("users") as table:
        table.add_column(sa.Column("first_name", sa.String(255), nullable=True))
        table.add_column(sa.Column("last_name", sa.String(255), nullable=True))
        table.add_column(sa.Column("email_address", sa.String(255), nullable=True))
        table.add_column(sa.Column("last_login", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users") as table:
        for column in ("last_login", "email_address", "last_name", "first_name"):
            table.drop_column(column)
    op.execute(
        """INSERT INTO roles_permissions (role_id, permission_id)
        SELECT r.id, p.id FROM roles r, permissions p
        WHERE r.name = 'Upload-Only' AND p.authority = 'graphdb' AND p.name = 'Write'"""
    )
    op.execute(
        """DELETE FROM roles_permissions WHERE permission_id =
            (SELECT id FROM permissions WHERE authority = 'graphdb' AND name = 'Ingest')"""
    )
    op.execute("DELETE FROM permissions WHERE authority = 'graphdb' AND name = 'Ingest'")
