"""AD domain statistics per run (the reference's `ad_data_quality_stats` record), and an
index for a domain's objects by kind (the domain entity's lists).

Revision ID: 0010
Revises: 0009
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COUNTS = (
    "users",
    "groups",
    "computers",
    "ous",
    "containers",
    "gpos",
    "aiacas",
    "rootcas",
    "enterprisecas",
    "ntauthstores",
    "certtemplates",
    "issuancepolicies",
    "acls",
    "sessions",
    "relationships",
)


def upgrade() -> None:
    op.create_table(
        "ad_domain_stats",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("domain_sid", sa.String(255), nullable=False),
        *[sa.Column(c, sa.Integer(), nullable=False) for c in COUNTS],
        sa.Column("session_completeness", sa.Float(), nullable=False),
        sa.Column("local_group_completeness", sa.Float(), nullable=False),
        sa.Column(
            "run_id", sa.Uuid(as_uuid=False).with_variant(sa.String(36), "sqlite"), nullable=False
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index(
        "ad_domain_stats_domain_time", "ad_domain_stats", ["domain_sid", "created_at", "id"]
    )
    op.create_index("nodes_environment_label", "nodes", ["environment_id", "label"])


def downgrade() -> None:
    op.drop_index("nodes_environment_label", "nodes")
    op.drop_index("ad_domain_stats_domain_time", "ad_domain_stats")
    op.drop_table("ad_domain_stats")
