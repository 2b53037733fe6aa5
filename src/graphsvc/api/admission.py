"""Admitting an authenticated request to its operation, for reads and writes alike: the
edition, the caller's permission, the parameters, the `Prefer` header; and running the
handler within the wait `Prefer` asked for."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from typing import Any

import msgspec

from graphsvc.accounts.permissions import Caller
from graphsvc.api.auth import Authenticator, Identity
from graphsvc.api.context import Context
from graphsvc.api.params import (
    Filters,
    query_names_of,
    refuse_nul_in_query,
    refuse_undeclared_query,
)
from graphsvc.api.routes import Operation
from graphsvc.api.web import CALLER_KEY, Request, decode_json
from graphsvc.errors import ApiError, bad_request, forbidden, not_found
from graphsvc.logs import token_hash
from graphsvc.settings import Settings
from graphsvc.store import accounts
from graphsvc.store.db import Connection

PREFER = re.compile(r"wait=(-1|[0-9]{1,18})")  # bounded: int() of thousands of digits fails
BARE_NUMBER = re.compile(r"-?[0-9]{1,18}")
# An upload's timeout counts from the end of its body, one second more per this many bytes
# (32 s per GiB: a 1 GiB upload took 14 s in all, receiving and storing, on PostgreSQL here).
UPLOAD_BYTES_PER_SECOND = 32 * 1024 * 1024


class Admission:
    """The checks between a request's caller and its handler, for every operation that takes
    either kind of credentials."""

    def __init__(
        self, settings: Settings, auth: Authenticator, context: Context, ops: Iterable[Operation]
    ) -> None:
        self.settings = settings
        self.auth = auth
        self.context = context
        # The query parameters of each operation without list filters (those name their own
        # unknown parameters, with the columns they filter).
        self.query_names = {
            op.operation_id: query_names_of(op.parameters)
            for op in ops
            if not any(isinstance(p, Filters) for p in op.parameters)
        }

    def refuse_other_edition(self, op: Operation, request: Request) -> None:
        if op.enterprise_only and self.settings.edition != "enterprise":
            raise not_found(
                f"{request.method} {request.path}: this operation is available "
                "in the Enterprise edition only",
                "edition",
            )

    def authorize(self, op: Operation, request: Request, identity: Identity) -> accounts.Principal:
        """The user the request acts for, if it may run `op`; noted in the request."""
        request.scope[CALLER_KEY] = caller_fields(identity)
        principal = self.auth.authorize(identity, op.permission)
        request.caller = Caller(principal, identity.token_id, self.auth.permissions_of(principal))
        return principal

    def parameters(self, op: Operation, request: Request) -> dict[str, Any]:
        """The handler's arguments but its body, read from the request's path and query."""
        refuse_nul_in_query(request.query)
        names = self.query_names.get(op.operation_id)
        if names is not None:
            refuse_undeclared_query(request.query, names)
        arguments: dict[str, Any] = {}
        for parameter in op.parameters:
            value = parameter.parse(request, self.context)
            if parameter.argument is not None:
                arguments[parameter.argument] = value
        return arguments

    def admit(self, op: Operation, request: Request, identity: Identity) -> dict[str, Any]:
        """`authorize`, then `parameters`, then the expired secret's refusal."""
        principal = self.authorize(op, request, identity)
        arguments = self.parameters(op, request)
        refuse_expired_secret(op, principal, arguments)
        return arguments

    def preference_applied(self, request: Request) -> dict[str, str]:
        """The answer's headers, with Preference-Applied when the client sent `Prefer`
        (checked here too: an answer from memory runs no handler, and so no timeout)."""
        prefer = request.headers.get("prefer")
        wait = parse_prefer(prefer, self.settings)
        if prefer is None or not prefer.strip().startswith("wait="):
            return {}
        return {"Preference-Applied": f"wait={-1 if wait is None else wait}"}

    async def run(
        self,
        op: Operation,
        conn: Connection,
        request: Request,
        arguments: dict[str, Any],
        decoder: msgspec.json.Decoder[Any] | None,
    ) -> msgspec.Struct:
        """The handler's answer, within the wait the request asked for."""
        limit = parse_prefer(request.headers.get("prefer"), self.settings)
        if limit is not None and request.upload is not None:
            limit += request.upload.size // UPLOAD_BYTES_PER_SECOND
        arguments = dict(arguments)
        if decoder is not None:
            arguments["body"] = decode_json(decoder, await request.body(), "body")
        if request.upload is not None:
            arguments["upload"] = request.upload
        try:
            async with asyncio.timeout(limit):
                body: msgspec.Struct = await op.handler(conn, **arguments)
                return body
        except TimeoutError:
            raise ApiError(
                500, f"request timed out after {limit} seconds", "timeout", code="timeout"
            ) from None


def refuse_expired_secret(
    op: Operation, principal: accounts.Principal, arguments: dict[str, Any]
) -> None:
    """A session of a user whose secret an administrator expired (`needs_password_reset`)
    may read the user and set its own new secret, nothing else, as the reference's login
    answer `auth_expired: true` tells its client."""
    if not principal.secret_expired or op.operation_id == "GetSelf":
        return
    user_id = principal.user_id
    if op.operation_id == "SetUserSecret" and arguments.get("user_id") == user_id:
        return
    raise forbidden(
        f"the secret of this user has expired: set a new one with PUT "
        f"/api/v2/bloodhound-users/{user_id}/secret, then log in again",
        "expired_secret",
    )


def caller_fields(identity: Identity) -> dict[str, str]:
    """The caller as a request's log line names it."""
    fields = {}
    if identity.principal is not None:
        fields["user_id"] = identity.principal.user_id
    if identity.token_id is not None:
        fields["token_hash"] = token_hash(identity.token_id)
    return fields


def parse_prefer(header: str | None, settings: Settings) -> int | None:
    """Seconds the request may take; None means no limit (wait=-1, when allowed)."""
    if header is None:
        return settings.default_wait_seconds
    if settings.sdk_compatibility and BARE_NUMBER.fullmatch(header.strip()):
        # The reference SDK sends `Prefer: 0` on every call; older reference servers took a
        # bare number as no preference.
        return settings.default_wait_seconds
    match = PREFER.fullmatch(header.strip())
    if match is None:
        raise bad_request(
            f"Prefer header must be 'wait=<seconds>' or 'wait=-1', got {header!r}", "Prefer"
        )
    wait = int(match.group(1))
    if wait == -1:
        if not settings.allow_unlimited_wait:
            raise bad_request("Prefer: wait=-1 (no timeout) is disabled on this server", "Prefer")
        return None
    if wait == 0:
        return settings.default_wait_seconds
    return min(wait, settings.max_wait_seconds)
