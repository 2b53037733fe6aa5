"""Data-quality statistics of one collection run, from what the run stored.

Per environment instance (an AD domain, an Azure tenant, an OpenGraph environment node):
the nodes the run collected per kind and the edges it produced per kind, limited to the
kinds the instance's schema extension registers. Aggregation rows sum those over the
instances of each environment kind; Azure tenants and AD domains also get their record
(the reference's tenant and domain data-quality stats).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import datetime

from graphsvc.store import data_quality, extensions
from graphsvc.store.db import Connection
from graphsvc.store.graph import ACL_KINDS

UUID_LENGTH = 36  # with its hyphens, as the tenant record's column holds it
TENANT_FIELDS = {
    "AZUser": "users",
    "AZGroup": "groups",
    "AZApp": "apps",
    "AZServicePrincipal": "service_principals",
    "AZDevice": "devices",
    "AZManagementGroup": "management_groups",
    "AZSubscription": "subscriptions",
    "AZResourceGroup": "resource_groups",
    "AZVM": "vms",
    "AZKeyVault": "key_vaults",
}
DOMAIN_FIELDS = {
    "User": "users",
    "Group": "groups",
    "Computer": "computers",
    "OU": "ous",
    "Container": "containers",
    "GPO": "gpos",
    "AIACA": "aiacas",
    "RootCA": "rootcas",
    "EnterpriseCA": "enterprisecas",
    "NTAuthStore": "ntauthstores",
    "CertTemplate": "certtemplates",
    "IssuancePolicy": "issuancepolicies",
}
# What a computer's local groups give (the reference's local-group completeness kinds).
LOCAL_GROUP_EDGE_KINDS = ("AdminTo", "CanRDP", "CanPSRemote", "ExecuteDCOM", "CanBackup")


async def record_run_statistics(
    conn: Connection, run_id: str, run_number: int, now: datetime
) -> None:
    await data_quality.fill_edge_environments(conn, run_number)
    node_counts, edge_counts = await data_quality.run_counts(conn, run_number)
    counts = {"node": node_counts, "relationship": edge_counts}
    instances = await data_quality.environment_instances(
        conn, {c.environment_id for c in [*node_counts, *edge_counts]}
    )
    registered = await extensions.extension_kinds(conn)

    per_instance: list[tuple[data_quality.AggregationRow, str]] = []
    totals: dict[tuple[int, int, str, str, int], float] = defaultdict(float)
    for instance in instances:
        kinds = registered.get(instance.extension_id, {})
        for metric_type, rows in counts.items():
            for c in rows:
                if c.environment_id != instance.environment_id or kinds.get(c.kind_id) != (
                    metric_type
                ):
                    continue
                row = data_quality.AggregationRow(
                    run_id,
                    instance.extension_id,
                    instance.environment_kind_id,
                    metric_type,
                    c.kind_name,
                    float(c.count),
                    c.kind_id if metric_type == "node" else None,
                )
                per_instance.append((row, instance.environment_id))
                key = (
                    instance.extension_id,
                    instance.environment_kind_id,
                    metric_type,
                    c.kind_name,
                    c.kind_id,
                )
                totals[key] += c.count
        # The tenant record's id is a UUID (spec 2.3); an OpenGraph node labelled AZTenant
        # may be named otherwise, and has no such record.
        if instance.environment_kind == "AZTenant" and is_uuid(instance.environment_id):
            await record_tenant(
                conn, instance.environment_id, node_counts, edge_counts, run_id, now
            )
        elif instance.environment_kind == "Domain":
            await record_domain(
                conn, instance.environment_id, node_counts, edge_counts, run_id, run_number, now
            )

    await data_quality.insert_environment_stats(conn, per_instance, now)
    await data_quality.insert_aggregations(
        conn,
        [
            data_quality.AggregationRow(
                run_id,
                ext,
                env_kind,
                metric_type,
                name,
                value,
                kind_id if metric_type == "node" else None,
            )
            for (ext, env_kind, metric_type, name, kind_id), value in sorted(totals.items())
        ],
        now,
    )


def is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return len(text) == UUID_LENGTH


async def record_tenant(
    conn: Connection,
    tenant_id: str,
    node_counts: list[data_quality.RunCount],
    edge_counts: list[data_quality.RunCount],
    run_id: str,
    now: datetime,
) -> None:
    tenant_counts = dict.fromkeys(data_quality.TENANT_COUNT_FIELDS, 0)
    for c in node_counts:
        if c.environment_id == tenant_id and c.kind_name in TENANT_FIELDS:
            tenant_counts[TENANT_FIELDS[c.kind_name]] = c.count
    tenant_counts["relationships"] = sum(
        c.count for c in edge_counts if c.environment_id == tenant_id
    )
    await data_quality.insert_stats_record(
        conn, data_quality.TENANT_STATS, tenant_id, tenant_counts, run_id, now
    )


async def record_domain(
    conn: Connection,
    domain_sid: str,
    node_counts: list[data_quality.RunCount],
    edge_counts: list[data_quality.RunCount],
    run_id: str,
    run_number: int,
    now: datetime,
) -> None:
    """The run's objects in the domain by kind; its ACE edges (of the reference's ACL kinds),
    sessions and edges in all, each edge counted in the domain of the record that produced
    it; and the completeness of its sessions and local groups."""
    values: dict[str, float] = dict.fromkeys(data_quality.DOMAIN_COUNT_FIELDS, 0)
    for c in node_counts:
        if c.environment_id == domain_sid and c.kind_name in DOMAIN_FIELDS:
            values[DOMAIN_FIELDS[c.kind_name]] = c.count
    in_domain = [c for c in edge_counts if c.environment_id == domain_sid]
    values["acls"] = sum(c.count for c in in_domain if c.kind_name in ACL_KINDS)
    values["sessions"] = sum(c.count for c in in_domain if c.kind_name == "HasSession")
    values["relationships"] = sum(c.count for c in in_domain)
    values["session_completeness"] = await data_quality.measure_completeness(
        conn, run_number, domain_sid, "User", ("HasSession",)
    )
    values["local_group_completeness"] = await data_quality.measure_completeness(
        conn, run_number, domain_sid, "Computer", LOCAL_GROUP_EDGE_KINDS
    )
    await data_quality.insert_stats_record(
        conn, data_quality.DOMAIN_STATS, domain_sid, values, run_id, now
    )
