"""Secrets: token keys and their encryption at rest, password digests, JWTs. The request
signature's HMAC chain is in `graphsvc.signatures`."""

from __future__ import annotations

import re
import secrets
from datetime import datetime
from functools import cache, lru_cache

import jwt
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from cryptography.fernet import Fernet, InvalidToken

UUID_FORM = re.compile(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}")  # as uuid4() writes it


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
