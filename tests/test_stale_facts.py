"""Stale facts: what a newer collection states about an object replaces what an older one
stated about it, group of facts by group (its ACEs, each local group, its delegation, its
properties...), while what the newer one did not collect stays and sessions accumulate;
every node and relationship carries the time its collection was made, from the collector's
file names (or zip entry times), not the ingest's. The lab is the reference's TESTLAB
collection (fixtures/v6/ingest), collected again with facts changed."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graphsvc.ingest.sources import Source
from tests.conftest import Env, ingest
from tests.test_ad_relationships import stored_edges
from tests.test_sharphound import SAMPLES, TESTLAB, WIN10

LAB = SAMPLES["v6 folder"]
UCCOMP = f"{TESTLAB}-2120"  # trusted for unconstrained delegation: CoerceToTGT to the domain
ACTOR = f"{TESTLAB}-12345"  # may act on behalf of others to WIN10 (AllowedToAct)
ADMIN_USER = f"{TESTLAB}-1105"  # a direct member of WIN10's Administrators
DOMAIN_ADMINS = f"{TESTLAB}-512"
ACL_BIT = 6  # meta.methods: SharpHound's ACL collection method

Edit = Callable[[dict[str, Any]], None]


def collection(
    tmp_path: Path,
    stamp: str,
    edit_computers: Edit | None = None,
    only: tuple[str, ...] | None = None,
    methods: int | None = None,
) -> Path:
    """The lab's files, named as SharpHound names them at `stamp` (yyyyMMddHHmmss), with the
    computers document edited, and only the named types if told."""
    folder = tmp_path / stamp
    folder.mkdir()
    for path in sorted(LAB.glob("*.json")):
        if only is not None and path.stem not in only:
            continue
        document = json.loads(path.read_bytes())
        if path.stem == "computers" and edit_computers is not None:
            edit_computers(document)
        if methods is not None:
            document["meta"]["methods"] = methods
        (folder / f"{stamp}_{path.name}").write_text(json.dumps(document))
    return folder


def record(document: dict[str, Any], object_id: str) -> dict[str, Any]:
    return next(r for r in document["data"] if r["ObjectIdentifier"] == object_id)


def local_group(computer: dict[str, Any], rid: str) -> dict[str, Any]:
    return next(g for g in computer["LocalGroups"] if g["ObjectIdentifier"].endswith(f"-{rid}"))


def facts_changed(document: dict[str, Any]) -> None:
    """WIN10 collected again: no one may act for others on it, its administrators lost the
    user, Domain Admins' explicit GenericAll is gone, its description and operating system
    changed, its sessions were not found this time, and its Remote Desktop Users could not
    be read. UCCOMP lost unconstrained delegation."""
    win10 = record(document, WIN10)
    win10["AllowedToAct"] = []
    administrators = local_group(win10, "544")
    administrators["Results"] = [
        m for m in administrators["Results"] if m["ObjectIdentifier"] != ADMIN_USER
    ]
    win10["Aces"] = [
        ace
        for ace in win10["Aces"]
        if not (ace["PrincipalSID"] == DOMAIN_ADMINS and ace["RightName"] == "GenericAll")
    ]
    del win10["Properties"]["operatingsystem"]
    win10["Properties"]["description"] = "collected again"
    for key in ("Sessions", "PrivilegedSessions", "RegistrySessions"):
        win10[key]["Results"] = []
    rdp = local_group(win10, "555")
    rdp.update({"Collected": False, "FailureReason": "access denied", "Results": []})
    uccomp = record(document, UCCOMP)
    uccomp["UnconstrainedDelegation"] = False
    uccomp["Properties"]["unconstraineddelegation"] = False


def path_status(env: Env, start: str, end: str) -> int:
    return env.get(f"/api/v2/graphs/shortest-path?start_node={start}&end_node={end}").status_code


def exposed(env: Env) -> dict[str, tuple[int, str]]:
    """Who reaches the domain's tier zero: object id -> (length, first step's kind)."""
    body = env.get(f"/api/v2/domains/{TESTLAB}/exposure?limit=1000").json()
    return {e["objectID"]: (e["length"], e["firstHop"]["kind"]) for e in body["data"]}


def listed(env: Env, uri: str) -> set[str]:
    answer = env.get(f"{uri}?limit=1000")
    assert answer.status_code == 200, answer.text
    return {entry["objectID"] for entry in answer.json()["data"]}


def props(env: Env, uri: str) -> dict[str, Any]:
    answer = env.get(f"{uri}?counts=false")
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()["data"]["props"]
    return found


def times(env: Env) -> dict[tuple[str, str, str], str]:
    """(start, kind, end) -> the edge's lastSeen as a path answer shows it."""

    async def read(conn):  # type: ignore[no-untyped-def]
        return await conn.fetch(
            "SELECT s.object_id, k.name, e.object_id, x.updated_at FROM edges x "
            "JOIN kinds k ON k.id = x.kind_id JOIN nodes s ON s.id = x.start_id "
            "JOIN nodes e ON e.id = x.end_id"
        )

    return {(r[0], r[1], r[2]): r[3] for r in env.run_in_transaction(read)}


def test_a_newer_collection_replaces_the_facts_it_states_again(env: Env, tmp_path: Path) -> None:
    ingest(env, collection(tmp_path, "20240101120000"))
    before = stored_edges(env)
    assert path_status(env, ACTOR, WIN10) == 200
    assert exposed(env)[UCCOMP] == (1, "CoerceToTGT")
    assert ADMIN_USER in listed(env, f"/api/v2/computers/{WIN10}/admin-users")
    assert (DOMAIN_ADMINS, "GenericAll", WIN10) in before
    sessions = {t for t in before if t[1] == "HasSession" and t[0] == WIN10}
    assert len(sessions) >= 3
    rdp = {t for t in before if t[1] == "CanRDP" and t[2] == WIN10}
    assert rdp

    ingest(env, collection(tmp_path, "20240301120000", facts_changed, only=("computers",)))
    after = stored_edges(env)
    # Gone from the store, from paths, from exposure and from lists.
    assert (ACTOR, "AllowedToAct", WIN10) not in after
    assert path_status(env, ACTOR, WIN10) == 404
    assert (UCCOMP, "CoerceToTGT", TESTLAB) not in after
    assert exposed(env).get(UCCOMP, (0, ""))[1] != "CoerceToTGT"
    assert (ADMIN_USER, "AdminTo", WIN10) not in after
    assert (DOMAIN_ADMINS, "AdminTo", WIN10) in after
    assert (DOMAIN_ADMINS, "GenericAll", WIN10) not in after
    assert (f"{TESTLAB}-519", "GenericAll", WIN10) in after  # the ACEs stated again stay
    # What the newer collection did not collect stays: Remote Desktop Users (not read), the
    # sessions (they accumulate), every other object's facts (their files were not sent).
    assert {t for t in after if t[1] == "CanRDP" and t[2] == WIN10} == rdp
    assert sessions <= set(after)
    # (WIN10's local groups are named by its id.)
    untouched = {
        t
        for t in before
        if not any(end.startswith(WIN10) for end in (t[0], t[2])) and UCCOMP not in (t[0], t[2])
    }
    assert untouched <= set(after)
    # Properties: the newer collection's, the one it no longer holds gone.
    win10 = props(env, f"/api/v2/computers/{WIN10}")
    assert win10["description"] == "collected again"
    assert "operatingsystem" not in win10
    assert props(env, f"/api/v2/computers/{UCCOMP}")["unconstraineddelegation"] is False
    # Times: each object's and relationship's own collection's.
    assert win10["lastseen"] == "2024-03-01T12:00:00Z"
    user = props(env, f"/api/v2/users/{ADMIN_USER}")
    assert user["lastseen"] == "2024-01-01T12:00:00Z"
    edge_times = times(env)
    # (AdminTo is the analysis's, of its time; the membership it comes from is collected.)
    assert str(edge_times[(DOMAIN_ADMINS, "MemberOfLocalGroup", f"{WIN10}-544")])[:10] == (
        "2024-03-01"
    )
    assert all(str(edge_times[t])[:10] == "2024-01-01" for t in sessions)


def test_a_method_not_run_states_nothing(env: Env, tmp_path: Path) -> None:
    """A newer collection made without the ACL method writes empty ACE lists: they say "not
    collected", so the older ACEs stay; with the method, an empty list clears them."""
    ingest(env, collection(tmp_path, "20240101120000"))
    aces = {t for t, p in stored_edges(env).items() if p.get("isacl") and t[2] == WIN10}
    assert aces

    def no_aces(document: dict[str, Any]) -> None:
        for computer in document["data"]:
            computer["Aces"] = []

    full_methods = json.loads((LAB / "computers.json").read_bytes())["meta"]["methods"]
    without_acl = full_methods & ~(1 << ACL_BIT)
    ingest(
        env,
        collection(tmp_path, "20240201120000", no_aces, only=("computers",), methods=without_acl),
    )
    assert aces <= set(stored_edges(env))
    ingest(env, collection(tmp_path, "20240301120000", no_aces, only=("computers",)))
    assert not aces & set(stored_edges(env))


def test_an_older_collection_loaded_later_changes_nothing_newer(env: Env, tmp_path: Path) -> None:
    """Loaded out of order, the older collection adds what the newer one lacks but replaces
    nothing it states: the newer values and times stay."""
    newer = collection(tmp_path, "20240301120000", facts_changed)
    older = collection(tmp_path, "20240101120000")
    ingest(env, newer)
    ingest(env, older)
    win10 = props(env, f"/api/v2/computers/{WIN10}")
    assert win10["description"] == "collected again"
    assert win10["lastseen"] == "2024-03-01T12:00:00Z"
    local_admins = (DOMAIN_ADMINS, "MemberOfLocalGroup", f"{WIN10}-544")
    assert str(times(env)[local_admins])[:10] == "2024-03-01"


def test_a_collection_uploaded_twice_changes_nothing(env: Env, tmp_path: Path) -> None:
    folder = collection(tmp_path, "20240101120000")
    ingest(env, folder)
    first = stored_edges(env)
    ingest(env, folder)
    assert stored_edges(env) == first


def test_a_documents_collection_time(tmp_path: Path) -> None:
    """SharpHound's name prefix (the entry's, else the zip's), else a zip entry's time;
    nothing for a plain file without one, or a zip entry's placeholder time."""
    plain = tmp_path / "computers.json"
    plain.write_text("{}")
    named = tmp_path / "20231105093000_computers.json"
    named.write_text("{}")
    assert Source("computers.json", 2, plain).collection_time() is None
    assert Source(named.name, 2, named).collection_time() == datetime(
        2023, 11, 5, 9, 30, tzinfo=UTC
    )
    entry = zipfile.ZipInfo("users.json", date_time=(2024, 2, 3, 4, 5, 6))
    assert Source("lab.zip: users.json", 2, plain, entry).collection_time() == datetime(
        2024, 2, 3, 4, 5, 6, tzinfo=UTC
    )
    placeholder = zipfile.ZipInfo("users.json")  # 1980-01-01: the format's least
    assert Source("lab.zip: users.json", 2, plain, placeholder).collection_time() is None
    assert Source(
        "20240101010101_BloodHound.zip: users.json", 2, plain, placeholder
    ).collection_time() == datetime(2024, 1, 1, 1, 1, 1, tzinfo=UTC)
    prefixed = zipfile.ZipInfo("20220707070707_users.json", date_time=(2024, 2, 3, 4, 5, 6))
    assert Source(
        "20240101010101_BloodHound.zip: 20220707070707_users.json", 2, plain, prefixed
    ).collection_time() == datetime(2022, 7, 7, 7, 7, 7, tzinfo=UTC)
