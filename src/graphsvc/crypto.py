"""Secrets: the request-signature HMAC chain, token keys at rest, password digests, JWTs."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from datetime import UTC, datetime
from functools import cache, lru_cache

import jwt
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from cryptography.fernet import Fernet, InvalidToken

HMAC_METHOD = "hmac-sha2-256"
UUID_FORM = re.compile(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}")  # as uuid4() writes it


def body_key(key: str, method: str, uri: str, request_date: str) -> bytes:
    """The spec's three-step chain up to its last step (method+URI, then the date cut to the
    hour): the key the body is signed with."""
    operation_key = hmac.digest(key.encode(), (method + uri).encode(), "sha256")
    return hmac.digest(operation_key, request_date[:13].encode(), "sha256")


def body_signer(key: str, method: str, uri: str, request_date: str) -> hmac.HMAC:
    """The chain's last step, to be fed the body, which may arrive in pieces."""
    return hmac.new(body_key(key, method, uri, request_date), None, hashlib.sha256)


def encode_signature(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


def request_date() -> str:
    """A RequestDate for a request signed now: UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def sign_request(key: str, method: str, uri: str, request_date: str, body: bytes) -> str:
    return encode_signature(hmac.digest(body_key(key, method, uri, request_date), body, "sha256"))


def signatures_match(expected: str, sent: str) -> bool:
    return hmac.compare_digest(expected.encode(), sent.encode())


def new_token_key() -> str:
    return secrets.token_urlsafe(40)


class KeyBox:
    """Encrypts token keys at rest with the configured Fernet key.

    Decrypted keys are remembered by their ciphertext (a signed request needs its token's key
    every time, and decryption is a third of the cost of authenticating): a changed or deleted
    key has a new ciphertext or none, so nothing stale can be served from memory.
    """

    def __init__(self, key: bytes) -> None:
        self.fernet = Fernet(key)
        self.remembered = lru_cache(maxsize=4096)(self.decrypt)

    def seal(self, plain: str) -> str:
        return self.fernet.encrypt(plain.encode()).decode()

    def open(self, sealed: str) -> str:
        return self.remembered(sealed)

    def decrypt(self, sealed: str) -> str:
        try:
            return self.fernet.decrypt(sealed.encode()).decode()
        except InvalidToken as exc:
            raise ValueError("token key cannot be decrypted with the configured key") from exc


password_hasher = PasswordHasher()


@cache
def dummy_digest() -> str:
    """Verified against when the user does not exist, so both failures take the same time."""
    return password_hasher.hash(secrets.token_urlsafe(16))


def hash_secret(secret: str) -> str:
    return password_hasher.hash(secret)


def verify_secret(digest: str | None, secret: str) -> bool:
    try:
        return password_hasher.verify(digest or dummy_digest(), secret) and digest is not None
    except (VerificationError, InvalidHashError):
        return False


def issue_jwt(signing_key: bytes, user_id: str, session_id: str, expires_at: datetime) -> str:
    claims = {"sub": user_id, "sid": session_id, "exp": expires_at}
    return jwt.encode(claims, signing_key, algorithm="HS256")


def decode_jwt(signing_key: bytes, token: str) -> dict[str, str]:
    """Raises jwt.ExpiredSignatureError or jwt.InvalidTokenError."""
    claims: dict[str, str] = jwt.decode(
        token, signing_key, algorithms=["HS256"], options={"require": ["exp", "sub", "sid"]}
    )
    # Only this service signs these, but a leaked key must not turn odd claims into a 500.
    for name in ("sub", "sid"):
        value = claims[name]
        if not isinstance(value, str) or not UUID_FORM.fullmatch(value):
            raise jwt.InvalidTokenError(f"claim {name} is not a UUID")
    return claims
