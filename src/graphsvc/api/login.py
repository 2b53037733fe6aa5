"""Login and logout: the operations that open and end a session. A login is throttled per
user name and per address, and its password check runs off the event loop, a few at a time."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta

import msgspec

from graphsvc import wire
from graphsvc.accounts import sessions
from graphsvc.accounts.audit_log import store_login_attempt
from graphsvc.api.context import Context
from graphsvc.api.ratelimit import RateLimiter, client_address, too_many_requests
from graphsvc.api.web import REQUEST_ID_KEY, Request, Response, decode_json, json_response
from graphsvc.errors import ApiError, bad_request
from graphsvc.logs import AuditEvent, audit, recording_audit
from graphsvc.store import accounts
from graphsvc.store.db import Connection

# Password checks run at most this many at a time (the cores of a small machine); a login
# waits this long for its turn.
PASSWORD_CHECKS_AT_ONCE = 2
LOGIN_QUEUE_SECONDS = 2.0


login_decoder = msgspec.json.Decoder(wire.LoginRequest)


async def log_in(ctx: Context, request: Request) -> Response:
    body = decode_json(login_decoder, await request.body(), "login body")
    async with ctx.db.reading() as conn:
        user = await sessions.find_login(conn, body)
    address = client_address(request.scope, ctx.settings.trusted_proxies)
    keys = [f"login:user:{body.username}", f"login:address:{address}"]
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
