"""The Azure entity route's answers, in the reference's shapes: an object's properties with
the size of each of its lists (keys as the reference spells them, camel case, hyphens and
all), or one page of one list, whose items carry their properties (`props`)."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from graphsvc.wire.common import Count


class AzureNode(msgspec.Struct, kw_only=True):
    """An Azure object: its kind (the first of its kinds), every kind (its tags' labels
    included), whether it is in Tier Zero or owned, and its properties."""

    kind: str
    kinds: list[str]
    isTierZero: bool
    isOwnedObject: bool
    props: dict[str, Any]


class AzureDescendants(msgspec.Struct):
    """How many objects of each kind a container holds, at any depth."""

    descendent_counts: dict[str, Count]


class AzureVaultReaders(msgspec.Struct):
    """Who may read a key vault's keys, certificates and secrets, and all of them."""

    KeyReaders: Count
    CertificateReaders: Count
    SecretReaders: Count
    AllReaders: Count


class AzureEntity(AzureNode, kw_only=True, omit_defaults=True):
    """An Azure object and, unless counts=false, the size of each of its lists (the kinds of
    entity have different lists: the reference's keys)."""

    group_membership: Count | UnsetType = UNSET
    group_members: Count | UnsetType = UNSET
    roles: Count | UnsetType = UNSET
    execution_privileges: Count | UnsetType = UNSET
    inboundExecutionPrivileges: Count | UnsetType = UNSET
    outbound_object_control: Count | UnsetType = UNSET
    inbound_object_control: Count | UnsetType = UNSET
    inbound_abusable_app_role_assignments: Count | UnsetType = msgspec.field(
        default=UNSET, name="inbound-abusable-app-role-assignments"
    )
    outbound_abusable_app_role_assignments: Count | UnsetType = msgspec.field(
        default=UNSET, name="outbound-abusable-app-role-assignments"
    )
    active_assignments: Count | UnsetType = UNSET
    pim_assignments: Count | UnsetType = UNSET
    approvers: Count | UnsetType = UNSET
    descendents: AzureDescendants | UnsetType = UNSET
    Readers: AzureVaultReaders | UnsetType = UNSET


class AzureEntityResponse(msgspec.Struct, kw_only=True, omit_defaults=True):
    """GET /api/v2/azure/{entity_type}: the object (`data`, an object), or with
    related_entity_type one page of that list (`data`, an array) and its paging."""

    data: AzureEntity | list[AzureNode]
    count: Count | UnsetType = UNSET
    limit: Count | UnsetType = UNSET
    skip: Count | UnsetType = UNSET
