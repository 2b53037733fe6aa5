"""Login and logout: the operations that open and end a session. A login is throttled per
user name and per address, and its password check runs off the event loop, a few at a time.
A change of one's own secret checks the current one under the same throttle and the same
counters, and every secret change hashes before its transaction (`prepare_secret_change`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta

import msgspec

from graphsvc import wire
from graphsvc.accounts import sessions, users
from graphsvc.accounts.audit_log import store_login_attempt
from graphsvc.accounts.permissions import Caller
from graphsvc.api.context import Context
from graphsvc.api.ratelimit import RateLimiter, client_address, too_many_requests
from graphsvc.api.web import REQUEST_ID_KEY, Request, Response, decode_json, json_response
from graphsvc.crypto import hash_secret, verify_secret
from graphsvc.errors import ApiError, bad_request, conflict, forbidden
from graphsvc.logs import AuditEvent, audit, recording_audit
from graphsvc.store import accounts
from graphsvc.store.db import Connection

# Password checks run at most this many at a time (the cores of a small machine); a login
# waits this long for its turn.
PASSWORD_CHECKS_AT_ONCE = 2
LOGIN_QUEUE_SECONDS = 2.0


login_decoder = msgspec.json.Decoder(wire.LoginRequest)
# The users (callers and changed users, by id) whose secret change is preparing in this
# process: one at a time each, so that one user cannot hold both password-check slots.
changing_secrets: set[str] = set()


async def log_in(ctx: Context, request: Request) -> Response:
    body = decode_json(login_decoder, await request.body(), "login body")
    async with ctx.db.reading() as conn:
        user = await sessions.find_login(conn, body)
    address = client_address(request.scope, ctx.settings.trusted_proxies)
    keys = failure_keys(body.username, address)
    await refuse_throttled(ctx.login_failures, keys)

    async def store_attempt(conn: Connection, events: list[AuditEvent], succeeded: bool) -> None:
        await store_login_attempt(
            conn,
            events,
            user.id if user is not None else None,
            body.username,
            request.scope.get(REQUEST_ID_KEY, ""),
            address,
            ctx.settings.audit_retention_days,
            succeeded,
        )

    async with password_check_slot(ctx.password_checks):
        # Again: logins that failed while this one waited count too.
        await refuse_throttled(ctx.login_failures, keys)
        with recording_audit() as events:
            try:
                user = await asyncio.to_thread(sessions.verify_login, user, body.secret)
            except ApiError as exc:
                if exc.status == 401:
                    for key in keys:
                        await ctx.login_failures.record_hit(key)
                audit(
                    "login.failed",
                    f"login as {body.username!r} refused: {exc.message}",
                    user=body.username,
                    client=address,
                    reason=exc.message,
                    code=exc.code,
                )
                # The audit log, the one answer a failed login changes, is never cached.
                async with ctx.db.transaction(changes_answers=False) as conn:
                    await store_attempt(conn, events, succeeded=False)
                raise
    lifetime = timedelta(seconds=ctx.settings.jwt_lifetime_seconds)
    async with ctx.db.transaction() as conn:
        with recording_audit() as events:
            reply = await sessions.open_session(conn, user, ctx.auth.jwt_key, lifetime)
            audit("login", f"user {body.username} logged in", user=body.username, client=address)
        await store_attempt(conn, events, succeeded=True)
    return json_response(reply)


def failure_keys(user_name: str, address: str) -> list[str]:
    """What a failed password check counts against: the user name and the client's address.
    A login and a change of one's own secret count alike, so that neither lets a client
    guess faster than the other."""
    return [f"login:user:{user_name}", f"login:address:{address}"]


async def prepare_secret_change(
    ctx: Context, request: Request, caller: Caller, user_id: str, body: wire.UserSecret
) -> users.NewSecret:
    """The password work of `PUT /api/v2/bloodhound-users/{id}/secret`, before its write
    transaction opens (Operation.prepare) and off the event loop, in a password-check slot:
    one's own `current_secret` is verified under login's throttle, its failures counted as
    a failed login's (a stolen API token guessed 4 to 7 a second here, against login's 10 a
    minute); then the new secret is hashed. The transaction checks that the digest verified
    against is still the stored one.

    One change at a time per user (the changed one and the caller): a second, while the
    first prepares, is a 409 at once, before any slot is taken and counted nowhere (it
    guessed nothing). So a user sending many at once holds one slot, never both, and
    logins keep the other; before, 16 parallel changes with the right secret kept both
    slots busy (all but one then a 409 in the transaction) and logins got 503s."""
    busy = {user_id, caller.principal.user_id}
    if busy & changing_secrets:
        raise conflict(
            "a secret change for this user is already under way: retry once it is answered",
            "secret",
        )
    changing_secrets.update(busy)
    try:
        return await prepare_one_secret_change(ctx, request, caller, user_id, body)
    finally:
        changing_secrets.difference_update(busy)


async def prepare_one_secret_change(
    ctx: Context, request: Request, caller: Caller, user_id: str, body: wire.UserSecret
) -> users.NewSecret:
    if not users.changes_own_secret(caller, user_id):
        users.validate_secret(body.secret)
        async with password_check_slot(ctx.password_checks):
            return users.NewSecret(await asyncio.to_thread(hash_secret, body.secret))
    current = body.current_secret
    if not current:
        raise bad_request("current_secret is required to change one's own secret", "current_secret")
    users.validate_secret(body.secret)
    async with ctx.db.reading() as conn:
        name, stored = await users.read_own_secret(conn, user_id)
    address = client_address(request.scope, ctx.settings.trusted_proxies)
    keys = failure_keys(name, address)
    await refuse_throttled(ctx.login_failures, keys)
    async with password_check_slot(ctx.password_checks):
        await refuse_throttled(ctx.login_failures, keys)  # again, as a login does
        if not await asyncio.to_thread(verify_secret, stored, current):
            for key in keys:
                await ctx.login_failures.record_hit(key)
            raise forbidden("current_secret is not the user's secret", "current_secret")
        digest = await asyncio.to_thread(hash_secret, body.secret)
    return users.NewSecret(digest, stored)


async def refuse_throttled(failures: RateLimiter, keys: list[str]) -> None:
    for key in keys:
        verdict = await failures.peek(key)
        if not verdict.admitted:
            raise too_many_requests(verdict, "failed logins")


@contextlib.asynccontextmanager
async def password_check_slot(slots: asyncio.Semaphore) -> AsyncIterator[None]:
    """Password checks run in a worker thread, a few at a time: each costs about 0.2 s of
    CPU, and on the event loop eight at once took /health from 2 ms to 250 ms. A login that
    gets no slot within LOGIN_QUEUE_SECONDS is a 503."""
    try:
        async with asyncio.timeout(LOGIN_QUEUE_SECONDS):
            await slots.acquire()
    except TimeoutError:
        raise ApiError(
            503, "too many logins at once: retry shortly", "login", {"Retry-After": "1"}
        ) from None
    try:
        yield
    finally:
        slots.release()


async def log_out(ctx: Context, request: Request) -> Response:
    async with ctx.db.transaction(changes_answers=False) as conn:  # no answer shows sessions
        identity = await ctx.auth.authenticate(conn, request)
        if identity.session_id is None or identity.principal is None:
            raise bad_request(
                "logout ends a session: send the session's JWT as Bearer", "Authorization"
            )
        await accounts.delete_session(conn, identity.session_id)
    audit(
        "logout",
        f"user {identity.principal.user_id} logged out",
        user_id=identity.principal.user_id,
    )
    return json_response(wire.LogoutResponse(wire.LogoutData(identity.principal.user_id, True)))
