"""Who is calling: signed requests (svcsignature) and session JWTs (Bearer), then permissions."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import NamedTuple

import jwt

from graphsvc.api.params import UUID_TEXT, rfc3339, rfc3339_offset
from graphsvc.api.web import Request
from graphsvc.crypto import KeyBox, decode_jwt
from graphsvc.errors import ApiError, forbidden, unauthorized
from graphsvc.settings import Settings
from graphsvc.signatures import body_key, encode_signature, signatures_match
from graphsvc.store import accounts
from graphsvc.store.db import Connection, Database, database_errors

log = logging.getLogger("graphsvc")

# The offsets time zones use; a RequestDate written in another is refused.
EARLIEST_OFFSET, LATEST_OFFSET = timedelta(hours=-12), timedelta(hours=14)
SIGNATURE_SCHEMES = ("svcsignature", "bhesignature")  # the second is the reference server's
TOKEN_TOUCH_INTERVAL = 60.0
TOKEN_CACHE_SIZE = 10000
# Bodiless signed requests remembered as verified (see `BodySignature.verify`), each with a
# URI of at most REMEMBERED_URI_LENGTH characters (a target can be megabytes long): at most
# about 3 KB each (the URI twice with sdk_compatibility), 12 MB in all.
SIGNATURE_CACHE_SIZE = 4096
REMEMBERED_URI_LENGTH = 1024
# Signed against when the token may not sign (unknown or revoked), so that those and bad
# signatures cost the same.
UNKNOWN_TOKEN_KEY = "graphsvc-unknown-token"  # noqa: S105 - a public placeholder
# The one answer to an unknown token id, a revoked token and a wrong signature, and its code.
SIGNATURE_REFUSED = "invalid signature or unknown token id"
SIGNATURE_REFUSED_CODE = "signature_or_unknown_token"
BAD_SIGNATURE = "bad_signature"


class TokenRefused(ApiError):
    """A 401 for a token that may not sign, or a signature that does not match: the caller is
    told the same whichever it was (its message and code, a metric's label, are one), or
    anyone could find out which token ids exist. `audit_fields` tell the audit log which:
    `auth_failure` (unknown_token, revoked_token or bad_signature) and the `token_id` sent."""

    def __init__(
        self,
        failure: str,
        token_id: str,
        message: str = SIGNATURE_REFUSED,
        code: str = SIGNATURE_REFUSED_CODE,
    ) -> None:
        super().__init__(401, message, "auth", code=code)
        self.audit_fields = {"auth_failure": failure, "token_id": token_id}


@dataclass
class Identity:
    principal: accounts.Principal | None
    session_id: str | None = None
    token_id: str | None = None


def signed_uri(request: Request) -> tuple[str, str]:
    """The raw request target as sent (path and query), and the path alone."""
    path = request.scope.get("raw_path") or request.scope["path"].encode()
    query = request.scope.get("query_string", b"")
    path_text = path.decode("latin-1")
    return (f"{path_text}?{query.decode('latin-1')}" if query else path_text), path_text


@lru_cache(maxsize=1024)
def parse_request_date(raw: str) -> tuple[datetime | None, timedelta | None]:
    """The start of the hour a RequestDate's signed part names (see `check_freshness`), and
    the date's offset; a client's requests within a second share one."""
    instant, offset = rfc3339(raw), rfc3339_offset(raw)
    if instant is None or offset is None:
        return None, None
    local = instant + offset  # its minutes and seconds as written
    return instant - timedelta(
        minutes=local.minute, seconds=local.second, microseconds=local.microsecond
    ), offset


# What a signature covers and what was sent: the token's key, the method, the URI's accepted
# forms, the signed hour (the RequestDate's first 13 characters) and the signature.
SignedRequest = tuple[str, str, tuple[str, ...], str, str]


class BodySignature:
    """A signed request whose signature's last step, over the body, is still to be checked:
    fed the body as it arrives, then verified once it has all arrived."""

    def __init__(
        self,
        signed: SignedRequest,
        identity: Identity | None,  # None: the token may not sign (unknown or revoked)
        credentials: accounts.TokenCredentials | None,
        token_id: str,  # as sent, lower-cased
        refusal: str | None,  # why there are no credentials (see accounts.TokenLookup)
        verified: dict[SignedRequest, None],
    ) -> None:
        self.signed = signed
        # Made for the first piece of a body: most requests have none, and one digest call
        # then costs less than an HMAC object.
        self.signers: list[hmac.HMAC] | None = None
        self.sent = signed[4]
        self.identity = identity
        self.credentials = credentials
        self.token_id = token_id
        self.refusal = refusal or accounts.UNKNOWN_TOKEN
        self.verified = verified

    def keys(self) -> list[bytes]:
        """The body's signing key, one per form of the URI accepted."""
        key, method, uris, hour, _ = self.signed
        return [body_key(key, method, uri, hour) for uri in uris]

    def update(self, chunk: bytes) -> None:
        if self.signers is None:
            self.signers = [hmac.new(key, None, hashlib.sha256) for key in self.keys()]
        for signer in self.signers:
            signer.update(chunk)

    def verify(self) -> Identity:
        if self.signers is None and self.signed in self.verified:
            # The same bodiless request (token key, method, URI, hour and signature) was
            # verified before: a client re-asking within the signed hour (a dashboard, a
            # script polling) skips the chain's three HMACs. Only valid signatures are
            # remembered, so a wrong one always takes the full check: its timing tells
            # nothing of what others asked. Measured in process, a signed read answered
            # from memory took 43 us with the HMACs, 32 without.
            if self.identity is None or self.credentials is None:
                raise TokenRefused(self.refusal, self.token_id)
            refuse_expired(self.credentials)
            return self.identity
        if self.signers is None:
            expected = [encode_signature(hmac.digest(k, b"", "sha256")) for k in self.keys()]
        else:
            expected = [encode_signature(signer.digest()) for signer in self.signers]
        valid = False
        for signature in expected:  # every form is compared, so all cost the same
            valid |= signatures_match(signature, self.sent)
        if self.identity is None or self.credentials is None:
            raise TokenRefused(self.refusal, self.token_id)
        if not valid:
            raise TokenRefused(BAD_SIGNATURE, self.token_id)
        if self.signers is None and len(self.signed[2][0]) <= REMEMBERED_URI_LENGTH:
            if len(self.verified) >= SIGNATURE_CACHE_SIZE:
                self.verified.clear()
            self.verified[self.signed] = None
        refuse_expired(self.credentials)
        return self.identity

    def claimed_identity(self) -> Identity:
        """Who the request says it is, before its body, and so its signature, can be checked:
        an upload's token must be known and current before one byte of its body is stored.
        (Unlike `verify`, this tells an unknown or revoked token id from a bad signature; ids
        are random UUIDs, so knowing that one exists is of no use without its key.)"""
        if self.identity is None or self.credentials is None:
            raise TokenRefused(self.refusal, self.token_id, "unknown token id", "unknown_token")
        refuse_expired(self.credentials)
        return self.identity


def refuse_expired(credentials: accounts.TokenCredentials) -> None:
    expires_at = credentials.expires_at
    if expires_at is not None and expires_at <= datetime.now(UTC):
        stamp = expires_at.isoformat().replace("+00:00", "Z")
        raise unauthorized(f"API token expired at {stamp}; create a new one", "expired_token")


class CachedToken(NamedTuple):
    until: float  # time.monotonic() after which the record is read again
    credentials: accounts.TokenCredentials


def owner_of(credentials: accounts.TokenCredentials) -> str | None:
    return None if credentials.principal is None else credentials.principal.user_id


class Authenticator:
    def __init__(self, settings: Settings, jwt_key: bytes, keys: KeyBox) -> None:
        self.settings = settings
        self.jwt_key = jwt_key
        self.keys = keys
        self.permissions: dict[int, frozenset[str]] = {}
        self.tokens: dict[str, CachedToken] = {}
        self.verified_signatures: dict[SignedRequest, None] = {}
        # Token and user ids a change was made to, and the time.monotonic() until which no
        # record of theirs is cached (see `forget_token`).
        self.held: dict[str, float] = {}
        self.max_age = timedelta(seconds=settings.signature_max_age_seconds)
        self.max_future = timedelta(seconds=settings.signature_max_future_seconds)
        self.warned_of_foreign_keys = False  # said once a process (see signature_of)

    async def load(self, conn: Connection) -> None:
        self.permissions = await accounts.role_permissions(conn)

    async def authenticate(self, conn: Connection, request: Request) -> Identity:
        found = await self.authenticate_headers(conn, request)
        if isinstance(found, Identity):
            return found
        body = await request.body()
        if body:
            found.update(body)
        return found.verify()

    async def authenticate_headers(
        self, conn: Connection, request: Request
    ) -> Identity | BodySignature:
        """The caller, as far as the headers tell: a session's user, or a signed request whose
        last step, over the body, the caller still checks (as the body arrives, for uploads)."""
        header = request.headers.get("authorization")
        if not header:
            raise unauthorized("missing Authorization header", "missing_credentials")
        scheme, _, credential = header.strip().partition(" ")
        scheme, credential = scheme.lower(), credential.strip()
        if scheme == "bearer":
            return await self.authenticate_jwt(conn, credential)
        if scheme in SIGNATURE_SCHEMES:
            return await self.authenticate_signature(conn, request, credential)
        raise unauthorized(
            f"unknown authorization scheme {scheme!r}: use 'Bearer <JWT>' or "
            "'svcsignature <TOKEN_ID>'",
            "unknown_scheme",
        )

    async def authenticate_jwt(self, conn: Connection, token: str) -> Identity:
        if not token:
            raise unauthorized("missing JWT after 'Bearer'", "missing_credentials")
        try:
            claims = decode_jwt(self.jwt_key, token)
        except jwt.ExpiredSignatureError:
            raise unauthorized("expired JWT: log in again", "expired_session") from None
        except jwt.InvalidTokenError:
            raise unauthorized("invalid JWT", "invalid_session") from None
        principal = await accounts.find_session_principal(
            conn, claims["sid"], claims["sub"], datetime.now(UTC)
        )
        if principal is None:
            raise unauthorized(
                "session has ended (logged out, expired or user removed)", "ended_session"
            )
        return Identity(principal, session_id=claims["sid"])

    async def authenticate_signature(
        self, conn: Connection, request: Request, token_id: str
    ) -> BodySignature:
        raw_date, sent = self.check_signed_headers(request, token_id)
        token_id = token_id.lower()
        found = await self.look_up_token(conn, token_id)
        return self.signature_of(request, token_id, found, raw_date, sent)

    def identity_from_memory(self, request: Request) -> Identity | None:
        """The caller of a bodiless signed request whose token's record is cached, checked
        as `authenticate` checks it but without a statement; None where the check needs the
        store (a session, a token not cached) or refuses the request (`authenticate` then
        says why, and audits it)."""
        header = request.headers.get("authorization")
        if header is None:
            return None
        scheme, _, credential = header.strip().partition(" ")
        if scheme.lower() not in SIGNATURE_SCHEMES:
            return None
        credential = credential.strip()
        token_id = credential.lower()
        cached = self.tokens.get(token_id)
        if cached is None or time.monotonic() >= cached.until:
            return None
        try:
            raw_date, sent = self.check_signed_headers(request, credential)
            found = accounts.TokenLookup(cached.credentials, None)
            return self.signature_of(request, token_id, found, raw_date, sent).verify()
        except ApiError:
            return None

    def check_signed_headers(self, request: Request, token_id: str) -> tuple[str, str]:
        """A signed request's token id, RequestDate (fresh) and Signature as sent, before its
        token is looked up: the date (stripped) and the signature."""
        if not token_id:
            raise unauthorized("missing token id after the signature scheme", "missing_credentials")
        if not UUID_TEXT.fullmatch(token_id):
            raise unauthorized(
                "malformed token id after the signature scheme: a token id is a UUID",
                "malformed_token_id",
            )
        raw_date = request.headers.get("requestdate")
        if raw_date is None:
            raise unauthorized("missing RequestDate header", "missing_credentials")
        raw_date = raw_date.strip()
        self.check_freshness(raw_date)
        sent = request.headers.get("signature")
        if not sent:
            raise unauthorized("missing Signature header", "missing_credentials")
        return raw_date, sent

    def signature_of(
        self,
        request: Request,
        token_id: str,  # lower-cased
        found: accounts.TokenLookup,
        raw_date: str,
        sent: str,
    ) -> BodySignature:
        credentials = found.credentials
        key = UNKNOWN_TOKEN_KEY
        if credentials is not None:
            try:
                key = self.keys.open(credentials.key_ciphertext)
            except ValueError:
                # Sealed with another key (token-encryption.key lost or replaced, a store
                # restored without it): the signature cannot match; a 401, not a 500.
                self.warn_of_foreign_keys()
        full_uri, path_only = signed_uri(request)
        uris = [full_uri]
        if self.settings.sdk_compatibility and full_uri != path_only:
            uris.append(path_only)
        signed = (key, request.method, tuple(uris), raw_date[:13], sent.strip())
        identity = None
        if credentials is not None:
            identity = Identity(credentials.principal, token_id=token_id)
        return BodySignature(
            signed, identity, credentials, token_id, found.refusal, self.verified_signatures
        )

    def warn_of_foreign_keys(self) -> None:
        if not self.warned_of_foreign_keys:
            self.warned_of_foreign_keys = True
            log.warning(
                "a token's key cannot be opened with the token encryption key "
                "(GRAPHSVC_TOKEN_ENCRYPTION_KEY, else token-encryption.key in the data "
                "folder): it was sealed with another; put that key back (docs/operations.md), "
                "or create the tokens again"
            )

    async def token_credentials(
        self, conn: Connection, token_id: str
    ) -> accounts.TokenCredentials | None:
        """The credentials of a token that may sign (see `look_up_token`)."""
        return (await self.look_up_token(conn, token_id)).credentials

    async def look_up_token(self, conn: Connection, token_id: str) -> accounts.TokenLookup:
        """The token's stored record, reused for `token_cache_seconds`: the lookup is as
        costly as a simple operation. Unknown and revoked ids are not remembered (anyone can
        send those)."""
        now = time.monotonic()
        cached = self.tokens.get(token_id)
        if cached is not None and now < cached.until:
            return accounts.TokenLookup(cached.credentials, None)
        found = await accounts.look_up_token(conn, token_id)
        credentials = found.credentials
        if (
            credentials is None
            or self.settings.token_cache_seconds <= 0
            or self.is_held(token_id, now)
            or self.is_held(owner_of(credentials), now)
        ):
            self.tokens.pop(token_id, None)
            return found
        if len(self.tokens) >= TOKEN_CACHE_SIZE:
            self.tokens.clear()
        self.tokens[token_id] = CachedToken(now + self.settings.token_cache_seconds, credentials)
        return found

    def is_held(self, key: str | None, read_at: float) -> bool:
        """Whether a record read at `read_at` may predate a change to this token or user."""
        return key is not None and read_at < self.held.get(key, float("-inf"))

    def forget_token(self, token_id: str) -> None:
        """A token was revoked: this process refuses it from now on (the others within
        `token_cache_seconds`). Called inside the revoking transaction, so until it commits
        a concurrent request still reads the token's old record; no record of it read in
        the next `token_cache_seconds` is cached, which covers a commit that takes up to
        that long."""
        self.tokens.pop(token_id, None)
        self.hold(token_id)

    def forget_user(self, user_id: str) -> None:
        """A user was deleted, disabled or given another role: every token of it is read
        again, as `forget_token` tells."""
        for token_id in [t for t, c in self.tokens.items() if owner_of(c.credentials) == user_id]:
            del self.tokens[token_id]
        self.hold(user_id)

    def hold(self, key: str) -> None:
        if self.settings.token_cache_seconds <= 0:
            return
        now = time.monotonic()
        self.held = {k: until for k, until in self.held.items() if until > now}
        self.held[key] = now + self.settings.token_cache_seconds

    def check_freshness(self, raw_date: str) -> None:
        """The signature covers only the date's first 13 characters, its hour: whoever
        captured a request can rewrite the minutes, seconds and offset. So the age is measured
        from the start of the signed hour, which no rewriting moves: in UTC a capture is good
        for at most the max age after it was signed. With accept_local_time_signatures the
        offset is a replayer's to choose too, and offsets from -12:00 to +14:00 move the
        signed hour by up to 26 hours more."""
        signed_hour, offset = parse_request_date(raw_date)
        if signed_hour is None or offset is None:
            raise unauthorized(
                "malformed RequestDate header: expected an RFC 3339 date-time", "malformed_date"
            )
        if not self.settings.accept_local_time_signatures and offset:
            raise unauthorized("RequestDate must be in UTC (ending in Z or +00:00)", "date_offset")
        if not EARLIEST_OFFSET <= offset <= LATEST_OFFSET:
            raise unauthorized(
                "RequestDate has an offset no time zone uses (-12:00 to +14:00)", "date_offset"
            )
        now = datetime.now(UTC)
        if now - signed_hour > self.max_age:
            raise unauthorized(
                "stale RequestDate: the signed request is too old (replay)", "stale_date"
            )
        if signed_hour - now > self.max_future:
            raise unauthorized("RequestDate is too far in the future", "future_date")

    def authorize(self, identity: Identity, permission: str | None) -> accounts.Principal:
        """The user the request acts for, if it may act (and holds `permission`, if any)."""
        principal = identity.principal
        if principal is None:
            raise forbidden(
                "this token belongs to a collection client, not to a user", "client_token"
            )
        if principal.disabled:
            raise forbidden("user is disabled", "disabled_user")
        if permission is not None and permission not in self.permissions_of(principal):
            raise forbidden(f"permission {permission} is required", "permission_missing")
        return principal

    def permissions_of(self, principal: accounts.Principal) -> frozenset[str]:
        return self.permissions.get(principal.role_id, frozenset())


class LastAccess:
    """Each token's last access, written after the answer and by one writer at a time: on
    SQLite the write waits behind an ingest's write lock, which a read must not wait for.
    At most one write per token per minute from this process; a token used while the
    writer is busy waits for its next round, never dropped."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.written: dict[str, float] = {}  # token id -> time.monotonic() of its last note
        self.pending: dict[str, datetime] = {}  # token id -> last access not yet written
        self.writer: asyncio.Task[None] | None = None

    def note(self, identity: Identity) -> None:
        token_id = identity.token_id
        if token_id is None:
            return
        now = time.monotonic()
        if now - self.written.get(token_id, float("-inf")) < TOKEN_TOUCH_INTERVAL:
            return
        self.written[token_id] = now
        self.pending[token_id] = datetime.now(UTC)
        if self.writer is None:
            self.writer = asyncio.create_task(self.write())

    async def write(self) -> None:
        try:
            while self.pending:
                pending, self.pending = self.pending, {}
                try:
                    # No answer that is cached shows a token's last access (see `cached`).
                    async with self.db.transaction(changes_answers=False) as conn:
                        for token_id, when in pending.items():
                            await accounts.touch_token(conn, token_id, when)
                except database_errors() as exc:
                    log.debug("last access of %d tokens not written: %s", len(pending), exc)
                    for token_id in pending:
                        self.written.pop(token_id, None)  # written by a later request
        finally:
            self.writer = None

    async def stop(self) -> None:
        """Wait for the writes noted so far (at shutdown)."""
        if self.writer is not None:
            await self.writer
