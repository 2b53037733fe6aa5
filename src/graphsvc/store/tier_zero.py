"""Tier zero: each domain's most privileged objects, marked the way the reference marks them
without its Privilege Zones engine (its "Admin Tier Zero" tagging, docs/reference-ad.md §8c).

The roots of a domain (every Domain node, collected or only referred to): the domain itself,
its users and groups whose object id ends in a well-known suffix (`ROOT_SUFFIXES`), and its
AdminSDHolder container; then every member of a root group, at any depth (inbound
`MemberOf`). A node can belong to several domains' tier zero. The whole set is computed
again after every ingest run, since a run can add a member to any of them. The OUs,
containers and GPOs above tier zero that the reference also tags are not marked here.
"""

from __future__ import annotations

from graphsvc.store.db import Connection
from graphsvc.store.dialect import json_text

# Enterprise Domain Controllers, Administrator, Domain Admins, Domain Controllers, Schema
# Admins, Enterprise Admins, Key Admins, Enterprise Key Admins, BUILTIN Administrators,
# Backup Operators (the reference's TierZeroWellKnownSIDSuffixes).
ROOT_SUFFIXES = ("-1-5-9", "-500", "-512", "-516", "-518", "-519", "-526", "-527", "-544", "-551")


async def mark_tier_zero(conn: Connection) -> None:
    """Replace the stored tier zero with the one the graph gives now."""
    suffixes = " OR ".join(f"n.object_id LIKE '%{s}'" for s in ROOT_SUFFIXES)
    distinguished_name = json_text(conn.dialect, "n.properties", "distinguishedname")
    await conn.execute("DELETE FROM tier_zero")
    await conn.execute(
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
            WHERE n.label = 'Container'
                AND upper({distinguished_name}) LIKE 'CN=ADMINSDHOLDER,CN=SYSTEM,%'
        ), reached(node_id, domain_id) AS (
            SELECT node_id, domain_id FROM roots
          UNION
            SELECT e.start_id, r.domain_id FROM edges e JOIN reached r ON e.end_id = r.node_id
            WHERE e.kind_id = (SELECT id FROM kinds WHERE name = 'MemberOf')
        )
        SELECT DISTINCT node_id, domain_id FROM reached"""
    )
