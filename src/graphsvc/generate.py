"""Collector-format documents built from a description: SharpHound (v6) and AzureHound.

The demo, the tests and the benchmarks write these files and ingest them, so they exercise
the same path as real collector output.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from graphsvc import store

DCOM_GROUP_RID = 562


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

    def domain_record(self) -> dict[str, Any]:
        children = [self.ref(rid) for rid in (*self.users, *self.groups, *self.computers)]
        return {
            "ObjectIdentifier": self.sid,
            "Properties": self.properties(self.name),
            "ChildObjects": children,
            "Links": [],
            "Trusts": [],
            "Aces": [],
        }

    def user_records(self) -> Iterator[dict[str, Any]]:
        for rid, name in self.users.items():
            yield {
                "ObjectIdentifier": self.id_of(rid),
                "Properties": {**self.properties(f"{name}@{self.name}"), "enabled": True},
                "PrimaryGroupSID": self.id_of(513),
                "Aces": [],
                "ContainedBy": {"ObjectIdentifier": self.sid, "ObjectType": "Domain"},
            }

    def group_records(self) -> Iterator[dict[str, Any]]:
        for rid, name in self.groups.items():
            yield {
                "ObjectIdentifier": self.id_of(rid),
                "Properties": self.properties(f"{name}@{self.name}"),
                "Members": [self.ref(m) for m in self.members.get(rid, [])],
                "Aces": [],
                "ContainedBy": {"ObjectIdentifier": self.sid, "ObjectType": "Domain"},
            }

    def computer_records(self) -> Iterator[dict[str, Any]]:
        for rid, name in self.computers.items():
            host = f"{name}.{self.name}"
            dcom_group = {
                "ObjectIdentifier": f"{self.id_of(rid)}-{DCOM_GROUP_RID}",
                "Name": f"DISTRIBUTED COM USERS@{host}",
                "Collected": True,
                "FailureReason": None,
                "LocalNames": [],
                "Results": [self.ref(p) for p in self.dcom.get(rid, [])],
            }
            yield {
                "ObjectIdentifier": self.id_of(rid),
                "Properties": {**self.properties(host), "enabled": True},
                "PrimaryGroupSID": self.id_of(515),
                "DomainSID": self.sid,
                "LocalGroups": [dcom_group],
                "Aces": [],
                "Status": None,
                "ContainedBy": {"ObjectIdentifier": self.sid, "ObjectType": "Domain"},
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


# --- large collections ------------------------------------------------------------------


@dataclass
class LargeDomain:
    """A big AD-shaped collection, generated record by record (never held in memory).

    Groups nest `depth` levels deep; every user is in two groups; computers have sessions;
    one computer in twenty grants DCOM to a group and a user. Records carry ACEs and the
    property bag real SharpHound output has, so file sizes are realistic.
    """

    name: str
    sid: str
    users: int
    computers: int
    groups: int
    depth: int = 4
    aces: int = 12

    @classmethod
    def of_size(cls, name: str, sid: str, objects: int) -> LargeDomain:
        """About `objects` objects: 80% users, 16% computers, 4% groups."""
        return cls(name, sid, users=objects * 80 // 100, computers=objects * 16 // 100,
                   groups=max(10, objects * 4 // 100))  # fmt: skip

    def group_rid(self, i: int) -> int:
        return 100_000 + i

    def user_rid(self, i: int) -> int:
        return 1_000_000 + i

    def computer_rid(self, i: int) -> int:
        return 5_000_000 + i

    def ace(self, n: int) -> dict[str, Any]:
        rights = (
            "GenericAll",
            "WriteDacl",
            "WriteOwner",
            "GenericWrite",
            "Owns",
            "AllExtendedRights",
            "ForceChangePassword",
            "AddMember",
        )
        return {
            "PrincipalSID": f"{self.sid}-{self.group_rid(n % max(self.groups, 1))}",
            "PrincipalType": "Group",
            "RightName": rights[n % len(rights)],
            "IsInherited": n % 3 == 0,
            "InheritanceHash": f"{n:032x}",
        }

    def common(self, name: str, rid: int, kind: str) -> dict[str, Any]:
        dn_name = name.split("@")[0].split(".")[0]
        return {
            "ObjectIdentifier": f"{self.sid}-{rid}",
            "Properties": {
                "name": name,
                "domain": self.name,
                "domainsid": self.sid,
                "distinguishedname": f"CN={dn_name},OU={kind}S,DC={self.name.replace('.', ',DC=')}",
                "samaccountname": dn_name,
                "description": f"{kind.lower()} generated for scale",
                "whencreated": 1700000000 + rid,
                "isaclprotected": False,
            },
            "Aces": [self.ace(rid + n) for n in range(self.aces)],
            "IsDeleted": False,
            "IsACLProtected": False,
            "ContainedBy": {"ObjectIdentifier": self.sid, "ObjectType": "Domain"},
        }

    def group_of_user(self, i: int, which: int) -> int:
        """The two groups at the bottom nesting level each user belongs to."""
        leaves = max(1, self.groups // self.depth)
        return self.group_rid((i * 7 + which * 13) % leaves)

    def user_records(self) -> Iterator[dict[str, Any]]:
        for i in range(self.users):
            record = self.common(f"USER{i}@{self.name}", self.user_rid(i), "User")
            record["Properties"].update(
                {
                    "enabled": i % 17 != 0,
                    "lastlogon": 1710000000 + i,
                    "pwdlastset": 1700000000 + i,
                    "admincount": False,
                    "serviceprincipalnames": [],
                    "hasspn": False,
                }
            )
            record.update(
                {
                    "PrimaryGroupSID": f"{self.sid}-513",
                    "AllowedToDelegate": [],
                    "SPNTargets": [],
                    "HasSIDHistory": [],
                    "DomainSID": self.sid,
                }
            )
            yield record

    def group_records(self) -> Iterator[dict[str, Any]]:
        leaves = max(1, self.groups // self.depth)
        members: dict[int, list[dict[str, str]]] = {}
        for i in range(self.users):
            for which in (0, 1):
                members.setdefault(self.group_of_user(i, which), []).append(
                    {"ObjectIdentifier": f"{self.sid}-{self.user_rid(i)}", "ObjectType": "User"}
                )
            if len(members) > 50_000:  # never reached with sane shapes; bounds memory anyway
                break
        for g in range(self.groups):
            record = self.common(f"GROUP{g}@{self.name}", self.group_rid(g), "Group")
            # Group g is a member of group g + leaves: `depth` levels of nesting.
            nested = [
                {"ObjectIdentifier": f"{self.sid}-{self.group_rid(c)}", "ObjectType": "Group"}
                for c in range(g - leaves, -1, -leaves)
            ][:1]
            record["Members"] = members.pop(self.group_rid(g), []) + nested
            yield record

    def computer_records(self) -> Iterator[dict[str, Any]]:
        for i in range(self.computers):
            rid = self.computer_rid(i)
            host = f"HOST{i}.{self.name}"
            record = self.common(host, rid, "Computer")
            record["Properties"].update(
                {
                    "operatingsystem": "Windows Server 2022",
                    "enabled": True,
                    "unconstraineddelegation": False,
                }
            )
            granted = []
            if i % 20 == 0:
                top = self.group_rid(self.groups - 1 - (i // 20) % max(1, self.groups // 4))
                granted = [
                    {"ObjectIdentifier": f"{self.sid}-{top}", "ObjectType": "Group"},
                    {
                        "ObjectIdentifier": f"{self.sid}-{self.user_rid(i % self.users)}",
                        "ObjectType": "User",
                    },
                ]
            record.update(
                {
                    "PrimaryGroupSID": f"{self.sid}-515",
                    "DomainSID": self.sid,
                    "Status": None,
                    "LocalGroups": [
                        {
                            "ObjectIdentifier": f"{self.sid}-{rid}-562",
                            "Name": f"DISTRIBUTED COM USERS@{host}",
                            "Collected": True,
                            "FailureReason": None,
                            "Results": granted,
                            "LocalNames": [],
                        }
                    ],
                    "Sessions": {
                        "Collected": True,
                        "FailureReason": None,
                        "Results": [
                            {
                                "ComputerSID": f"{self.sid}-{rid}",
                                "UserSID": f"{self.sid}-{self.user_rid((i * 31 + s) % self.users)}",
                            }
                            for s in range(3)
                        ],
                    },
                }
            )
            yield record

    def write(self, folder: Path) -> dict[str, int]:
        """The four documents; returns the records written per type."""
        folder.mkdir(parents=True, exist_ok=True)
        domain = Domain(self.name, self.sid)
        counts = {}
        for meta_type, records in (
            ("domains", [domain.domain_record()]),
            ("groups", self.group_records()),
            ("users", self.user_records()),
            ("computers", self.computer_records()),
        ):
            with (folder / f"{meta_type}.json").open("w") as out:
                counts[meta_type] = write_document(out, meta_type, records, version=6)
        return counts


# --- graphs for scale, loaded in bulk -------------------------------------------------------

SCALE_EDGE_KINDS = ("Contains", "MemberOf", "HasSession", "AdminTo", "ExecuteDCOM",
                    "GenericAll", "GenericWrite", "WriteDacl", "WriteOwner", "Owns")  # fmt: skip
ACL_KINDS = SCALE_EDGE_KINDS[5:]


@dataclass
class ScaleGraph:
    """An AD-shaped graph of about `nodes` nodes and ten edges per node, as rows to load in
    bulk (through the collectors' JSON, a million objects take minutes to ingest).

    Ids are positions (1 is the domain, then Domain Users, Domain Computers, the groups, the
    users, the computers). Groups nest `depth` levels: group g is a member of g + leaves.
    Each user is in two leaf groups and Domain Users; each object gets ACL edges from
    `acl_edges` groups. Computer 0 grants DCOM to a top group (its tree: about 165 principals
    at every size) and to one user; computer 1 grants it to nobody; computer 2 to a group of
    `wide_members` users; one computer in twenty to a top group and a user.
    """

    nodes: int
    sid: str = "S-1-5-21-900-900-900"
    domain: str = "SCALE.LOCAL"
    depth: int = 4
    acl_edges: int = 5
    wide_members: int = 2000

    def __post_init__(self) -> None:
        self.groups = max(10, self.nodes * 4 // 100)
        self.computers = max(3, self.nodes * 16 // 100)
        self.users = max(10, self.nodes - self.groups - self.computers - 4)
        self.leaves = max(1, self.groups // self.depth)

    # ids: the domain, Domain Users, Domain Computers, the wide group, then groups, users,
    # computers
    def group_id(self, g: int) -> int:
        return 5 + g

    def user_id(self, u: int) -> int:
        return 5 + self.groups + u

    def computer_id(self, c: int) -> int:
        return 5 + self.groups + self.users + c

    def object_id(self, node_id: int) -> str:
        return f"{self.sid}-{100_000 + node_id}" if node_id > 1 else self.sid

    def node_rows(self) -> Iterator[tuple[int, str, str, str]]:
        """(id, object id, name, label) of every node."""
        d = self.domain
        yield 1, self.sid, d, "Domain"
        yield 2, self.object_id(2), f"DOMAIN USERS@{d}", "Group"
        yield 3, self.object_id(3), f"DOMAIN COMPUTERS@{d}", "Group"
        yield 4, self.object_id(4), f"WIDE@{d}", "Group"
        for g in range(self.groups):
            yield self.group_id(g), self.object_id(self.group_id(g)), f"GROUP{g}@{d}", "Group"
        for u in range(self.users):
            yield self.user_id(u), self.object_id(self.user_id(u)), f"USER{u}@{d}", "User"
        for c in range(self.computers):
            node = self.computer_id(c)
            yield node, self.object_id(node), f"HOST{c}.{d}", "Computer"

    def user_groups(self, u: int) -> tuple[int, int]:
        return (u * 7) % self.leaves, (u * 7 + 13) % self.leaves

    def top_group(self, c: int) -> int:
        """The top-level group a DCOM-granting computer grants to."""
        tops = range((self.depth - 1) * self.leaves, self.groups)
        return tops[(c // 20) % len(tops)] if len(tops) else self.groups - 1

    def dcom_grants(self, c: int) -> list[int]:
        if c == 1:
            return []
        if c == 2:
            return [4]
        if c % 20 == 0:
            return [self.group_id(self.top_group(c)), self.user_id(c % self.users)]
        return []

    def edge_rows(self) -> Iterator[tuple[int, int, str]]:
        """(start id, end id, kind) of every edge."""
        for node in range(2, self.computer_id(self.computers)):
            yield 1, node, "Contains"
            for k in range(self.acl_edges):
                group = self.group_id((node * 31 + k * 17) % self.groups)
                if group != node:
                    yield group, node, ACL_KINDS[(node + k) % len(ACL_KINDS)]
        for g in range(self.groups - self.leaves):
            yield self.group_id(g), self.group_id(g + self.leaves), "MemberOf"
        for u in range(self.users):
            node = self.user_id(u)
            first, second = self.user_groups(u)
            yield node, self.group_id(first), "MemberOf"
            if second != first:
                yield node, self.group_id(second), "MemberOf"
            yield node, 2, "MemberOf"
            if u < self.wide_members:
                yield node, 4, "MemberOf"
        for c in range(self.computers):
            node = self.computer_id(c)
            yield node, 3, "MemberOf"
            for s in range(3):
                yield node, self.user_id((c * 31 + s) % self.users), "HasSession"
            yield self.group_id(c % self.groups), node, "AdminTo"
            for holder in self.dcom_grants(c):
                yield holder, node, "ExecuteDCOM"

    def dcom_holders(self, c: int) -> set[str]:
        """The object ids the DCOM list of computer `c` must name, worked out from the shape
        (not from the edges) so tests can check the store's answer against it."""
        holders: set[int] = set()
        for grant in self.dcom_grants(c):
            holders.add(grant)
            if grant == 4:
                holders.update(self.user_id(u) for u in range(min(self.wide_members, self.users)))
            elif grant >= self.group_id(0) and grant < self.user_id(0):
                groups = {grant - self.group_id(0)}
                while True:
                    below = {g - self.leaves for g in groups if g - self.leaves >= 0} - groups
                    if not below:
                        break
                    groups |= below
                holders.update(self.group_id(g) for g in groups)
                holders.update(self.user_id(u) for u in range(self.users)
                               if set(self.user_groups(u)) & groups)  # fmt: skip
        return {self.object_id(h) for h in holders}


@dataclass
class AggregationHistory:
    """A long data-quality history for the AD environment kind: a collection run every
    `every_minutes` going back from `end`, each run storing `per_run` aggregation rows (node
    counts per kind, then relationship counts per kind), `rows` rows in all."""

    rows: int
    end: datetime
    per_run: int = 20
    every_minutes: int = 15
    extension_id: int = 1
    environment_kind_id: int = 8

    def aggregation_rows(
        self, kind_ids: dict[str, int]
    ) -> Iterator[tuple[store.AggregationRow, datetime]]:
        """Each row with its creation time, newest run first."""
        node_kinds = ["User", "Computer", "Group", "Domain", "GPO", "OU", "Container"]
        edge_kinds = list(SCALE_EDGE_KINDS)
        metrics = (
            [("node", k) for k in node_kinds] + [("relationship", k) for k in edge_kinds]
        ) * (self.per_run // (len(node_kinds) + len(edge_kinds)) + 1)
        for i in range(self.rows):
            run, slot = divmod(i, self.per_run)
            metric_type, name = metrics[slot]
            row = store.AggregationRow(
                f"history-{run}",
                self.extension_id,
                self.environment_kind_id,
                metric_type,
                name,
                float(1000 + (run * 7 + slot * 13) % 5000),
                kind_ids.get(name) if metric_type == "node" else None,
            )
            yield row, self.end - timedelta(minutes=self.every_minutes * run)
