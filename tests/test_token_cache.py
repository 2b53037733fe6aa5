"""The authenticator's cache of token records, told of a change to a token or its user from
inside the changing transaction: until that commits, a concurrent request still reads the
old record from the store, and must not put it back in the cache."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from graphsvc.api.auth import Authenticator
from graphsvc.crypto import KeyBox
from graphsvc.store.db import Connection
from tests.conftest import TEST_FERNET_KEY, make_settings

TOKEN_ID = "00000000-0000-4000-8000-000000000001"
USER_ID = "00000000-0000-4000-8000-000000000002"
# A live token of a live, enabled user: key, user, role, disabled, expiry.
LIVE = ("sealed-key", USER_ID, 5, False, None)


class Store:
    """Answers a token lookup with `row`, counting lookups; `during` runs while one is under
    way, as another request's change would."""

    dialect = "sqlite"

    def __init__(self, row: tuple[Any, ...] | None) -> None:
        self.row = row
        self.lookups = 0
        self.during: Callable[[], None] | None = None

    async def fetchrow(self, sql: str, *args: Any) -> tuple[Any, ...] | None:
        self.lookups += 1
        if self.during is not None:
            self.during()
        return self.row


def cached_authenticator(tmp_path: Path) -> Authenticator:
    settings = make_settings(tmp_path, f"sqlite:///{tmp_path}/unused.sqlite3")
    settings = dataclasses.replace(settings, token_cache_seconds=600.0)
    return Authenticator(settings, b"jwt-key", KeyBox(TEST_FERNET_KEY.encode()))


def look_up(auth: Authenticator, store: Store) -> bool:
    """Whether the token is known (from the cache or the store)."""
    found = asyncio.run(auth.token_credentials(cast(Connection, store), TOKEN_ID))
    return found is not None


def test_records_are_cached_until_a_change(tmp_path: Path) -> None:
    auth, store = cached_authenticator(tmp_path), Store(LIVE)
    assert look_up(auth, store) and look_up(auth, store)
    assert store.lookups == 1
    auth.forget_token(TOKEN_ID)
    assert look_up(auth, store) and store.lookups == 2


def test_a_record_read_before_the_revocation_commits_is_not_cached(tmp_path: Path) -> None:
    auth, store = cached_authenticator(tmp_path), Store(LIVE)
    assert look_up(auth, store)
    auth.forget_token(TOKEN_ID)
    assert look_up(auth, store), "not committed yet: the store still has the token"
    store.row = None  # committed
    assert not look_up(auth, store)


def test_a_record_read_before_a_user_change_commits_is_not_cached(tmp_path: Path) -> None:
    auth, store = cached_authenticator(tmp_path), Store(LIVE)
    assert look_up(auth, store)
    auth.forget_user(USER_ID)
    assert look_up(auth, store)
    store.row = ("sealed-key", USER_ID, 5, True, None)  # committed: disabled
    found = asyncio.run(auth.token_credentials(cast(Connection, store), TOKEN_ID))
    assert found is not None and found.principal is not None and found.principal.disabled


def test_a_lookup_under_way_when_the_change_is_made_is_not_cached(tmp_path: Path) -> None:
    auth, store = cached_authenticator(tmp_path), Store(LIVE)
    store.during = lambda: auth.forget_user(USER_ID)
    assert look_up(auth, store)
    store.during, store.row = None, None
    assert not look_up(auth, store)
