"""SAML identity providers."""

from __future__ import annotations

from datetime import datetime

import msgspec

from graphsvc.wire.common import NullInt32, NullTime


class SamlProvider(msgspec.Struct):
    id: int
    created_at: datetime
    updated_at: datetime
    deleted_at: NullTime
    name: str
    display_name: str
    idp_issuer_uri: str
    idp_sso_uri: str
    principal_attribute_mappings: list[str]
    sp_issuer_uri: str
    sp_sso_uri: str
    sp_metadata_uri: str
    sp_acs_uri: str
    sso_provider_id: NullInt32


class SamlProviderResponse(msgspec.Struct):
    data: SamlProvider


class SamlProviderList(msgspec.Struct):
    saml_providers: list[SamlProvider]


class SamlProviderListResponse(msgspec.Struct):
    data: SamlProviderList
