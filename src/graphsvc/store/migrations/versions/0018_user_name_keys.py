"""User names are compared as people read them, and a deleted user's name may be given again.

Each user keeps `name_key`, its name in NFKC, case-folded and trimmed
(graphsvc.accounts.names): `ADMIN`, `admin ` and `admin` in full-width letters are one name,
and the key is unique among live users. The unique constraint on `name` goes: it held the names
of deleted users (whose rows stay for the record) forever, and creating a user of such a
name was a 500.

A store whose live users already share a key is not upgraded: the upgrade stops with one
line naming them (name and id), since which of them is the real account is the operator's
call. Rename or delete all but one of each with the graphsvc that made them, then upgrade
again. Names that would now be refused without sharing a key (a mix of scripts, surrounding
spaces) are kept: they log in as before, and a new name given to them must pass the rules.

The downgrade brings back the unique `name`: a deleted user whose name was given again
after it is renamed `deleted user ID` (the live user, or the newest, keeps the name).

Revision ID: 0018
Revises: 0017
"""

import unicodedata
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# SQLite's constraints have no names: the batch rebuild names them as PostgreSQL did.
NAMING = {"uq": "%(table_name)s_%(column_0_name)s_key"}
LIVE = sa.text("deleted_at IS NULL")


def name_key(name: str) -> str:
    """graphsvc.accounts.names.name_key as of this revision: a migration keeps its own copy,
    so that a later change of the code cannot rewrite what it did."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    return unicodedata.normalize("NFKC", folded).strip()


def upgrade() -> None:
    bind = op.get_bind()
    rows = bind.execute(
        sa.text("SELECT id, name, deleted_at FROM users ORDER BY created_at, id")
    ).all()
    live: dict[str, list[str]] = {}
    for user_id, name, deleted_at in rows:
        if deleted_at is None:
            live.setdefault(name_key(name), []).append(f"{name!r} ({user_id})")
    shared = ["; ".join(users) for users in live.values() if len(users) > 1]
    if shared:
        raise RuntimeError(
            "users whose names differ only in case, width or surrounding spaces, which are "
            f"now one name: {' | '.join(shared)}; rename or delete all but one of each with "
            "the graphsvc that made them, then upgrade again"
        )
    with op.batch_alter_table("users", naming_convention=NAMING) as batch:
        batch.drop_constraint("users_name_key", type_="unique")
        batch.add_column(sa.Column("name_key", sa.Text(), nullable=True))
    for user_id, name, _ in rows:
        bind.execute(
            sa.text("UPDATE users SET name_key = :key WHERE id = :id"),
            {"key": name_key(name), "id": user_id},
        )
    with op.batch_alter_table("users") as batch:
        batch.alter_column("name_key", existing_type=sa.Text(), nullable=False)
    op.create_index(
        "users_live_name_key",
        "users",
        ["name_key"],
        unique=True,
        sqlite_where=LIVE,
        postgresql_where=LIVE,
    )


def downgrade() -> None:
    bind = op.get_bind()
    rows = bind.execute(
        sa.text("SELECT id, name, deleted_at FROM users ORDER BY created_at, id")
    ).all()
    holders: dict[str, list[tuple[object, bool]]] = {}
    for user_id, name, deleted_at in rows:
        holders.setdefault(name, []).append((user_id, deleted_at is None))
    for held in holders.values():
        keeper = next((user_id for user_id, alive in held if alive), held[-1][0])
        for user_id, _ in held:
            if user_id != keeper:
                bind.execute(
                    sa.text("UPDATE users SET name = :name WHERE id = :id"),
                    {"name": f"deleted user {user_id}", "id": user_id},
                )
    op.drop_index("users_live_name_key", "users")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("name_key")
        batch.create_unique_constraint("users_name_key", ["name"])
