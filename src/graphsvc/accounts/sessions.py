"""Sessions: a login checked and opened (a JWT), and the caller's own view (/self)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from graphsvc import wire
from graphsvc.accounts.permissions import Caller
from graphsvc.accounts.roles import read_role
from graphsvc.crypto import issue_jwt, verify_secret
from graphsvc.errors import bad_request, forbidden, not_found, unauthorized
from graphsvc.store import accounts
from graphsvc.store.db import Connection


async def find_login(conn: Connection, request: wire.LoginRequest) -> accounts.UserLogin | None:
    """The user a login names, once the request is well formed; None if there is none."""
    if request.login_method != "secret":
        raise bad_request(
            f"unsupported login_method {request.login_method!r}: use 'secret'", "login_method"
        )
    if "\x00" in request.username:
        raise bad_request("username must not contain a NUL byte", "username")
    return await accounts.find_user_login(conn, request.username)


def verify_login(user: accounts.UserLogin | None, secret: str) -> accounts.UserLogin:
    """Verify the secret (about 0.2 s of CPU: run it off the event loop); an unknown user
    costs the same, so timing tells nothing."""
    if not verify_secret(user.secret_digest if user else None, secret) or user is None:
        raise unauthorized("invalid username or secret", "login")
    if user.principal.disabled:
        raise forbidden("user is disabled", "disabled_user")
    return user


async def open_session(
    conn: Connection, user: accounts.UserLogin, jwt_key: bytes, lifetime: timedelta
) -> wire.LoginResponse:
    now = datetime.now(UTC)
    session_id = str(uuid.uuid4())
    expires_at = now + lifetime
    await accounts.insert_session(conn, session_id, user.id, now, expires_at)
    await accounts.set_last_login(conn, user.id, now)
    token = issue_jwt(jwt_key, user.id, session_id, expires_at)
    return wire.LoginResponse(wire.LoginData(user.id, token, auth_expired=user.secret_expired))


async def get_self(conn: Connection, caller: Caller) -> wire.SelfResponse:
    user = await accounts.find_user(conn, caller.principal.user_id)
    if user is None:
        raise not_found("the calling user no longer exists", "auth")
    role = await read_role(conn, caller.principal.role_id)
    token = None
    if caller.token_id is not None:
        token = await accounts.find_user_token(conn, caller.token_id)
    return wire.SelfResponse(
        wire.Requester(
            id=user.id,
            principal_name=user.name,
            is_disabled=user.disabled,
            roles=[role],
            created_at=user.created_at,
            token=token,
        )
    )
