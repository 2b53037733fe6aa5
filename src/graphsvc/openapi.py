"""The served OpenAPI 3.1 document; its component schemas come from the wire structs."""

from __future__ import annotations

from typing import Any

import msgspec

from graphsvc import models as m

REF = "#/components/schemas/{name}"
ERROR_STATUSES = {
    "400": "Missing, malformed or invalid parameter, header or body",
    "401": "Not authenticated, or authentication failed",
    "403": "Authenticated, but without the permission the operation needs",
    "404": "No such entity",
    "405": "Method not allowed on this path",
    "429": "Rate limit exceeded",
    "500": "Unexpected error, or the request timed out",
}


def ref(struct: type) -> dict[str, str]:
    return {"$ref": REF.format(name=struct.__name__)}


def query(
    name: str,
    schema: dict[str, Any],
    description: str,
    required: bool = False,
    repeated: bool = False,
) -> dict[str, Any]:
    if repeated:
        schema = {"type": "array", "items": schema}
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": schema,
        **({"explode": True} if repeated else {}),
    }


def path(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": schema,
    }


INT32 = {"type": "integer", "format": "int32"}
NON_NEGATIVE = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
DATE_TIME = {"type": "string", "format": "date-time"}
PREFER = {
    "name": "Prefer",
    "in": "header",
    "required": False,
    "description": "wait=<seconds> (default 30, capped by the server) or wait=-1 when enabled",
    "schema": {"type": "string", "pattern": "^wait=(-1|[0-9]+)$"},
}


def time_window_params(sort_columns: str) -> list[dict[str, Any]]:
    return [
        query(
            "sort_by",
            {"type": "string"},
            f"Repeatable; '-' prefix sorts descending. "
            f"Columns: {sort_columns}. Default -created_at.",
            repeated=True,
        ),
        query("start", DATE_TIME, "Inclusive start of the created_at range; default end - 30 days"),
        query("end", DATE_TIME, "Inclusive end of the created_at range; default now"),
        query("skip", NON_NEGATIVE, "Items to skip; default 0"),
        query("limit", NON_NEGATIVE, "Most items returned; default 1000, at most the max"),
    ]


def operation(
    summary: str,
    op_id: str,
    response: type,
    parameters: list[dict[str, Any]],
    permission: str,
    statuses: list[str],
) -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": {"description": "OK", "content": {"application/json": {"schema": ref(response)}}},
    }
    for status in statuses:
        responses[status] = {"$ref": f"#/components/responses/Error{status}"}
    return {
        "get": {
            "summary": summary,
            "operationId": op_id,
            "description": f"Requires the permission `{permission}`.",
            "parameters": [*parameters, PREFER],
            "security": [
                {"SignedRequest": [], "RequestDate": [], "Signature": []},
                {"BearerJWT": []},
            ],
            "responses": responses,
        }
    }


ALL_ERRORS = ["400", "401", "403", "404", "405", "429", "500"]


def build_openapi() -> dict[str, Any]:
    structs = [
        m.PagedAggregations,
        m.PagedTenantStats,
        m.SamlProviderResponse,
        m.ClientResponse,
        m.PagedNodeList,
        m.ErrorBody,
        m.LoginRequest,
        m.LoginResponse,
        m.LogoutResponse,
        m.HealthResponse,
    ]
    _, schemas = msgspec.json.schema_components(structs, ref_template=REF)
    v2 = "/api/v2"
    paths: dict[str, Any] = {
        f"{v2}/data-quality-stats-aggregations": operation(
            "Data quality aggregations by environment kind",
            "ListDataQualityAggregations",
            m.PagedAggregations,
            [
                query("schema_environment_kind_id", INT32, "Environment kind id", required=True),
                query("schema_extension_id", INT32, "Graph schema extension id; 404 if unknown"),
                *time_window_params("created_at, updated_at"),
            ],
            "graphdb/Read",
            ALL_ERRORS,
        ),
        f"{v2}/azure-tenants/{{tenant_id}}/data-quality-stats": operation(
            "Azure tenant data quality stats",
            "ListAzureTenantDataQualityStats",
            m.PagedTenantStats,
            [
                path(
                    "tenant_id",
                    {"type": "string", "format": "uuid"},
                    "Tenant id, matched case-insensitively",
                ),
                *time_window_params("created_at, updated_at"),
            ],
            "graphdb/Read",
            ALL_ERRORS,
        ),
        f"{v2}/saml/providers/{{saml_provider_id}}": operation(
            "Get SAML provider",
            "GetSAMLProvider",
            m.SamlProviderResponse,
            [path("saml_provider_id", INT32, "SAML provider id")],
            "auth/ManageProviders",
            ALL_ERRORS,
        ),
        f"{v2}/clients/{{client_id}}": operation(
            "Get client (Enterprise edition)",
            "GetClient",
            m.ClientResponse,
            [path("client_id", {"type": "string", "format": "uuid"}, "Client id")],
            "clients/Read",
            ALL_ERRORS,
        ),
        f"{v2}/computers/{{object_id}}/dcom-rights": operation(
            "Entities with DCOM rights on a computer",
            "ListComputerDCOMRights",
            m.PagedNodeList,
            [
                path("object_id", {"type": "string"}, "Computer object id, case-insensitive"),
                query("skip", NON_NEGATIVE, "Items to skip; default 0"),
                query("limit", NON_NEGATIVE, "Most items returned; default 10"),
                query(
                    "type",
                    {"type": "string", "enum": ["list", "graph"]},
                    "Only 'list' is supported; 'graph' is a 400",
                ),
                query(
                    "sort_by",
                    {"type": "string"},
                    "Repeatable; '-' prefix sorts descending."
                    " Columns: name, objectid, label. Default name, objectid.",
                    repeated=True,
                ),
            ],
            "graphdb/Read",
            ALL_ERRORS,
        ),
        f"{v2}/login": {
            "post": {
                "summary": "Log in with a secret; returns a session JWT",
                "operationId": "Login",
                "security": [],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": ref(m.LoginRequest)}},
                },
                "responses": {
                    "200": {
                        "description": "OK",
                        "content": {"application/json": {"schema": ref(m.LoginResponse)}},
                    },
                    **{
                        s: {"$ref": f"#/components/responses/Error{s}"}
                        for s in ["400", "401", "403", "429", "500"]
                    },
                },
            }
        },
        f"{v2}/logout": {
            "post": {
                "summary": "End the session of the Bearer JWT",
                "operationId": "Logout",
                "security": [{"BearerJWT": []}],
                "responses": {
                    "200": {
                        "description": "OK",
                        "content": {"application/json": {"schema": ref(m.LogoutResponse)}},
                    },
                    **{
                        s: {"$ref": f"#/components/responses/Error{s}"}
                        for s in ["400", "401", "429", "500"]
                    },
                },
            }
        },
        "/health": {
            "get": {
                "summary": "Liveness and database reachability",
                "operationId": "Health",
                "security": [],
                "responses": {
                    "200": {
                        "description": "OK",
                        "content": {"application/json": {"schema": ref(m.HealthResponse)}},
                    },
                    "503": {"$ref": "#/components/responses/Error503"},
                },
            }
        },
        f"{v2}/spec/openapi.json": {
            "get": {
                "summary": "This document",
                "operationId": "OpenAPIDocument",
                "security": [],
                "responses": {
                    "200": {
                        "description": "OK",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
    }
    responses: dict[str, dict[str, Any]] = {
        f"Error{status}": {
            "description": text,
            "headers": {"RequestID": {"schema": {"type": "string", "format": "uuid"}}},
            "content": {"application/json": {"schema": ref(m.ErrorBody)}},
        }
        for status, text in {**ERROR_STATUSES, "503": "The database is unreachable"}.items()
    }
    whole_seconds = {"schema": {"type": "integer", "minimum": 0}}
    responses["Error429"]["headers"].update({
        "Retry-After": {"description": "Seconds to wait before retrying", **whole_seconds},
        "RateLimit-Limit": {"description": "Requests allowed in the window", **whole_seconds},
        "RateLimit-Remaining": {"description": "Requests left in the window", **whole_seconds},
        "RateLimit-Reset": {"description": "Seconds until the window frees", **whole_seconds},
    })  # fmt: skip
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Graph Analysis Service API",
            "version": "v2",
            "description": "graphsvc: data-quality statistics, SAML providers, collection "
            "clients and computer DCOM rights. Every error is the JSON error body.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": responses,
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
