"""The reference's routes around the analysis: `PUT /api/v2/analysis` runs one now, and `GET
/api/v2/datapipe/status` says what the pipeline is doing and when the analysis last ran.

graphsvc analyses in the transaction of each ingest run (graphsvc.analysis), so its
pipeline is either ingesting (an upload job holds the ingest lease) or idle; an analysis
asked for runs in the request's transaction, the graph tagged again after it, and is
answered 202 once done, as the reference answers its queued request."""

from __future__ import annotations

from datetime import UTC, datetime

from graphsvc import wire
from graphsvc.analysis import analyze
from graphsvc.logs import audit
from graphsvc.store import analysis as store
from graphsvc.store import uploads
from graphsvc.store.db import Connection
from graphsvc.tags.tagging import tag_graph
from graphsvc.uploads.lease import without_ingest

# What the reference answers for a time it has none of (Go's zero time).
NEVER = datetime(1, 1, 1, tzinfo=UTC)


async def datapipe_status(conn: Connection) -> wire.DatapipeStatusResponse:
    now = datetime.now(UTC)
    last = await store.find_last_analysis(conn)
    started, completed = last if last is not None else (NEVER, NEVER)
    status = "ingesting" if await uploads.is_lease_held(conn, now) else "idle"
    return wire.DatapipeStatusResponse(wire.DatapipeStatus(status, completed, completed, started))


async def request_analysis(conn: Connection, prepared: bool) -> None:
    """Analyse the whole graph now (409 while an ingest runs: it analyses at its end);
    `prepared`: GRAPHSVC_CITRIX_RDP_SUPPORT."""
    refusal = "an ingest is under way: it analyses the graph when it ends"
    async with without_ingest(conn, "analysis", refusal):
        run_number = await store.find_latest_run_number(conn)
        now = datetime.now(UTC)
        derived = await analyze(conn, run_number, now, prepared)
        await tag_graph(conn, now)
    audit("analysis.requested", f"analysed the graph: {derived} derived relationships")
