"""Initial schema: graph, schema extensions, data quality, SAML, clients, users and auth.

Revision ID: 0001
Revises:
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The reference server's roles; a migration keeps its own copy so later code changes
# cannot rewrite history.
PERMISSIONS = [
    ("app", "ReadAppConfig"),
    ("app", "WriteAppConfig"),
    ("risks", "GenerateReport"),
    ("risks", "ManageRisks"),
    ("auth", "CreateToken"),
    ("auth", "ManageAppConfig"),
    ("auth", "ManageProviders"),
    ("auth", "ManageSelf"),
    ("auth", "ManageUsers"),
    ("clients", "Manage"),
    ("clients", "Tasking"),
    ("clients", "Read"),
    ("collection", "ManageJobs"),
    ("graphdb", "Read"),
    ("graphdb", "Write"),
    ("graphdb", "Mutate"),
    ("saved_queries", "Read"),
    ("saved_queries", "Write"),
    ("db", "Wipe"),
]
READ_ONLY = [
    "app/ReadAppConfig",
    "risks/GenerateReport",
    "auth/CreateToken",
    "auth/ManageSelf",
    "graphdb/Read",
]
ROLES = {
    "Read-Only": ("Used for integrations", READ_ONLY),
    "Upload-Only": (
        "Used for data collection clients, can post data but cannot read data",
        ["clients/Tasking", "graphdb/Write"],
    ),
    "User": (
        "Can read data, modify asset group memberships",
        [*READ_ONLY, "clients/Read", "saved_queries/Read", "saved_queries/Write"],
    ),
    "Power User": (
        "Can upload data, manage clients, and perform any action a User can",
        [
            *READ_ONLY,
            "app/WriteAppConfig",
            "risks/ManageRisks",
            "clients/Manage",
            "clients/Read",
            "clients/Tasking",
            "collection/ManageJobs",
            "graphdb/Write",
            "graphdb/Mutate",
            "saved_queries/Read",
            "saved_queries/Write",
        ],
    ),
    "Administrator": (
        "Can manage users, clients, and application configuration",
        [f"{a}/{n}" for a, n in PERMISSIONS],
    ),
}


def uuid_type() -> sa.types.TypeEngine[str]:
    return sa.Uuid(as_uuid=False).with_variant(sa.String(36), "sqlite")


def big_id() -> sa.types.TypeEngine[int]:
    # SQLite only autoincrements a column declared exactly INTEGER PRIMARY KEY.
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def bytewise_text(length: int) -> sa.types.TypeEngine[str]:
    """Sorts byte by byte on both stores (SQLite's BINARY, PostgreSQL's "C")."""
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def time(name: str, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def timestamps() -> list[sa.Column[object]]:
    return [time("created_at"), time("updated_at"), time("deleted_at", nullable=True)]


def collection_flags() -> list[sa.Column[object]]:
    names = [
        "session_collection",
        "local_group_collection",
        "ad_structure_collection",
        "cert_services_collection",
        "ca_registry_collection",
        "dc_registry_collection",
        "all_trusted_domains",
    ]
    return [sa.Column(n, sa.Boolean(), nullable=False, server_default=sa.false()) for n in names]


def upgrade() -> None:
    op.create_table(
        "kinds",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
    )
    op.create_table(
        "schema_extensions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("display_name", sa.String(255), nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("is_builtin", sa.Boolean(), nullable=False),
        *timestamps(),
    )
    op.create_table(
        "schema_extension_kinds",
        sa.Column(
            "extension_id",
            sa.Integer(),
            sa.ForeignKey("schema_extensions.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("kind_id", sa.Integer(), sa.ForeignKey("kinds.id"), primary_key=True),
        sa.Column("category", sa.String(16), nullable=False),
    )
    op.create_table(
        "schema_environments",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "extension_id",
            sa.Integer(),
            sa.ForeignKey("schema_extensions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("environment_kind_id", sa.Integer(), sa.ForeignKey("kinds.id"), nullable=False),
        sa.Column("source_kind_id", sa.Integer(), sa.ForeignKey("kinds.id"), nullable=True),
        *timestamps(),
        sa.UniqueConstraint("extension_id", "environment_kind_id"),
    )
    op.create_table(
        "ingest_runs",
        sa.Column("id", uuid_type(), primary_key=True),
        time("created_at"),
        sa.Column("files", sa.Text(), nullable=False),
        sa.Column("node_count", sa.Integer(), nullable=False),
        sa.Column("edge_count", sa.Integer(), nullable=False),
    )
    op.create_table(
        "nodes",
        sa.Column("id", big_id(), primary_key=True),
        sa.Column("object_id", bytewise_text(512), nullable=False, unique=True),
        sa.Column("name", bytewise_text(1024), nullable=False),
        sa.Column("label", bytewise_text(255), nullable=False),
        sa.Column("kinds", sa.Text(), nullable=False),
        sa.Column("properties", sa.Text(), nullable=False),
        sa.Column("run_id", uuid_type(), nullable=True),
        time("created_at"),
        time("updated_at"),
    )
    op.create_index("nodes_name", "nodes", ["name"])
    op.create_table(
        "node_kinds",
        sa.Column(
            "node_id", big_id(), sa.ForeignKey("nodes.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("kind_id", sa.Integer(), sa.ForeignKey("kinds.id"), primary_key=True),
    )
    op.create_index("node_kinds_kind", "node_kinds", ["kind_id", "node_id"])
    op.create_table(
        "edges",
        sa.Column("id", big_id(), primary_key=True),
        sa.Column(
            "start_id", big_id(), sa.ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column(
            "end_id", big_id(), sa.ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("kind_id", sa.Integer(), sa.ForeignKey("kinds.id"), nullable=False),
        sa.Column("properties", sa.Text(), nullable=False),
        sa.Column("run_id", uuid_type(), nullable=True),
        time("created_at"),
        time("updated_at"),
    )
    # Inbound traversal (DCOM holders, group members) reads end_id + kind_id -> start_id.
    op.create_index("edges_inbound", "edges", ["end_id", "kind_id", "start_id"], unique=True)
    op.create_index("edges_outbound", "edges", ["start_id", "kind_id"])
    op.create_table(
        "data_quality_aggregations",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column(
            "extension_id", sa.Integer(), sa.ForeignKey("schema_extensions.id"), nullable=False
        ),
        sa.Column("environment_kind_id", sa.Integer(), nullable=False),
        sa.Column("metric_type", sa.String(16), nullable=False),
        sa.Column("metric_name", sa.String(255), nullable=False),
        sa.Column("metric_value", sa.Float(precision=53), nullable=False),
        sa.Column("kind_id", sa.Integer(), nullable=True),
        *timestamps(),
    )
    op.create_index(
        "dq_aggregations_env_time",
        "data_quality_aggregations",
        ["environment_kind_id", "created_at", "id"],
    )
    op.create_table(
        "azure_tenant_stats",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("tenant_id", sa.String(36), nullable=False),
        *[
            sa.Column(c, sa.Integer(), nullable=False)
            for c in (
                "users",
                "groups",
                "apps",
                "service_principals",
                "devices",
                "management_groups",
                "subscriptions",
                "resource_groups",
                "vms",
                "key_vaults",
                "relationships",
            )
        ],
        sa.Column("run_id", uuid_type(), nullable=False),
        *timestamps(),
    )
    op.create_index(
        "azure_tenant_stats_tenant_time", "azure_tenant_stats", ["tenant_id", "created_at", "id"]
    )
    op.create_table(
        "saml_providers",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("display_name", sa.String(255), nullable=False),
        sa.Column("idp_issuer_uri", sa.Text(), nullable=False),
        sa.Column("idp_sso_uri", sa.Text(), nullable=False),
        sa.Column("principal_attribute_mappings", sa.Text(), nullable=False),
        sa.Column("sso_provider_id", sa.Integer(), nullable=True),
        *timestamps(),
    )
    op.create_table(
        "roles",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(64), nullable=False, unique=True),
        sa.Column("description", sa.Text(), nullable=False),
    )
    op.create_table(
        "permissions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("authority", sa.String(64), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.UniqueConstraint("authority", "name"),
    )
    op.create_table(
        "roles_permissions",
        sa.Column(
            "role_id", sa.Integer(), sa.ForeignKey("roles.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column(
            "permission_id",
            sa.Integer(),
            sa.ForeignKey("permissions.id", ondelete="CASCADE"),
            primary_key=True,
        ),
    )
    op.create_table(
        "users",
        sa.Column("id", uuid_type(), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("role_id", sa.Integer(), sa.ForeignKey("roles.id"), nullable=False),
        sa.Column("secret_digest", sa.Text(), nullable=True),
        sa.Column("is_disabled", sa.Boolean(), nullable=False),
        *timestamps(),
    )
    op.create_table(
        "user_sessions",
        sa.Column("id", uuid_type(), primary_key=True),
        sa.Column(
            "user_id", uuid_type(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
        ),
        time("created_at"),
        time("expires_at"),
    )
    op.create_table(
        "clients",
        sa.Column("id", uuid_type(), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("ip_address", sa.String(64), nullable=False),
        sa.Column("hostname", sa.String(255), nullable=False),
        sa.Column("configured_user", sa.String(255), nullable=False),
        time("last_checkin", nullable=True),
        sa.Column("current_job_id", sa.BigInteger(), nullable=True),
        sa.Column("current_task_id", sa.BigInteger(), nullable=True),
        sa.Column("completed_job_count", sa.Integer(), nullable=False),
        sa.Column("completed_task_count", sa.Integer(), nullable=False),
        sa.Column("domain_controller", sa.String(255), nullable=True),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("user_sid", sa.String(255), nullable=True),
        *timestamps(),
    )
    op.create_table(
        "auth_tokens",
        sa.Column("id", uuid_type(), primary_key=True),
        sa.Column(
            "user_id", uuid_type(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=True
        ),
        sa.Column(
            "client_id", uuid_type(), sa.ForeignKey("clients.id", ondelete="CASCADE"), nullable=True
        ),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("key_ciphertext", sa.Text(), nullable=False),
        sa.Column("hmac_method", sa.String(32), nullable=False),
        time("last_access"),
        sa.Column("created_by", uuid_type(), nullable=True),
        *timestamps(),
    )
    op.create_index("auth_tokens_client", "auth_tokens", ["client_id"])
    op.create_table(
        "client_events",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "client_id",
            uuid_type(),
            sa.ForeignKey("clients.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("rrule", sa.Text(), nullable=False),
        *collection_flags(),
        sa.Column("ous", sa.Text(), nullable=False),
        sa.Column("domains", sa.Text(), nullable=False),
        *timestamps(),
    )
    op.create_index("client_events_client", "client_events", ["client_id"])
    op.create_table(
        "jobs",
        sa.Column("id", big_id(), primary_key=True),
        sa.Column(
            "client_id",
            uuid_type(),
            sa.ForeignKey("clients.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("event_id", sa.Integer(), nullable=True),
        time("execution_time"),
        time("start_time", nullable=True),
        time("end_time", nullable=True),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("status_message", sa.Text(), nullable=False),
        *collection_flags(),
        sa.Column("domain_controller", sa.String(255), nullable=False),
        sa.Column("ous", sa.Text(), nullable=False),
        sa.Column("domains", sa.Text(), nullable=False),
        time("created_at"),
        time("updated_at"),
    )
    op.create_table(
        "domain_collection_results",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("job_id", big_id(), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("domain_name", sa.String(255), nullable=False),
        sa.Column("success", sa.Boolean(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        *[
            sa.Column(c, sa.Integer(), nullable=False)
            for c in (
                "user_count",
                "group_count",
                "computer_count",
                "gpo_count",
                "ou_count",
                "container_count",
                "aiaca_count",
                "rootca_count",
                "enterpriseca_count",
                "ntauthstore_count",
                "certtemplate_count",
                "deleted_count",
            )
        ],
        *timestamps(),
    )
    op.create_index("domain_collection_results_job", "domain_collection_results", ["job_id"])

    permissions = sa.table(
        "permissions", sa.column("id"), sa.column("authority"), sa.column("name")
    )
    op.bulk_insert(
        permissions,
        [{"id": i, "authority": a, "name": n} for i, (a, n) in enumerate(PERMISSIONS, 1)],
    )
    permission_ids = {f"{a}/{n}": i for i, (a, n) in enumerate(PERMISSIONS, 1)}
    roles = sa.table("roles", sa.column("id"), sa.column("name"), sa.column("description"))
    op.bulk_insert(
        roles,
        [
            {"id": i, "name": name, "description": desc}
            for i, (name, (desc, _)) in enumerate(ROLES.items(), 1)
        ],
    )
    links = sa.table("roles_permissions", sa.column("role_id"), sa.column("permission_id"))
    op.bulk_insert(
        links,
        [
            {"role_id": i, "permission_id": permission_ids[p]}
            for i, (_, (_, perms)) in enumerate(ROLES.items(), 1)
            for p in sorted(set(perms))
        ],
    )
    # Explicit ids above: move PostgreSQL's sequences past them.
    if op.get_bind().dialect.name == "postgresql":
        for table in ("permissions", "roles"):
            op.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"(SELECT max(id) FROM {table}))"
            )


def downgrade() -> None:
    for table in (
        "domain_collection_results",
        "jobs",
        "client_events",
        "auth_tokens",
        "clients",
        "user_sessions",
        "users",
        "roles_permissions",
        "permissions",
        "roles",
        "saml_providers",
        "azure_tenant_stats",
        "data_quality_aggregations",
        "edges",
        "node_kinds",
        "nodes",
        "ingest_runs",
        "schema_environments",
        "schema_extension_kinds",
        "schema_extensions",
        "kinds",
    ):
        op.drop_table(table)
