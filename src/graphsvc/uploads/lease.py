"""The ingest lease taken by a change that must not interleave with an ingest: clearing the
database, an analysis asked for. Taken in the change's transaction and given back in it, so
that its commit (or rollback) ends it; an ingest under way holds it, and the change is
refused (409), since the run would write relationships to what the change deletes or
analyse a graph the change rewrites."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

from graphsvc.errors import conflict
from graphsvc.store import uploads
from graphsvc.store.db import Connection

LEASE_SECONDS = 60.0  # how long the lease would outlive a change that died holding it


@contextlib.asynccontextmanager
async def without_ingest(conn: Connection, change: str, refusal: str) -> AsyncIterator[None]:
    """Hold the ingest lease for `change` (its name in the lease) or raise 409 `refusal`."""
    now = datetime.now(UTC)
    holder = f"{change} {uuid.uuid4()}"
    if not await uploads.take_lease(conn, holder, now, now + timedelta(seconds=LEASE_SECONDS)):
        raise conflict(refusal, "ingest_lease")
    yield
    await uploads.release_lease(conn, holder)
