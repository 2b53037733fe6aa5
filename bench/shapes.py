"""Shapes the benchmarks (and the tests that check them) generate at scale.

`LargeDomain` writes a big SharpHound collection to ingest; `ScaleGraph` and
`AggregationHistory` yield rows that `bulk.py` loads straight into a store, since through
the collectors' JSON a million objects take minutes to ingest.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from graphsvc.demo.collectors import Domain, write_document
from graphsvc.store.data_quality import AggregationRow


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
        return cls(
            name,
            sid,
            users=objects * 80 // 100,
            computers=objects * 16 // 100,
            groups=max(10, objects * 4 // 100),
        )

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


SCALE_EDGE_KINDS = (
    "Contains",
    "MemberOf",
    "HasSession",
    "AdminTo",
    "ExecuteDCOM",
    "GenericAll",
    "GenericWrite",
    "WriteDacl",
    "WriteOwner",
    "Owns",
)
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
                holders.update(
                    self.user_id(u) for u in range(self.users) if set(self.user_groups(u)) & groups
                )
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
    ) -> Iterator[tuple[AggregationRow, datetime]]:
        """Each row with its creation time, newest run first."""
        node_kinds = ["User", "Computer", "Group", "Domain", "GPO", "OU", "Container"]
        edge_kinds = list(SCALE_EDGE_KINDS)
        metrics = (
            [("node", k) for k in node_kinds] + [("relationship", k) for k in edge_kinds]
        ) * (self.per_run // (len(node_kinds) + len(edge_kinds)) + 1)
        for i in range(self.rows):
            run, slot = divmod(i, self.per_run)
            metric_type, name = metrics[slot]
            row = AggregationRow(
                f"history-{run}",
                self.extension_id,
                self.environment_kind_id,
                metric_type,
                name,
                float(1000 + (run * 7 + slot * 13) % 5000),
                kind_ids.get(name) if metric_type == "node" else None,
            )
            yield row, self.end - timedelta(minutes=self.every_minutes * run)
