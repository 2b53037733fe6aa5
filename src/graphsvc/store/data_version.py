"""The store's data version (migration 0016): one row, moved forward by a random step by
every write transaction that can change an answer, as its last statement. Forward, so that
a process can tell a late or raced value from a newer one (it keeps the larger); by a random
step, so that a store restored from a backup does not count again through the values that
clients hold in their ETags. Each pool follows it its own way (`sqlite`, `postgres`)."""

from __future__ import annotations

import secrets

DATA_VERSION_CHANNEL = "graphsvc_data_version"  # PostgreSQL NOTIFY channel of the new value
DATA_VERSION_POLL_SECONDS = 1.0  # how stale a replica's version may be when NOTIFY is lost
READ_DATA_VERSION = "SELECT version FROM data_version WHERE id = 1"
MOVE_DATA_VERSION = "UPDATE data_version SET version = version + $1 WHERE id = 1"
MOVE_AND_NOTIFY_DATA_VERSION = """WITH moved AS (
    UPDATE data_version SET version = version + $1 WHERE id = 1 RETURNING version)
SELECT version, pg_notify($2, version::text) FROM moved"""


def data_version_step() -> int:
    return 1 + secrets.randbits(31)
