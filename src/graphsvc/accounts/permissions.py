"""The permissions the operations ask for (the reference server's names), and the caller a
request acts for."""

from __future__ import annotations

import getpass
from dataclasses import dataclass

from graphsvc.store.accounts import Principal

READ_GRAPH = "graphdb/Read"
WRITE_GRAPH = "graphdb/Write"  # the reference's permission for its file-upload routes
CREATE_TOKEN = "auth/CreateToken"  # noqa: S105 - a permission's name, not a secret
MANAGE_USERS = "auth/ManageUsers"  # users, and every user's tokens and upload jobs
MANAGE_PROVIDERS = "auth/ManageProviders"
READ_CLIENTS = "clients/Read"


@dataclass(frozen=True)
class Caller:
    """An authenticated user, as a request carries it."""

    principal: Principal
    token_id: str | None  # the token of a signed request; None for a session
    permissions: frozenset[str]


def actor(caller: Caller | None) -> str:
    """Who made a change, as the audit log names it."""
    if caller is None:
        return f"the command line ({getpass.getuser()})"
    return f"user {caller.principal.user_id}"
