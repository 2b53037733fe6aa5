"""Two server processes behind one PostgreSQL and one Redis: one rate limit, shared sessions."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2 as httpx
import pytest

from graphsvc.accounts import tokens, users
from graphsvc.crypto import KeyBox
from graphsvc.store.db import run_in_transaction
from tests.conftest import TEST_FERNET_KEY, served, server_environment, signed_headers

RATE, BURST = 20, 5
AGG = "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"


@pytest.fixture
def replicas(database_url: str, redis_url: str, tmp_path: Path) -> Iterator[list[str]]:
    with contextlib.ExitStack() as stack:
        bases = []
        for i in range(2):
            environment = server_environment(  # the keys shared, no files shared
                database_url,
                tmp_path / f"replica{i}",
                redis_url=redis_url,
                rate_limit_per_second=str(RATE),
                rate_limit_burst=str(BURST),
            )
            base, _ = stack.enter_context(served(environment))
            bases.append(base)
        yield bases


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_replicas_share_one_limit_and_one_session_store(
    replicas: list[str], database_url: str
) -> None:
    keys = KeyBox(TEST_FERNET_KEY.encode())

    async def admin(conn):  # type: ignore[no-untyped-def]
        await users.create_user(conn, "admin", "Administrator", "pw-0123456789", False)
        return await tokens.create_user_token(conn, keys, "admin")

    token = asyncio.run(run_in_transaction(database_url, admin))
    headers = signed_headers(token, "GET", AGG)

    with httpx.Client(timeout=10) as client:

        def send(i: int) -> httpx.Response:
            return client.get(replicas[i % 2] + AGG, headers=headers)

        started = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            responses = list(pool.map(send, range(200)))
        elapsed = time.monotonic() - started

        statuses = [r.status_code for r in responses]
        admitted = statuses.count(200)
        seconds = max(1, math.ceil(elapsed))
        assert RATE + BURST <= admitted <= (RATE + BURST) * seconds, (admitted, elapsed)
        assert statuses.count(429) == 200 - admitted
        by_replica = [
            sum(1 for i, s in enumerate(statuses) if s == 200 and i % 2 == r) for r in (0, 1)
        ]
        assert all(by_replica), f"both replicas admitted some: {by_replica}"
        print(f"admitted {admitted} of 200 in {elapsed:.2f} s, per replica {by_replica}")

        rejected = next(r for r in responses if r.status_code == 429)
        assert rejected.json()["errors"][0]["context"] == "rate_limit"
        # Not an event: the window passing, after which Retry-After promises a request is
        # admitted (the login below).
        time.sleep(int(rejected.headers["retry-after"]))

        login = client.post(
            f"{replicas[0]}/api/v2/login",
            json={"login_method": "secret", "username": "admin", "secret": "pw-0123456789"},
        )
        assert login.status_code == 200
        bearer = {"Authorization": f"Bearer {login.json()['data']['session_token']}"}
        assert client.get(replicas[1] + AGG, headers=bearer).status_code == 200
        assert client.post(f"{replicas[1]}/api/v2/logout", headers=bearer).status_code == 200
        assert client.get(replicas[0] + AGG, headers=bearer).status_code == 401
