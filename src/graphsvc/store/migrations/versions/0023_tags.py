"""Tags (the reference's Privilege Zones and labels, graphsvc/tags): Tier Zero (a tier), Owned
and the labels an administrator adds; each tag's selectors and their seeds (object ids or
Cypher queries); the nodes each selector selected at the last tagging (`selector_nodes`),
and each tag's members (`tag_members`), which replace the `tier_zero` table; the history of
changes; and `tag_state`, whose version moves with every change of membership.

Tier Zero (id 1) and Owned (id 2) keep the ids the reference's clients know them by (its
legacy asset groups "Admin Tier Zero" and "Owned"). Tier Zero's default selectors are the
reference's (their names, seeds and whether each starts enabled; the descriptions are ours).
The members of the old `tier_zero` table are kept as Tier Zero's until the next ingest or
analysis tags the graph again.

Revision ID: 0023
Revises: 0022
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OBJECT_ID_SEED, CYPHER_SEED = 1, 2


def ends_with(kind: str, suffix: str) -> str:
    return f"MATCH (n:{kind}) WHERE n.objectid ENDS WITH '{suffix}' RETURN n"


def starts_with_name(prefix: str) -> str:
    return f"MATCH (n:Group) WHERE n.name STARTS WITH '{prefix}' RETURN n"


def azure_role(template: str) -> str:
    return f"MATCH (n:AZRole) WHERE n.objectid STARTS WITH '{template}@' RETURN n"


# (name, enabled, may be disabled, description, Cypher seed)
AD_DEFAULTS = [
    ("Administrators", True, False, "The domain's built-in Administrators group.",
     ends_with("Group", "S-1-5-32-544")),
    ("Backup Operators", True, False, "Can back up and restore every file on the domain "
     "controllers.", ends_with("Group", "S-1-5-32-551")),
    ("Domain Admins", True, False, "Administrators of the domain.", ends_with("Group", "-512")),
    ("Enterprise Admins", True, False, "Administrators of the forest.",
     ends_with("Group", "-519")),
    ("Schema Admins", True, False, "May change the forest's schema.",
     ends_with("Group", "-518")),
    ("Domain Controllers", True, False, "The domain's domain controllers.",
     ends_with("Group", "-516")),
    ("Enterprise Domain Controllers", True, False, "Every domain controller of the forest.",
     ends_with("Group", "-1-5-9")),
    ("Enterprise Key Admins", True, False, "May write key credentials across the forest.",
     ends_with("Group", "-527")),
    ("Key Admins", True, False, "May write key credentials in the domain.",
     ends_with("Group", "-526")),
    ("Administrator", True, False, "The domain's built-in Administrator account.",
     ends_with("User", "-500")),
    ("AdminSDHolder", True, False, "The container whose access list protected accounts get.",
     "MATCH (n:Domain) MATCH (m:Container) WHERE m.distinguishedname = "
     "'CN=ADMINSDHOLDER,CN=SYSTEM,' + n.distinguishedname RETURN m"),
    ("Domain root object", True, False, "The domain object itself.",
     "MATCH (n:Domain) RETURN n"),
    ("Domain Controller Site Servers", True, False, "Site servers of domain controllers.",
     "MATCH (n:SiteServer)-[:ServerIs]->(:Computer)-[:DCFor]->(:Domain) RETURN n"),
    ("Account Operators", False, True, "May manage most accounts and groups.",
     ends_with("Group", "S-1-5-32-548")),
    ("Print Operators", False, True, "May log on to and load drivers on domain controllers.",
     ends_with("Group", "S-1-5-32-550")),
    ("Server Operators", False, True, "May administer domain controllers.",
     ends_with("Group", "S-1-5-32-549")),
    ("Cryptographic Operators", False, True, "May perform cryptographic operations.",
     ends_with("Group", "S-1-5-32-569")),
    ("Distributed COM Users", False, True, "May launch and activate DCOM objects.",
     ends_with("Group", "S-1-5-32-562")),
    ("Performance Log Users", False, True, "May schedule performance counter logging.",
     ends_with("Group", "S-1-5-32-559")),
    ("Cert Publishers", False, True, "May publish certificates to the directory.",
     ends_with("Group", "-517")),
    ("KRBTGT objects", False, True, "The Kerberos service accounts.", ends_with("User", "-502")),
    ("Read-Only Domain Controllers", False, True, "The domain's read-only domain controllers.",
     "MATCH (n:Computer)-[:MemberOf]->(m:Group) WHERE m.objectid ENDS WITH '-521' RETURN n"),
    ("Enterprise CA Computers", False, True, "Computers hosting an enterprise CA.",
     "MATCH (n:Computer)-[:HostsCAService]->(:EnterpriseCA) RETURN n"),
    ("Exchange Trusted Subsystem", False, True, "Exchange's own servers group.",
     starts_with_name("EXCHANGE TRUSTED SUBSYSTEM@")),
    ("Exchange Windows Permissions", False, True, "May change the domain's access lists.",
     starts_with_name("EXCHANGE WINDOWS PERMISSIONS@")),
    ("DNS Admins", False, True, "Administrators of the DNS service.",
     starts_with_name("DNSADMINS@")),
    ("NTAuth store", False, True, "The certificates trusted for domain authentication.",
     "MATCH (n:NTAuthStore) RETURN n"),
    ("Root CA object", False, True, "Trusted root certification authorities.",
     "MATCH (n:RootCA) RETURN n"),
    ("AIA CA (AD object)", False, True, "Intermediate certification authorities.",
     "MATCH (n:AIACA) RETURN n"),
    ("Enterprise CA (AD object)", False, True, "Enterprise certification authorities.",
     "MATCH (n:EnterpriseCA) RETURN n"),
    ("Certificate template", False, True, "Certificate templates.",
     "MATCH (n:CertTemplate) RETURN n"),
    ("AZUREADSSOACC object", False, True, "The computer account of Entra seamless sign-on.",
     "MATCH (n:Computer) WHERE n.samaccountname = 'AZUREADSSOACC$' RETURN n"),
    ("Incoming Forest Trust Builders", False, True, "May create incoming forest trusts.",
     ends_with("Group", "-557")),
    ("Global Administrator", True, False, "Entra ID's Global Administrator role.",
     azure_role("62E90394-69F5-4237-9190-012177145E10")),
    ("Partner Tier2 Support", True, False, "Entra ID's Partner Tier2 Support role.",
     azure_role("E00E864A-17C5-4A4B-9C06-F5B95A8D5BD8")),
    ("Privileged Authentication Administrator", True, False,
     "Entra ID's Privileged Authentication Administrator role.",
     azure_role("7BE44C8A-ADAF-4E2A-84D6-AB2649E08A13")),
    ("Privileged Role Administrator", True, False,
     "Entra ID's Privileged Role Administrator role.",
     azure_role("E8611AB8-C189-46E8-94E1-60213AB1F814")),
    ("Application Administrator", False, True, "Entra ID's Application Administrator role.",
     azure_role("9B895D92-2CD3-44C7-9D02-A6AC2D5EA5C3")),
    ("Knowledge Administrator", False, True, "Entra ID's Knowledge Administrator role.",
     azure_role("B5A8DCF3-09D5-43A9-A639-8E29EF291470")),
    ("Intune Administrator", False, True, "Entra ID's Intune Administrator role.",
     azure_role("3A2C62DB-5318-420D-8D74-23AFFEE5D9D5")),
    ("Security Administrator", False, True, "Entra ID's Security Administrator role.",
     azure_role("194AE4CB-B126-40B2-BD5B-6091B380977D")),
    ("Azure tenant object", True, False, "The tenant object itself.",
     "MATCH (n:AZTenant) RETURN n"),
]  # fmt: skip

ID = sa.Integer()
NODE_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    tags = op.create_table(
        "asset_group_tags",
        sa.Column("id", ID, primary_key=True),
        sa.Column("type", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("legacy_tag", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=True),
        sa.Column("require_certify", sa.Boolean(), nullable=True),
        sa.Column("analysis_enabled", sa.Boolean(), nullable=True),
        sa.Column("glyph", sa.Text(), nullable=True),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("updated_at", TIME, nullable=False),
        sa.Column("updated_by", sa.Text(), nullable=False),
        sa.Column("deleted_at", TIME, nullable=True),
        sa.Column("deleted_by", sa.Text(), nullable=True),
    )
    selectors = op.create_table(
        "asset_group_tag_selectors",
        sa.Column("id", ID, primary_key=True),
        sa.Column(
            "tag_id", ID, sa.ForeignKey("asset_group_tags.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("auto_certify", sa.Integer(), nullable=False),
        sa.Column("is_default", sa.Boolean(), nullable=False),
        sa.Column("allow_disable", sa.Boolean(), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("updated_at", TIME, nullable=False),
        sa.Column("updated_by", sa.Text(), nullable=False),
        sa.Column("disabled_at", TIME, nullable=True),
        sa.Column("disabled_by", sa.Text(), nullable=True),
        sa.UniqueConstraint("tag_id", "name", name="asset_group_tag_selectors_name"),
    )
    seeds = op.create_table(
        "asset_group_tag_selector_seeds",
        sa.Column(
            "selector_id",
            ID,
            sa.ForeignKey("asset_group_tag_selectors.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("position", sa.Integer(), primary_key=True),
        sa.Column("type", sa.Integer(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
    )
    op.create_table(
        "asset_group_tag_selector_nodes",
        sa.Column(
            "selector_id",
            ID,
            sa.ForeignKey("asset_group_tag_selectors.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("node_id", NODE_ID, primary_key=True),
        # The environment the selection is in: the seed's it came from (a member of two
        # domains' admin groups is in both domains' tier zero).
        sa.Column("environment_id", sa.String(512), primary_key=True),
        sa.Column("source", sa.Integer(), nullable=False),
        sa.Column("certified", sa.Integer(), nullable=False),
        sa.Column("certified_by", sa.Text(), nullable=True),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("updated_at", TIME, nullable=False),
    )
    op.create_index("selector_nodes_node", "asset_group_tag_selector_nodes", ["node_id"])
    op.create_table(
        "tag_members",
        sa.Column(
            "tag_id", ID, sa.ForeignKey("asset_group_tags.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("node_id", NODE_ID, primary_key=True),
        sa.Column("environment_id", sa.String(512), primary_key=True),
    )
    op.create_index("tag_members_node", "tag_members", ["node_id"])
    op.create_table(
        "asset_group_history",
        sa.Column("id", NODE_ID, primary_key=True),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("email", sa.Text(), nullable=True),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("asset_group_tag_id", ID, nullable=False),
        sa.Column("environment_id", sa.Text(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
    )
    op.create_index("asset_group_history_created", "asset_group_history", ["created_at"])
    state = op.create_table(
        "tag_state",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
    )
    now = datetime.now(UTC)
    system = {"created_at": now, "created_by": "SYSTEM", "updated_at": now, "updated_by": "SYSTEM"}
    op.bulk_insert(
        tags,
        [
            {"id": 1, "type": 1, "name": "Tier Zero", "description": "Tier Zero",
             "legacy_tag": "admin_tier_0", "position": 1, "require_certify": False,
             "analysis_enabled": True, **system},
            {"id": 2, "type": 3, "name": "Owned", "description": "Owned",
             "legacy_tag": "owned", "position": None, "require_certify": None,
             "analysis_enabled": None, **system},
        ],
    )  # fmt: skip
    op.bulk_insert(
        selectors,
        [
            {
                "id": number,
                "tag_id": 1,
                "name": name,
                "description": description,
                "auto_certify": 2 if enabled else 0,
                "is_default": True,
                "allow_disable": may_disable,
                **system,
                "disabled_at": None if enabled else now,
                "disabled_by": None if enabled else "SYSTEM",
            }
            for number, (name, enabled, may_disable, description, _) in enumerate(AD_DEFAULTS, 1)
        ],
    )
    op.bulk_insert(
        seeds,
        [
            {"selector_id": number, "position": 0, "type": CYPHER_SEED, "value": cypher}
            for number, (*_, cypher) in enumerate(AD_DEFAULTS, 1)
        ],
    )
    op.bulk_insert(state, [{"id": 1, "version": 1}])
    if op.get_bind().dialect.name == "postgresql":
        for table in ("asset_group_tags", "asset_group_tag_selectors"):
            op.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"(SELECT max(id) FROM {table}))"
            )
    op.execute(
        """INSERT INTO tag_members (tag_id, node_id, environment_id)
        SELECT 1, node_id, domain_id FROM tier_zero"""
    )
    op.drop_index("tier_zero_node", "tier_zero")
    op.drop_table("tier_zero")


def downgrade() -> None:
    op.create_table(
        "tier_zero",
        sa.Column("domain_id", sa.String(512), primary_key=True),
        sa.Column("node_id", NODE_ID, primary_key=True),
    )
    op.create_index("tier_zero_node", "tier_zero", ["node_id"])
    op.execute(
        """INSERT INTO tier_zero (node_id, domain_id)
        SELECT node_id, environment_id FROM tag_members WHERE tag_id = 1"""
    )
    op.drop_table("tag_state")
    op.drop_index("asset_group_history_created", "asset_group_history")
    op.drop_table("asset_group_history")
    op.drop_index("tag_members_node", "tag_members")
    op.drop_table("tag_members")
    op.drop_index("selector_nodes_node", "asset_group_tag_selector_nodes")
    op.drop_table("asset_group_tag_selector_nodes")
    op.drop_table("asset_group_tag_selector_seeds")
    op.drop_table("asset_group_tag_selectors")
    op.drop_table("asset_group_tags")
