"""SAML identity providers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from graphsvc.store.db import Connection, in_list, list_param


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


async def find_saml_provider(conn: Connection, provider_id: int) -> SamlProviderRow | None:
    r = await conn.fetchrow(
        """SELECT id, created_at, updated_at, deleted_at, name, display_name, idp_issuer_uri,
            idp_sso_uri, principal_attribute_mappings, sso_provider_id
        FROM saml_providers WHERE id = $1 AND deleted_at IS NULL""",
        provider_id,
    )
    if r is None:
        return None
    return SamlProviderRow(
        id=r[0],
        created_at=r[1],
        updated_at=r[2],
        deleted_at=r[3],
        name=r[4],
        display_name=r[5],
        idp_issuer_uri=r[6],
        idp_sso_uri=r[7],
        principal_attribute_mappings=json.loads(r[8]),
        sso_provider_id=r[9],
    )


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


async def list_provider_ids(conn: Connection) -> list[int]:
    rows = await conn.fetch("SELECT id FROM saml_providers WHERE deleted_at IS NULL ORDER BY id")
    return [r[0] for r in rows]
