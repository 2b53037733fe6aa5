"""The analysis: relationships derived from others over the whole graph, as the reference's
post-processing derives them after each ingest. Run once at the end of every ingest run (the
CLI's and an upload job's), in its transaction: the previous analysis's relationships are
deleted and made again from the graph as the run leaves it, so that a collection uploaded in
parts combines and readers never see half of an analysis."""

from __future__ import annotations

from datetime import UTC, datetime

from graphsvc.analysis.certificates import certificate_edges
from graphsvc.analysis.domains import domain_edges
from graphsvc.analysis.escalations import escalation_edges
from graphsvc.analysis.local_groups import local_group_edges
from graphsvc.analysis.owners import derive_owner_edges
from graphsvc.analysis.pki import golden_cert_edges, read_public_key_services
from graphsvc.analysis.relay import relay_edges
from graphsvc.analysis.replication import replication_edges
from graphsvc.store import analysis as store
from graphsvc.store.db import Connection


async def analyze(
    conn: Connection, run_number: int, now: datetime, citrix_rdp_support: bool = False
) -> int:
    """Replace every derived relationship, stamped with `run_number` (the run it ends, or
    the newest); how many there are now. `citrix_rdp_support`: the setting of that name."""
    await store.delete_derived_edges(conn)
    edges = [
        *await local_group_edges(conn, citrix_rdp_support),
        *await replication_edges(conn),
        *await certificate_edges(conn),
        *await domain_edges(conn),
    ]
    derived = await store.insert_derived_edges(conn, edges, run_number, now)
    derived += await derive_owner_edges(conn, run_number, now)
    # The certificate services' rules follow the chain just written, and the owners.
    pki = await read_public_key_services(conn)
    escalations = [
        *golden_cert_edges(pki),
        *await escalation_edges(conn, pki),
        *await relay_edges(conn, pki),
    ]
    derived += await store.insert_derived_edges(conn, escalations, run_number, now)
    await store.record_analysis(conn, now, datetime.now(UTC), derived)
    return derived
