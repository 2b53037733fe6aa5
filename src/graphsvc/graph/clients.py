"""Collection clients (Enterprise edition): read (`clients/Read`) and created with their
token (CLI and demo)."""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from graphsvc import wire
from graphsvc.accounts.tokens import CreatedToken, create_token
from graphsvc.crypto import KeyBox
from graphsvc.errors import bad_request, conflict, not_found
from graphsvc.store import clients
from graphsvc.store.db import Connection
from graphsvc.store.filters import Filter
from graphsvc.store.paging import Page, SortKey


async def get_client(conn: Connection, client_id: str) -> wire.ClientResponse:
    client = await clients.find_client(conn, client_id)
    if client is None:
        raise not_found(f"client {client_id} does not exist", "client_id")
    return wire.ClientResponse(client)


async def list_clients(
    conn: Connection, page: Page, filters: Sequence[Filter], sort: Sequence[SortKey]
) -> wire.PagedClients:
    total, ids = await clients.list_client_ids(conn, filters, sort, page.skip, page.limit)
    found = [(await get_client(conn, client_id)).data for client_id in ids]
    return wire.PagedClients(total, page.skip, page.limit, found)


async def create_client(
    conn: Connection,
    keys: KeyBox,
    name: str,
    ip_address: str = "",
    hostname: str = "",
) -> tuple[str, CreatedToken]:
    """A collection client with its token (the token key is shown once, here)."""
    if not name.strip():
        raise bad_request("client name must not be empty", "name")
    if ip_address:
        try:
            ipaddress.ip_address(ip_address)
        except ValueError:
            raise bad_request(f"{ip_address!r} is not an IP address", "ip_address") from None
    if await clients.client_name_taken(conn, name):
        raise conflict(f"a client named {name!r} already exists", "name")
    client_id = str(uuid.uuid4())
    await clients.insert_client(conn, client_id, name, ip_address, hostname, datetime.now(UTC))
    token = await create_token(conn, keys, client_id=client_id, name=f"{name} token")
    return client_id, token
