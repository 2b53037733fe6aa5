"""The served OpenAPI 3.1 document, built from the operations table; its component schemas
come from the wire structs the operations answer with."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

import msgspec

from graphsvc import wire
from graphsvc.api.routes import OPERATIONS, Operation
from graphsvc.uploads import UPLOAD_LIMIT_HEADER
from graphsvc.uploads.jobs import ACCEPTED_TYPES

REF = "#/components/schemas/{name}"
ERROR_STATUSES = {
    "400": "Missing, malformed or invalid parameter, header or body",
    "401": "Not authenticated, or authentication failed",
    "403": "Authenticated, but without the permission the operation needs",
    "404": "No such entity",
    "405": "Method not allowed on this path",
    "408": "The request body stalled, or arrived slower than the server's minimum rate",
    "409": (
        "The name is taken by another user, or the user's secret changed while the "
        "current one was being checked"
    ),
    "413": "The request body is larger than the server accepts",
    "415": "The request body's Content-Type is not one the operation accepts",
    "429": "Rate limit exceeded",
    "500": "Unexpected error, or the request timed out",
    "503": (
        "The database is unreachable, its connections all stayed in use, or a SQLite store "
        "is busy with another write"
    ),
    "507": "The server's disk is full: the file was not kept",
}
PREFER = {
    "name": "Prefer",
    "in": "header",
    "required": False,
    "description": "wait=<seconds> (default 30, capped by the server) or wait=-1 when enabled",
    "schema": {"type": "string", "pattern": "^wait=(-1|[0-9]+)$"},
}
IF_NONE_MATCH = {
    "name": "If-None-Match",
    "in": "header",
    "required": False,
    "description": "ETags of answers the client holds: 304 when one is the current answer's",
    "schema": {"type": "string"},
}
ANSWER_HEADERS = {
    "ETag": {
        "description": (
            "Names this answer while the data behind it is unchanged: strong, but weak (W/) "
            "for a statistics window that ends now, where it names the records"
        ),
        "schema": {"type": "string"},
    },
    "Cache-Control": {"schema": {"type": "string", "const": "private, no-cache"}},
}
PAGE_HEADERS = {
    "ETag": {"description": "Names the release's console files", "schema": {"type": "string"}},
    "Cache-Control": {"schema": {"type": "string", "const": "no-cache"}},
    "Content-Security-Policy": {
        "description": "Only this server's own scripts, styles and connections",
        "schema": {"type": "string"},
    },
}
DOWNLOAD_HEADERS = {
    "Content-Disposition": {
        "description": "attachment, with the file name to save it under",
        "schema": {"type": "string"},
    },
}
SECURITY: dict[str, list[dict[str, list[str]]]] = {
    "any": [{"SignedRequest": [], "RequestDate": [], "Signature": []}, {"BearerJWT": []}],
    "session": [{"BearerJWT": []}],
    "none": [],
}


def ref(struct: Any) -> dict[str, Any]:
    """A schema's reference; a list of a struct (a body that is a JSON array) is an array of
    its references."""
    if typing.get_origin(struct) is list:
        return {"type": "array", "items": ref(typing.get_args(struct)[0])}
    return {"$ref": REF.format(name=struct.__name__)}


def structs_of(schema: Any) -> list[type[msgspec.Struct]]:
    return list(typing.get_args(schema)) if typing.get_origin(schema) is list else [schema]


def json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def document_operation(op: Operation) -> dict[str, Any]:
    content: dict[str, Any]
    if op.downloads:
        content = {t: {"schema": {"type": "string", "format": "binary"}} for t in op.downloads}
        if op.download_json is not None and "application/json" in content:
            one = ref(op.download_json)
            content["application/json"] = {
                "schema": {"oneOf": [one, {"type": "array", "items": one}]}
            }
    elif op.media_type != "application/json":
        content = {op.media_type: {"schema": {"type": "string"}}}
    else:
        content = json_content(ref(op.response) if op.response else {"type": "object"})
    responses: dict[str, Any] = {
        str(op.status): {"description": HTTPStatus(op.status).phrase, "content": content}
    }
    if op.response is None and op.status in (HTTPStatus.NO_CONTENT, HTTPStatus.ACCEPTED):
        del responses[str(op.status)]["content"]  # answered with no content
    if op.tells_upload_limit:
        responses[str(op.status)]["headers"] = {
            UPLOAD_LIMIT_HEADER: {
                "description": "The largest file the server takes in one upload, in bytes",
                "schema": {"type": "integer", "minimum": 1},
            }
        }
    conditional = op.authentication == "any" and not op.writes
    if conditional:
        responses[str(op.status)]["headers"] = ANSWER_HEADERS
        if op.downloads:
            responses[str(op.status)]["headers"] = {**ANSWER_HEADERS, **DOWNLOAD_HEADERS}
        responses["304"] = {
            "description": "Not Modified: `If-None-Match` names the current answer (no body)",
            "headers": ANSWER_HEADERS,
        }
    if op.page:
        responses[str(op.status)]["headers"] = PAGE_HEADERS
        responses["304"] = {
            "description": "Not Modified: the browser holds this release's page (no body)",
            "headers": PAGE_HEADERS,
        }
    for status in op.errors:
        responses[status] = {"$ref": f"#/components/responses/Error{status}"}
    document: dict[str, Any] = {"summary": op.summary, "operationId": op.operation_id}
    if op.permission is not None:
        document["description"] = f"Requires the permission `{op.permission}`."
    if op.authentication == "any":  # served by the app, under the Prefer timeout
        parameters = [doc for p in op.parameters for doc in p.document()]
        document["parameters"] = [*parameters, PREFER, *([IF_NONE_MATCH] if conditional else [])]
    elif op.parameters:
        document["parameters"] = [doc for p in op.parameters for doc in p.document()]
    if op.count_field is not None:
        document["x-count-field"] = op.count_field
    document["security"] = SECURITY[op.authentication]
    if op.request_body is not None:
        document["requestBody"] = {"required": True, "content": json_content(ref(op.request_body))}
    if op.upload:
        binary = {"schema": {"type": "string", "format": "binary"}}
        document["requestBody"] = {
            "required": True,
            "description": op.upload_description,
            "content": dict.fromkeys(ACCEPTED_TYPES, binary),
        }
    document["responses"] = responses
    return document


def error_responses() -> dict[str, dict[str, Any]]:
    responses: dict[str, dict[str, Any]] = {
        f"Error{status}": {
            "description": text,
            "headers": {"RequestID": {"schema": {"type": "string", "format": "uuid"}}},
            "content": json_content(ref(wire.ErrorBody)),
        }
        for status, text in ERROR_STATUSES.items()
    }
    whole_seconds = {"schema": {"type": "integer", "minimum": 0}}
    responses["Error429"]["headers"].update(
        {
            "Retry-After": {"description": "Seconds to wait before retrying", **whole_seconds},
            "RateLimit-Limit": {"description": "Requests allowed in the window", **whole_seconds},
            "RateLimit-Remaining": {"description": "Requests left in the window", **whole_seconds},
            "RateLimit-Reset": {"description": "Seconds until the window frees", **whole_seconds},
        }
    )
    return responses


def build_openapi(operations: Sequence[Operation] = OPERATIONS) -> dict[str, Any]:
    structs: list[type[msgspec.Struct]] = [wire.ErrorBody]
    for op in operations:
        for schema in (op.response, op.request_body, op.download_json):
            structs += structs_of(schema) if schema is not None else []
    _, schemas = msgspec.json.schema_components(dict.fromkeys(structs), ref_template=REF)
    for schema in schemas.values():
        # msgspec 0.23 dedents a docstring's later lines and earlier releases kept them as
        # written: cleaned here, the document is the same whichever release is installed.
        if "description" in schema:
            schema["description"] = inspect.cleandoc(schema["description"])
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        paths.setdefault(op.path, {})[op.method.lower()] = document_operation(op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Graph Analysis Service API",
            "version": "v2",
            "description": "graphsvc: data-quality statistics, the attack graph's entities "
            "and their lists, shortest paths and exposure, SAML providers, collection clients, "
            "accounts, tokens, uploads and the audit log. Every error is the JSON error body.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": error_responses(),
            "securitySchemes": {
                "BearerJWT": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                "SignedRequest": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "Authorization",
                    "description": "'svcsignature <TOKEN_ID>', with RequestDate and Signature "
                    "(base64 HMAC-SHA-256 chain over method+URI, the date to the hour, the body)",
                },
                "RequestDate": {"type": "apiKey", "in": "header", "name": "RequestDate"},
                "Signature": {"type": "apiKey", "in": "header", "name": "Signature"},
            },
        },
    }
