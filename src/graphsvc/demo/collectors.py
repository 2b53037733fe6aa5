"""Collector-format documents built from a description: SharpHound (v6) and AzureHound.

The demo, the tests and the benchmarks write these files and ingest them, so they exercise
the same path as real collector output.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

DCOM_GROUP_RID = 562
ADMIN_GROUP_RID = 544


@dataclass
class Domain:
    """An AD domain: users, groups and computers by RID, group members, DCOM grants."""

    name: str
    sid: str
    users: dict[int, str] = field(default_factory=dict)
    groups: dict[int, str] = field(default_factory=dict)
    computers: dict[int, str] = field(default_factory=dict)
    members: dict[int, list[int]] = field(default_factory=dict)  # group RID -> member RIDs
    dcom: dict[int, list[int]] = field(default_factory=dict)  # computer RID -> principal RIDs
    admins: dict[int, list[int]] = field(default_factory=dict)  # computer RID -> principal RIDs
    sessions: dict[int, list[int]] = field(default_factory=dict)  # computer RID -> user RIDs
    # object RID (or 0, the domain) -> (principal RID, right) of its ACEs
    aces: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    # RID -> properties a user's or computer's record adds (lastlogontimestamp, operatingsystem)
    extra: dict[int, dict[str, Any]] = field(default_factory=dict)

    def id_of(self, rid: int) -> str:
        return f"{self.sid}-{rid}"

    def kind_of(self, rid: int) -> str:
        if rid in self.users:
            return "User"
        return "Computer" if rid in self.computers else "Group"

    def ref(self, rid: int) -> dict[str, str]:
        return {"ObjectIdentifier": self.id_of(rid), "ObjectType": self.kind_of(rid)}

    def properties(self, name: str) -> dict[str, Any]:
        return {"name": name, "domain": self.name, "domainsid": self.sid}

    def aces_of(self, rid: int) -> list[dict[str, Any]]:
        return [
            {
                "PrincipalSID": self.id_of(principal),
                "PrincipalType": self.kind_of(principal),
                "RightName": right,
                "IsInherited": False,
            }
            for principal, right in self.aces.get(rid, [])
        ]

    def domain_record(self) -> dict[str, Any]:
        children = [self.ref(rid) for rid in (*self.users, *self.groups, *self.computers)]
        return {
            "ObjectIdentifier": self.sid,
            "Properties": self.properties(self.name),
            "ChildObjects": children,
            "Links": [],
            "Trusts": [],
            "Aces": self.aces_of(0),
        }

    def user_records(self) -> Iterator[dict[str, Any]]:
        for rid, name in self.users.items():
            yield {
                "ObjectIdentifier": self.id_of(rid),
                "Properties": {
                    **self.properties(f"{name}@{self.name}"),
                    "enabled": True,
                    **self.extra.get(rid, {}),
                },
                "PrimaryGroupSID": self.id_of(513),
                "Aces": self.aces_of(rid),
                "ContainedBy": {"ObjectIdentifier": self.sid, "ObjectType": "Domain"},
            }

    def group_records(self) -> Iterator[dict[str, Any]]:
        for rid, name in self.groups.items():
            yield {
                "ObjectIdentifier": self.id_of(rid),
                "Properties": self.properties(f"{name}@{self.name}"),
                "Members": [self.ref(m) for m in self.members.get(rid, [])],
                "Aces": self.aces_of(rid),
                "ContainedBy": {"ObjectIdentifier": self.sid, "ObjectType": "Domain"},
            }

    def computer_records(self) -> Iterator[dict[str, Any]]:
        for rid, name in self.computers.items():
            host = f"{name}.{self.name}"
            groups = [self.local_group(rid, DCOM_GROUP_RID, "DISTRIBUTED COM USERS", self.dcom)]
            if self.admins:  # a domain described without them is collected without them
                groups.append(self.local_group(rid, ADMIN_GROUP_RID, "ADMINISTRATORS", self.admins))
            record = {
                "ObjectIdentifier": self.id_of(rid),
                "Properties": {**self.properties(host), "enabled": True, **self.extra.get(rid, {})},
                "PrimaryGroupSID": self.id_of(515),
                "DomainSID": self.sid,
                "LocalGroups": groups,
                "Aces": self.aces_of(rid),
                "Status": None,
                "ContainedBy": {"ObjectIdentifier": self.sid, "ObjectType": "Domain"},
            }
            if self.sessions:
                record["Sessions"] = {
                    "Collected": True,
                    "FailureReason": None,
                    "Results": [
                        {"UserSID": self.id_of(user), "ComputerSID": self.id_of(rid)}
                        for user in self.sessions.get(rid, [])
                    ],
                }
            yield record

    def local_group(
        self, rid: int, group_rid: int, name: str, holders: dict[int, list[int]]
    ) -> dict[str, Any]:
        return {
            "ObjectIdentifier": f"{self.id_of(rid)}-{group_rid}",
            "Name": f"{name}@{self.computers[rid]}.{self.name}",
            "Collected": True,
            "FailureReason": None,
            "LocalNames": [],
            "Results": [self.ref(p) for p in holders.get(rid, [])],
        }

    def documents(self) -> dict[str, Iterable[dict[str, Any]]]:
        return {
            "domains": [self.domain_record()],
            "users": self.user_records(),
            "groups": self.group_records(),
            "computers": self.computer_records(),
        }


def write_document(out: TextIO, meta_type: str, records: Iterable[Any], version: int = 5) -> int:
    """Write one collector document as the collectors do: `data` streamed first, `meta` last."""
    out.write('{"data": [')
    count = 0
    for record in records:
        out.write(",\n" if count else "\n")
        out.write(json.dumps(record, separators=(",", ":")))
        count += 1
    meta = {"methods": 521215, "type": meta_type, "count": count, "version": version}
    out.write(f'\n], "meta": {json.dumps(meta)}}}\n')
    return count


def write_sharphound(folder: Path, domain: Domain, prefix: str = "") -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for meta_type, records in domain.documents().items():
        path = folder / f"{prefix}{meta_type}.json"
        with path.open("w") as out:
            write_document(out, meta_type, records, version=6)
        paths.append(path)
    return paths


# --- AzureHound ---------------------------------------------------------------------------

AZURE_ENTITIES = [
    "AZUser",
    "AZGroup",
    "AZApp",
    "AZServicePrincipal",
    "AZDevice",
    "AZManagementGroup",
    "AZSubscription",
    "AZResourceGroup",
    "AZVM",
    "AZKeyVault",
]


@dataclass
class Tenant:
    """An Azure tenant: how many of each entity kind, and which users are in which group."""

    tenant_id: str
    name: str
    counts: dict[str, int]

    def object_id(self, kind: str, i: int) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.tenant_id}/{kind}/{i}")).upper()

    def records(self) -> Iterator[dict[str, Any]]:
        tenant = self.tenant_id
        yield {
            "kind": "AZTenant",
            "data": {
                "tenantId": tenant,
                "id": f"/tenants/{tenant}",
                "displayName": self.name,
                "collected": True,
            },
        }
        subscriptions = [
            f"/subscriptions/{self.object_id('sub', i)}"
            for i in range(self.counts.get("AZSubscription", 0))
        ]
        groups = [
            self.object_id("AZResourceGroup", i)
            for i in range(self.counts.get("AZResourceGroup", 0))
        ]
        resource_groups = (
            [
                f"{subscriptions[i % len(subscriptions)]}/resourceGroups/rg{i}"
                for i in range(len(groups))
            ]
            if subscriptions
            else []
        )
        for kind in AZURE_ENTITIES:
            for i in range(self.counts.get(kind, 0)):
                yield {"kind": kind, "data": self.entity(kind, i, subscriptions, resource_groups)}
        group_ids = [self.object_id("AZGroup", g) for g in range(self.counts.get("AZGroup", 0))]
        for g, group in enumerate(group_ids):
            members = [
                {
                    "groupId": group,
                    "member": {
                        "@odata.type": "#microsoft.graph.user",
                        "id": self.object_id("AZUser", u),
                    },
                }
                for u in range(self.counts.get("AZUser", 0))
                if u % len(group_ids) == g
            ]
            yield {"kind": "AZGroupMember", "data": {"groupId": group, "members": members}}

    def entity(
        self, kind: str, i: int, subscriptions: list[str], resource_groups: list[str]
    ) -> dict[str, Any]:
        oid = self.object_id(kind, i)
        data: dict[str, Any] = {
            "id": oid,
            "tenantId": self.tenant_id,
            "displayName": f"{kind[2:].lower()}{i}",
        }
        if kind == "AZUser":
            data["userPrincipalName"] = f"user{i}@{self.name.lower()}.example"
        elif kind in ("AZApp", "AZServicePrincipal"):  # service principal i runs app i
            data["appId"] = self.object_id("appId", i)
        elif kind == "AZSubscription":
            data["id"] = subscriptions[i]
            data["subscriptionId"] = subscriptions[i].rsplit("/", 1)[1]
        elif kind == "AZResourceGroup":
            data["id"] = resource_groups[i]
            data["subscriptionId"] = resource_groups[i].split("/resourceGroups/")[0]
            data["name"] = f"rg{i}"
        elif kind in ("AZVM", "AZKeyVault") and resource_groups:
            parent = resource_groups[i % len(resource_groups)]
            data["id"] = f"{parent}/providers/{kind}/{kind[2:].lower()}{i}"
            data["resourceGroupId" if kind == "AZVM" else "resourceGroup"] = parent
            data["name"] = f"{kind[2:].lower()}{i}"
        return data

    def relationship_count(self) -> int:
        """What the tenant's stats record counts: distinct edges the records produce."""
        c = self.counts
        contained = sum(c.get(k, 0) for k in AZURE_ENTITIES[:7])  # the tenant's own objects
        placed = c.get("AZResourceGroup", 0) if c.get("AZSubscription") else 0
        placed += (c.get("AZVM", 0) + c.get("AZKeyVault", 0)) if placed else 0
        members = c.get("AZUser", 0) if c.get("AZGroup") else 0
        return contained + placed + members + c.get("AZServicePrincipal", 0)


def write_azurehound(path: Path, tenants: Iterable[Tenant]) -> Path:
    with path.open("w") as out:
        write_document(out, "azure", (r for t in tenants for r in t.records()))
    return path
