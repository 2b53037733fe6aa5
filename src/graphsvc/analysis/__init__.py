"""The analysis: relationships derived from others over the whole graph, as the reference's
post-processing derives them after each ingest. Run once at the end of every ingest run (the
CLI's and an upload job's), in its transaction: the relationships are derived again from the
graph as the run leaves it, and the store brought to them (those no longer derived deleted,
new ones inserted, the others left with the run and time they were first derived at), so
that a collection uploaded in parts combines and readers never see half of an analysis."""

from __future__ import annotations

from datetime import UTC, datetime

from graphsvc.analysis.azure import azure_edges
from graphsvc.analysis.certificates import certificate_edges
from graphsvc.analysis.domains import domain_edges
from graphsvc.analysis.escalations import escalation_edges
from graphsvc.analysis.hybrid import hybrid_edges
from graphsvc.analysis.local_groups import local_group_edges
from graphsvc.analysis.owners import derive_owner_edges
from graphsvc.analysis.pki import golden_cert_edges, read_public_key_services
from graphsvc.analysis.relay import relay_edges
from graphsvc.analysis.replication import replication_edges
from graphsvc.store import analysis as store
from graphsvc.store.db import Connection

# What the rules that read other derived relationships derive (written second).
LATER_KINDS = (
    "GoldenCert", "EnrollOnBehalfOf", "ADCSESC1", "ADCSESC3", "ADCSESC4", "ADCSESC6a",
    "ADCSESC6b", "ADCSESC9a", "ADCSESC9b", "ADCSESC10a", "ADCSESC10b", "ADCSESC13",
    "ADCSESC16", "CoerceAndRelayNTLMToSMB", "CoerceAndRelayNTLMToLDAP",
    "CoerceAndRelayNTLMToLDAPS", "CoerceAndRelayNTLMToADCS",
)  # fmt: skip


async def analyze(
    conn: Connection, run_number: int, now: datetime, citrix_rdp_support: bool = False
) -> int:
    """Bring every derived relationship up to the graph (new ones stamped with `run_number`,
    the run it ends, or the newest); how many there are now. `citrix_rdp_support`: the
    setting of that name."""
    await derive_owner_edges(conn, run_number, now)
    edges = [
        *await local_group_edges(conn, citrix_rdp_support),
        *await replication_edges(conn),
        *await certificate_edges(conn),
        *await domain_edges(conn),
        *await azure_edges(conn),
        *await hybrid_edges(conn),
    ]
    # The certificate services' rules and relay follow the chain, the owners and the local
    # groups' edges (derived above, read from the store once written).
    await store.replace_derived_edges(conn, edges, run_number, now, later=LATER_KINDS)
    del edges
    pki = await read_public_key_services(conn)
    later = [
        *golden_cert_edges(pki),
        *await escalation_edges(conn, pki),
        *await relay_edges(conn, pki),
    ]
    await store.replace_derived_edges(conn, later, run_number, now, only=LATER_KINDS)
    derived = await store.count_derived_edges(conn)
    await store.record_analysis(conn, now, datetime.now(UTC), derived)
    return derived
