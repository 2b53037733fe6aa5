"""The permissions the operations ask for (the reference server's names), the caller a
request acts for, and its check inside a write's transaction."""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from typing import Protocol

from graphsvc.errors import forbidden, unauthorized
from graphsvc.store import accounts
from graphsvc.store.accounts import Principal
from graphsvc.store.db import Connection

READ_GRAPH = "graphdb/Read"
WRITE_GRAPH = "graphdb/Write"  # what the reference asks to start an analysis
INGEST = "graphdb/Ingest"  # the reference's permission for its file-upload routes
CREATE_TOKEN = "auth/CreateToken"  # noqa: S105 - a permission's name, not a secret
MANAGE_USERS = "auth/ManageUsers"  # users, and every user's tokens and upload jobs
MANAGE_SELF = "auth/ManageSelf"  # one's own account; the reference's for the role lists
MANAGE_PROVIDERS = "auth/ManageProviders"
READ_CLIENTS = "clients/Read"
WIPE_DATABASE = "db/Wipe"  # clear-database: administrators only
READ_SAVED_QUERIES = "saved_queries/Read"
WRITE_SAVED_QUERIES = "saved_queries/Write"


@dataclass(frozen=True)
class Caller:
    """An authenticated user, as a request carries it."""

    principal: Principal
    token_id: str | None  # the token of a signed request; None for a session
    permissions: frozenset[str]


class CredentialCache(Protocol):
    """The token records a serving process keeps (the API's authenticator): told of every
    change that ends or narrows what a token may do, so that the process refuses it at once."""

    def forget_token(self, token_id: str) -> None: ...
    def forget_user(self, user_id: str) -> None: ...


def actor(caller: Caller | None) -> str:
    """Who made a change, as the audit log names it."""
    if caller is None:
        return f"the command line ({getpass.getuser()})"
    return f"user {caller.principal.user_id}"


async def confirm_caller(conn: Connection, caller: Caller, permission: str) -> Caller:
    """The caller as its row stands inside the write's transaction, locked until it ends:
    what authenticated the request may be another process's cached token record, up to
    token_cache_seconds old, so a caller deleted, disabled or stripped of `permission`
    meanwhile is refused here. Its permissions are those of its current role."""
    user_id = caller.principal.user_id
    principal = await accounts.lock_principal(conn, user_id)
    if principal is None:
        raise unauthorized(f"the calling user {user_id} no longer exists", "deleted_user")
    if principal.disabled:
        raise forbidden("user is disabled", "disabled_user")
    _, names = await accounts.role_permission_names(conn, principal.role_id)
    permissions = frozenset(names)
    if permission not in permissions:
        raise forbidden(f"permission {permission} is required", "permission_missing")
    return Caller(principal, caller.token_id, permissions)
