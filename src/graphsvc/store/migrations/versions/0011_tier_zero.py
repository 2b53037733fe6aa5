"""Tier zero: the nodes marked as a domain's tier zero after each ingest (store/tier_zero.py),
marked here for the graph already stored (the query as store/tier_zero.py had it then).

Revision ID: 0011
Revises: 0010
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A node can be in several domains' tier zero (a member of two domains' admin groups).
    op.create_table(
        "tier_zero",
        sa.Column("domain_id", sa.String(512), primary_key=True),
        sa.Column(
            "node_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True
        ),
    )
    op.create_index("tier_zero_node", "tier_zero", ["node_id"])
    suffixes = " OR ".join(
        f"n.object_id LIKE '%{s}'"
        for s in ("-1-5-9", "-500", "-512", "-516", "-518", "-519", "-526", "-527", "-544", "-551")
    )
    dn = (
        "json_extract(n.properties, '$.distinguishedname')"
        if op.get_bind().dialect.name == "sqlite"
        else "((n.properties)::jsonb ->> 'distinguishedname')"
    )
    op.execute(
        f"""INSERT INTO tier_zero (node_id, domain_id)
        WITH RECURSIVE domains(id, object_id) AS (
            SELECT id, object_id FROM nodes WHERE label = 'Domain'
        ), roots(node_id, domain_id) AS (
            SELECT id, object_id FROM domains
          UNION
            SELECT n.id, d.object_id FROM nodes n JOIN domains d ON n.environment_id = d.object_id
            WHERE n.label IN ('User', 'Group') AND ({suffixes})
          UNION
            SELECT n.id, d.object_id FROM nodes n JOIN domains d ON n.environment_id = d.object_id
            WHERE n.label = 'Container' AND upper({dn}) LIKE 'CN=ADMINSDHOLDER,CN=SYSTEM,%%'
        ), reached(node_id, domain_id) AS (
            SELECT node_id, domain_id FROM roots
          UNION
            SELECT e.start_id, r.domain_id FROM edges e JOIN reached r ON e.end_id = r.node_id
            WHERE e.kind_id = (SELECT id FROM kinds WHERE name = 'MemberOf')
        )
        SELECT DISTINCT node_id, domain_id FROM reached"""
    )


def downgrade() -> None:
    op.drop_index("tier_zero_node", "tier_zero")
    op.drop_table("tier_zero")
