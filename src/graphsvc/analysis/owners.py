"""Owns and WriteOwner, as the reference derives them from what its ingest keeps of an
object's owner and WriteOwner holders (OwnsRaw, WriteOwnerRaw: ingest/sharphound.py).

A domain whose `dsheuristics` has "1" as its 29th character blocks an owner's implicit
rights (BlockOwnerImplicitRights): there, an owner of a computer (or of a gMSA or an MSA,
which are computers to this rule) gets Owns only if it is Domain Admins (-512), Enterprise
Admins (-519) or one of their members at any depth, and a WriteOwner holder of one gets no
WriteOwner; every other OwnsRaw and WriteOwnerRaw becomes Owns and WriteOwner, with the raw
relationship's properties.
"""

from __future__ import annotations

from datetime import datetime

from graphsvc.analysis.principals import Memberships
from graphsvc.store import analysis as store
from graphsvc.store.db import Connection

BLOCK_OWNER_IMPLICIT_RIGHTS = 28  # the character of dSHeuristics that says it (0-based)
ADMIN_GROUP_SUFFIXES = ("-512", "-519")  # Domain Admins, Enterprise Admins


def blocks_owner_rights(dsheuristics: object) -> bool:
    return (
        isinstance(dsheuristics, str)
        and len(dsheuristics) > BLOCK_OWNER_IMPLICIT_RIGHTS
        and dsheuristics[BLOCK_OWNER_IMPLICIT_RIGHTS] == "1"
    )


async def derive_owner_edges(conn: Connection, run_number: int, now: datetime) -> None:
    """Bring the Owns and WriteOwner relationships up to the raw ones."""
    blocking = sorted(
        str(domain.properties.get("domainsid") or domain.object_id).upper()
        for domain in await store.list_nodes_of_kinds(conn, ("Domain",))
        if blocks_owner_rights(domain.properties.get("dsheuristics"))
    )
    admins: list[str] = []
    if blocking:
        admins = sorted(await admins_at_any_depth(conn))
    await store.sync_raw_copies(conn, "OwnsRaw", run_number, now, blocking, admins)
    await store.sync_raw_copies(conn, "WriteOwnerRaw", run_number, now, blocking)


async def admins_at_any_depth(conn: Connection) -> set[str]:
    """Domain Admins and Enterprise Admins groups and their members at any depth."""
    groups = set(await store.list_ids_ending_with(conn, ADMIN_GROUP_SUFFIXES))
    return groups | (await Memberships(conn).find_members_below(groups) or set())
