"""What the operations that take the request itself (and the parameters every operation
parses) answer from: the app's settings, store, authenticator, metrics and login throttle."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from graphsvc.api.auth import Authenticator
from graphsvc.api.metrics import Metrics
from graphsvc.api.ratelimit import RateLimiter
from graphsvc.console.assets import ConsoleFiles
from graphsvc.crypto import KeyBox
from graphsvc.cypher.service import CypherEngine
from graphsvc.graph.paths import PathIndex
from graphsvc.settings import Settings
from graphsvc.store.db import Database


@dataclass
class Context:
    """What the operations (and the parameters they parse) answer from."""

    settings: Settings
    db: Database
    auth: Authenticator
    metrics: Metrics
    openapi: bytes  # the encoded OpenAPI document
    login_failures: RateLimiter  # counted per user name and per address
    password_checks: asyncio.Semaphore  # how many run at once
    paths: PathIndex  # the process's shortest-path index, built on first use
    cypher: CypherEngine  # what Cypher queries run on: the path index and the node table
    console: ConsoleFiles | None  # the web console's files; None when it is off

    @property
    def keys(self) -> KeyBox:
        """The key that seals API token keys at rest: the authenticator's."""
        return self.auth.keys
