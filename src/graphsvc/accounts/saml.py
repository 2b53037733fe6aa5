"""SAML identity providers: read (`auth/ManageProviders`) and created (CLI and demo)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from graphsvc import wire
from graphsvc.errors import bad_request, conflict, not_found
from graphsvc.store import saml
from graphsvc.store.db import Connection


def build_saml_provider(row: saml.SamlProviderRow, base_url: str) -> wire.SamlProvider:
    """A provider as the API shows it, with this service's SP URIs under `base_url`."""
    sp = f"{base_url.rstrip('/')}/api/v2/sso/{row.name}"
    return wire.SamlProvider(
        row.id,
        row.created_at,
        row.updated_at,
        wire.null_time(row.deleted_at),
        row.name,
        row.display_name,
        row.idp_issuer_uri,
        row.idp_sso_uri,
        row.principal_attribute_mappings,
        sp,
        f"{sp}/login",
        f"{sp}/metadata",
        f"{sp}/callback",
        wire.null_int32(row.sso_provider_id),
    )


async def get_saml_provider(
    conn: Connection, provider_id: int, base_url: str
) -> wire.SamlProviderResponse:
    row = await saml.find_saml_provider(conn, provider_id)
    if row is None:
        raise not_found(f"SAML provider {provider_id} does not exist", "saml_provider_id")
    return wire.SamlProviderResponse(build_saml_provider(row, base_url))


async def list_saml_providers(conn: Connection, base_url: str) -> wire.SamlProviderListResponse:
    providers = [build_saml_provider(row, base_url) for row in await saml.list_saml_providers(conn)]
    return wire.SamlProviderListResponse(wire.SamlProviderList(providers))


async def create_saml_provider(
    conn: Connection,
    name: str,
    display_name: str,
    idp_issuer_uri: str,
    idp_sso_uri: str,
    mappings: Sequence[str],
) -> int:
    if not name or "/" in name or name != name.strip():
        raise bad_request(f"SAML provider name {name!r} must be non-empty, without '/'", "name")
    if await saml.saml_provider_name_taken(conn, name):
        raise conflict(f"a SAML provider named {name!r} already exists", "name")
    return await saml.insert_saml_provider(
        conn, name, display_name, idp_issuer_uri, idp_sso_uri, mappings, datetime.now(UTC)
    )
