"""The request signature (the spec's svcsignature): its HMAC chain, and the date it signs.

Standard library only: `graphsvc sign`, run once per request in the README, imports this and
not `graphsvc.crypto` (JWT, argon2 and Fernet: 60 to 100 ms of imports)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime

HMAC_METHOD = "hmac-sha2-256"


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
