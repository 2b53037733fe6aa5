"""The HTTP side of a file upload: the content type it is accepted as (else 415), the name
Content-Disposition gives it, and its body received into a temporary file, with a signed
request's signature checked as the body arrives."""

from __future__ import annotations

import re
from typing import IO

from graphsvc.api.auth import Authenticator, Identity
from graphsvc.api.web import Request
from graphsvc.errors import ApiError
from graphsvc.store.db import Database
from graphsvc.uploads.jobs import ACCEPTED_TYPES, UploadedBody

FILE_NAME = re.compile(r"""filename\*?=(?:UTF-8'')?"?([^";]+)"?""", re.IGNORECASE)


def accepted_content_type(header: str | None) -> str:
    """The media type of an upload, or a 415 naming the accepted ones."""
    media_type = (header or "").partition(";")[0].strip().lower()
    if media_type not in ACCEPTED_TYPES:
        raise ApiError(
            415,
            f"Content-Type {media_type or '(none)'!r} is not accepted; send one of "
            f"{', '.join(ACCEPTED_TYPES)}",
            "Content-Type",
            {"Connection": "close"},  # the body is not read
        )
    return media_type


def file_name(content_disposition: str | None, content_type: str) -> str | None:
    """The name a client gave its file (Content-Disposition's filename), cut to its last
    path segment, with the extension its content type calls for."""
    found = FILE_NAME.search(content_disposition or "")
    if found is None:
        return None
    name = re.split(r"[/\\]", found.group(1).strip())[-1]
    name = "".join(c for c in name if c.isprintable())[:200].strip(". ")
    if not name:
        return None
    suffix = ACCEPTED_TYPES[content_type]
    return name if name.lower().endswith(suffix) else name + suffix


async def receive_upload(
    request: Request, spool: IO[bytes], content_type: str, auth: Authenticator, db: Database
) -> Identity:
    """Authenticate from the headers, then receive the body (of `content_type`, accepted)
    into `spool`, checking a signed request's signature as it arrives; it answers for nothing
    until the whole body has arrived and the signature holds. Sets `request.upload`."""
    async with db.reading() as conn:
        found = await auth.authenticate_headers(conn, request)
    if isinstance(found, Identity):
        size = await request.spool_body(spool, None)
        identity = found
    else:
        size = await request.spool_body(spool, found)
        identity = found.verify()
    name = file_name(request.headers.get("content-disposition"), content_type)
    request.upload = UploadedBody(spool, size, content_type, name)
    return identity
