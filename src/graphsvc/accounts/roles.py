"""Roles and their permissions, as the reference lists them (`GET /api/v2/roles`, `GET
/api/v2/permissions`) and as a user or a caller shows its one role."""

from __future__ import annotations

from collections.abc import Sequence

from graphsvc import wire
from graphsvc.store import accounts
from graphsvc.store.db import Connection
from graphsvc.store.filters import Filter
from graphsvc.store.paging import SortKey


def build_permission(row: accounts.PermissionRow) -> wire.Permission:
    return wire.Permission(row.id, row.authority, row.name)


def build_role(row: accounts.RoleRow) -> wire.Role:
    return wire.Role(
        row.id, row.name, row.description, [build_permission(p) for p in row.permissions]
    )


async def read_role(conn: Connection, role_id: int) -> wire.Role:
    row = await accounts.read_role(conn, role_id)
    if row is None:  # the users' foreign key keeps every user's role
        raise LookupError(f"no role {role_id}")
    return build_role(row)


async def list_roles(
    conn: Connection, filters: Sequence[Filter], sort: Sequence[SortKey]
) -> wire.RoleListResponse:
    rows = await accounts.list_roles(conn, filters, sort)
    return wire.RoleListResponse(wire.RoleList([build_role(r) for r in rows]))


async def list_permissions(
    conn: Connection, filters: Sequence[Filter], sort: Sequence[SortKey]
) -> wire.PermissionListResponse:
    rows = await accounts.list_permissions(conn, filters, sort)
    return wire.PermissionListResponse(wire.PermissionList([build_permission(r) for r in rows]))
