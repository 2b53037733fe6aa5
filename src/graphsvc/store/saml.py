"""SAML identity providers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from graphsvc.store.db import Connection, Row
from graphsvc.store.dialect import in_list, list_param


@dataclass
class SamlProviderRow:
    id: int
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    name: str
    display_name: str
    idp_issuer_uri: str
    idp_sso_uri: str
    principal_attribute_mappings: list[str]
    sso_provider_id: int | None


PROVIDER_COLUMNS = """id, created_at, updated_at, deleted_at, name, display_name,
    idp_issuer_uri, idp_sso_uri, principal_attribute_mappings, sso_provider_id"""


def provider_from_row(row: Row) -> SamlProviderRow:
    (
        provider_id,
        created_at,
        updated_at,
        deleted_at,
        name,
        display_name,
        idp_issuer_uri,
        idp_sso_uri,
        mappings,
        sso_provider_id,
    ) = row
    return SamlProviderRow(
        id=provider_id,
        created_at=created_at,
        updated_at=updated_at,
        deleted_at=deleted_at,
        name=name,
        display_name=display_name,
        idp_issuer_uri=idp_issuer_uri,
        idp_sso_uri=idp_sso_uri,
        principal_attribute_mappings=json.loads(mappings),
        sso_provider_id=sso_provider_id,
    )


async def find_saml_provider(conn: Connection, provider_id: int) -> SamlProviderRow | None:
    row = await conn.fetchrow(
        f"""SELECT {PROVIDER_COLUMNS} FROM saml_providers
        WHERE id = $1 AND deleted_at IS NULL""",
        provider_id,
    )
    return None if row is None else provider_from_row(row)


async def list_saml_providers(conn: Connection) -> list[SamlProviderRow]:
    """Every live provider, by id, in one statement."""
    rows = await conn.fetch(
        f"""SELECT {PROVIDER_COLUMNS} FROM saml_providers
        WHERE deleted_at IS NULL ORDER BY id"""
    )
    return [provider_from_row(row) for row in rows]


async def insert_saml_provider(
    conn: Connection,
    name: str,
    display_name: str,
    idp_issuer_uri: str,
    idp_sso_uri: str,
    mappings: Sequence[str],
    now: datetime,
) -> int:
    provider_id: int = await conn.fetchval(
        """INSERT INTO saml_providers (name, display_name, idp_issuer_uri, idp_sso_uri,
            principal_attribute_mappings, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING id""",
        name,
        display_name,
        idp_issuer_uri,
        idp_sso_uri,
        json.dumps(list(mappings)),
        now,
    )
    return provider_id


async def saml_provider_name_taken(conn: Connection, name: str) -> bool:
    return await conn.fetchval("SELECT 1 FROM saml_providers WHERE name = $1", name) is not None


async def find_provider_ids(conn: Connection, names: Sequence[str]) -> dict[str, int]:
    """The ids of the live providers among these names."""
    rows = await conn.fetch(
        f"""SELECT name, id FROM saml_providers
        WHERE {in_list(conn.dialect, "name", "$1")} AND deleted_at IS NULL""",
        list_param(conn.dialect, names),
    )
    return {name: provider_id for name, provider_id in rows}
