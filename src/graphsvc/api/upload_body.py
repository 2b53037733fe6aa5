"""The HTTP side of a file upload: the content type it is accepted as (else 415), the name
Content-Disposition gives it, and its body received into a temporary file, with a signed
request's signature checked as the body arrives."""

from __future__ import annotations

import errno
import re
from typing import IO
from urllib.parse import unquote

from graphsvc.api.auth import BodySignature, Identity
from graphsvc.api.web import CLOSE, Request
from graphsvc.errors import ApiError
from graphsvc.uploads.jobs import ACCEPTED_TYPES, UploadedBody

FILE_NAME = re.compile(r"""filename="?([^";]+)"?""", re.IGNORECASE)
# RFC 5987's form, which a browser must use for a name beyond Latin-1 (a header holds no
# other characters): percent-encoded UTF-8. It wins over `filename=` (RFC 6266).
EXTENDED_FILE_NAME = re.compile(r"filename\*=UTF-8''([^;\s]+)", re.IGNORECASE)


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


def file_name(
    upload_name: str | None, content_disposition: str | None, content_type: str
) -> str | None:
    """The name a client gave its file: the reference web client's X-File-Upload-Name, else
    Content-Disposition's filename* (UTF-8) or filename; cut to its last path segment, with
    the extension its content type calls for, and at most 200 bytes of UTF-8: a name that
    is longer loses characters before its extension (200 characters were up to 800 bytes,
    past the 255 a file name may have)."""
    most = 200
    extended = EXTENDED_FILE_NAME.search(content_disposition or "")
    found = FILE_NAME.search(content_disposition or "")
    if upload_name:
        raw = upload_name
    elif extended is not None:
        raw = unquote(extended.group(1), encoding="utf-8", errors="replace")
    else:
        raw = found.group(1) if found else ""
    name = re.split(r"[/\\]", raw.strip())[-1]
    name = "".join(c for c in name if c.isprintable()).strip(". ")
    if not name:
        return None
    suffix = ACCEPTED_TYPES[content_type]
    if name.lower().endswith(suffix):
        name, suffix = name[: -len(suffix)], name[-len(suffix) :]
    # Cut in bytes, then back to whole characters: a character cut in two is dropped.
    return name.encode()[: most - len(suffix)].decode("utf-8", "ignore") + suffix


async def receive_upload(
    request: Request, spool: IO[bytes], content_type: str, found: Identity | BodySignature
) -> None:
    """Receive the body (of `content_type`, accepted) into `spool`, checking a signed
    request's signature as it arrives and once it has all arrived; sets `request.upload`.
    A full disk is a 507, the part received dropped with `spool`."""
    signature = None if isinstance(found, Identity) else found
    try:
        size = await request.spool_body(spool, signature)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise ApiError(
            507,
            "the server's disk is full: the file was not kept; try again later or tell its "
            "operator",
            "body",
            CLOSE,
            code="disk_full",
        ) from None
    if signature is not None:
        signature.verify()
    name = file_name(
        request.headers.get("x-file-upload-name"),
        request.headers.get("content-disposition"),
        content_type,
    )
    request.upload = UploadedBody(spool, size, content_type, name)
