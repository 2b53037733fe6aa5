"""JSON responses, and the spec's error body that every failure is rendered as."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
from starlette.responses import Response

from graphsvc import models as m

encode = msgspec.json.Encoder().encode


def json_response(
    body: msgspec.Struct, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(encode(body), status, headers, media_type="application/json")


def error_response(
    request_id: str, status: int, message: str, context: str, headers: dict[str, str] | None = None
) -> Response:
    body = m.ErrorBody(status, datetime.now(UTC), request_id, [m.ErrorDetail(context, message)])
    return json_response(body, status, {**(headers or {}), "RequestID": request_id})
