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

# Local groups a Windows member server reports, by RID, as SharpHound collects them.
LOCAL_GROUPS = (
    (544, "ADMINISTRATORS"),
    (545, "USERS"),
    (546, "GUESTS"),
    (547, "POWER USERS"),
    (550, "PRINT OPERATORS"),
    (551, "BACKUP OPERATORS"),
    (552, "REPLICATOR"),
    (555, "REMOTE DESKTOP USERS"),
    (556, "NETWORK CONFIGURATION OPERATORS"),
    (558, "PERFORMANCE MONITOR USERS"),
    (559, "PERFORMANCE LOG USERS"),
    (562, "DISTRIBUTED COM USERS"),
    (568, "IIS_IUSRS"),
    (569, "CRYPTOGRAPHIC OPERATORS"),
    (573, "EVENT LOG READERS"),
    (574, "CERTIFICATE SERVICE DCOM ACCESS"),
    (575, "RDS REMOTE ACCESS SERVERS"),
    (576, "RDS ENDPOINT SERVERS"),
    (577, "RDS MANAGEMENT SERVERS"),
    (578, "HYPER-V ADMINISTRATORS"),
    (579, "ACCESS CONTROL ASSISTANCE OPERATORS"),
    (580, "REMOTE MANAGEMENT USERS"),
    (581, "SYSTEM MANAGED ACCOUNTS GROUP"),
    (582, "STORAGE REPLICA ADMINISTRATORS"),
    (583, "DEVICE OWNERS"),
)
# The built-in groups a domain controller reports instead (domain-prefixed, IGNOREME).
DC_BUILTIN_RIDS = (544, 545, 546, 548, 549, 550, 551, 552, 554, 555, 557, 560, 561, 562, 580)

# (principal, right, inherited) of each object type's ACL, as the fixtures' real collections
# have them: nearly all from the same few built-in and admin groups, plus one delegation
# ("helpdesk") group per object. "DA" is Domain Admins, "EA" Enterprise Admins, "BA" BUILTIN
# Administrators, "AO" Account Operators, "KA"/"EKA" (Enterprise) Key Admins.
USER_ACL = (
    ("DA", "Owns", False),
    ("DA", "GenericAll", False),
    ("EA", "GenericAll", True),
    ("BA", "WriteDacl", True),
    ("BA", "WriteOwner", True),
    ("BA", "GenericWrite", True),
    ("BA", "AllExtendedRights", True),
    ("AO", "GenericAll", False),
    ("KA", "AddKeyCredentialLink", True),
    ("EKA", "AddKeyCredentialLink", True),
    ("HELPDESK", "ForceChangePassword", True),
    ("HELPDESK", "GenericWrite", True),
)
COMPUTER_ACL = (
    ("DA", "Owns", False),
    ("DA", "GenericAll", False),
    ("EA", "GenericAll", True),
    ("BA", "WriteDacl", True),
    ("BA", "WriteOwner", True),
    ("BA", "GenericWrite", True),
    ("AO", "GenericAll", False),
    ("KA", "AddKeyCredentialLink", True),
    ("EKA", "AddKeyCredentialLink", True),
    ("HELPDESK", "ReadLAPSPassword", True),
)
GROUP_ACL = (
    ("BA", "Owns", False),
    ("DA", "GenericAll", False),
    ("EA", "GenericAll", True),
    ("BA", "WriteDacl", True),
    ("BA", "WriteOwner", True),
    ("BA", "GenericWrite", True),
    ("AO", "GenericAll", False),
    ("HELPDESK", "AddMember", False),
)
# The domain object's, DCSync and LAPS-sync rights included (the fixtures' default ACL).
DOMAIN_ACL = (
    ("BA", "Owns", False),
    ("BA", "WriteDacl", False),
    ("BA", "WriteOwner", False),
    ("BA", "AllExtendedRights", False),
    ("DA", "WriteDacl", False),
    ("DA", "WriteOwner", False),
    ("DA", "AllExtendedRights", False),
    ("EA", "GenericAll", False),
    ("EDC", "GetChanges", False),
    ("EDC", "GetChangesInFilteredSet", False),
    ("BA", "GetChanges", False),
    ("BA", "GetChangesAll", False),
    ("BA", "GetChangesInFilteredSet", False),
    ("ERODC", "GetChanges", False),
    ("DC", "GetChangesAll", False),
)


@dataclass
class LargeDomain:
    """A big AD-shaped collection, generated record by record (never held in memory).

    Groups nest `depth` levels deep; every user is in two groups; computers have sessions;
    one computer in twenty grants DCOM to a group and a user. Records are shaped like the
    fixtures' real SharpHound output, so sizes and edge counts are realistic: ACLs of 8 to 12
    entries, nearly all from the same few admin groups (the fixtures average 12 per user, 9
    per computer, 5 to 8 per group); half the computers were reached and report their 25
    local groups (Administrators, Remote Desktop Users, Remote Management Users with members)
    and user rights, the rest a connection failure; a third have LAPS; two domain
    controllers report the domain's built-in groups; the domain's ACL grants DCSync rights.
    """

    name: str
    sid: str
    users: int
    computers: int
    groups: int
    depth: int = 4
    helpdesks: int = 20  # delegation groups: the first this many generated groups

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

    def dc_rid(self, i: int) -> int:
        return 1000 + i

    def well_known(self) -> dict[str, str]:
        """The ACL principals by short name (see USER_ACL)."""
        builtin = f"{self.name}-S-1-5-32"
        return {
            "DA": f"{self.sid}-512",
            "EA": f"{self.sid}-519",
            "DC": f"{self.sid}-516",
            "ERODC": f"{self.sid}-498",
            "KA": f"{self.sid}-526",
            "EKA": f"{self.sid}-527",
            "BA": f"{builtin}-544",
            "AO": f"{builtin}-548",
            "EDC": f"{self.name}-S-1-5-9",
        }

    def acl(self, template: tuple[tuple[str, str, bool], ...], rid: int) -> list[dict[str, Any]]:
        principals = self.well_known()
        helpdesk = f"{self.sid}-{self.group_rid(rid % min(self.helpdesks, self.groups))}"
        return [
            {
                "PrincipalSID": helpdesk if who == "HELPDESK" else principals[who],
                "PrincipalType": "Group",
                "RightName": right,
                "IsInherited": inherited,
                "InheritanceHash": f"{rid * 31 + n:032x}" if inherited else "",
            }
            for n, (who, right, inherited) in enumerate(template)
        ]

    def common(
        self, name: str, rid: int, kind: str, template: tuple[tuple[str, str, bool], ...]
    ) -> dict[str, Any]:
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
            "Aces": self.acl(template, rid),
            "IsDeleted": False,
            "IsACLProtected": False,
            "ContainedBy": {"ObjectIdentifier": self.sid, "ObjectType": "Domain"},
        }

    def group_of_user(self, i: int, which: int) -> int:
        """The two groups at the bottom nesting level each user belongs to."""
        leaves = max(1, self.groups // self.depth)
        return self.group_rid((i * 7 + which * 13) % leaves)

    def domain_record(self) -> dict[str, Any]:
        record = Domain(self.name, self.sid).domain_record()
        record["Properties"]["collected"] = True
        principals = self.well_known()
        record["Aces"] = [
            {
                "PrincipalSID": principals[who],
                "PrincipalType": "Group",
                "RightName": right,
                "IsInherited": inherited,
                "InheritanceHash": "",
            }
            for who, right, inherited in DOMAIN_ACL
        ]
        return record

    def user_records(self) -> Iterator[dict[str, Any]]:
        for i in range(self.users):
            record = self.common(f"USER{i}@{self.name}", self.user_rid(i), "User", USER_ACL)
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

    def well_known_group_records(self) -> Iterator[dict[str, Any]]:
        """The admin and built-in groups the ACLs name; five users are Domain Admins."""

        def ref(oid: str, kind: str = "Group") -> dict[str, str]:
            return {"ObjectIdentifier": oid, "ObjectType": kind}

        principals = self.well_known()
        admins = [ref(f"{self.sid}-{self.user_rid(i)}", "User") for i in range(5)]
        members = {
            "DA": admins,
            "EA": admins[:1],
            "BA": [ref(principals["DA"]), ref(principals["EA"])],
        }
        names = {
            "DA": "DOMAIN ADMINS",
            "EA": "ENTERPRISE ADMINS",
            "DC": "DOMAIN CONTROLLERS",
            "ERODC": "ENTERPRISE READ-ONLY DOMAIN CONTROLLERS",
            "KA": "KEY ADMINS",
            "EKA": "ENTERPRISE KEY ADMINS",
            "BA": "ADMINISTRATORS",
            "AO": "ACCOUNT OPERATORS",
            "EDC": "ENTERPRISE DOMAIN CONTROLLERS",
        }
        for short, oid in principals.items():
            record = self.common(f"{names[short]}@{self.name}", 0, "Group", GROUP_ACL)
            record["ObjectIdentifier"] = oid
            record["Members"] = members.get(short, [])
            yield record

    def group_records(self) -> Iterator[dict[str, Any]]:
        yield from self.well_known_group_records()
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
            record = self.common(f"GROUP{g}@{self.name}", self.group_rid(g), "Group", GROUP_ACL)
            # Group g is a member of group g + leaves: `depth` levels of nesting.
            nested = [
                {"ObjectIdentifier": f"{self.sid}-{self.group_rid(c)}", "ObjectType": "Group"}
                for c in range(g - leaves, -1, -leaves)
            ][:1]
            record["Members"] = members.pop(self.group_rid(g), []) + nested
            yield record

    def local_groups(self, computer: str, host: str, i: int) -> list[dict[str, Any]]:
        """A reached member server's local groups: Domain Admins and a team group are
        administrators; some computers let a group in by RDP or WinRM; the DCOM grants."""

        def group(oid: str) -> dict[str, str]:
            return {"ObjectIdentifier": oid, "ObjectType": "Group"}

        team = group(f"{self.sid}-{self.group_rid(i // 50 % self.groups)}")
        results: dict[int, list[dict[str, str]]] = {
            544: [group(f"{self.sid}-512"), team],
            545: [group(f"{self.name}-S-1-5-11"), group(f"{self.sid}-513")],
            555: [team] if i % 4 == 0 else [],
            562: self.dcom_grants(i),
            574: [group(f"{self.name}-S-1-5-11")],
            580: [team] if i % 10 == 0 else [],
        }
        return [
            {
                "ObjectIdentifier": f"{computer}-{rid}",
                "Name": f"{name}@{host}",
                "Collected": True,
                "FailureReason": None,
                "Results": results.get(rid, []),
                "LocalNames": [],
            }
            for rid, name in LOCAL_GROUPS
        ]

    def dcom_grants(self, i: int) -> list[dict[str, str]]:
        if i % 20:
            return []
        top = self.group_rid(self.groups - 1 - (i // 20) % max(1, self.groups // 4))
        return [
            {"ObjectIdentifier": f"{self.sid}-{top}", "ObjectType": "Group"},
            {
                "ObjectIdentifier": f"{self.sid}-{self.user_rid(i % self.users)}",
                "ObjectType": "User",
            },
        ]

    def computer_record(self, rid: int, host: str, i: int, dc: bool) -> dict[str, Any]:
        computer = f"{self.sid}-{rid}"
        record = self.common(host, rid, "Computer", COMPUTER_ACL)
        record["Properties"].update(
            {
                "operatingsystem": "Windows Server 2022",
                "enabled": True,
                "unconstraineddelegation": dc,
                "isdc": dc,
                "haslaps": not dc and i % 3 == 0,
            }
        )
        reached = dc or i % 2 == 0
        if dc:
            builtin = f"{self.name}-S-1-5-32"
            admins = [f"{self.sid}-512", f"{self.sid}-519"]
            local_groups = [
                {
                    "ObjectIdentifier": f"{builtin}-{rid}",
                    "Name": "IGNOREME",
                    "Collected": True,
                    "FailureReason": None,
                    "Results": [
                        {"ObjectIdentifier": oid, "ObjectType": "Group"}
                        for oid in (admins if rid == 544 else [])
                    ],
                    "LocalNames": [],
                }
                for rid in DC_BUILTIN_RIDS
            ]
            grantees = [{"ObjectIdentifier": f"{builtin}-544", "ObjectType": "Group"}]
        else:
            local_groups = self.local_groups(computer, host, i) if reached else []
            grantees = [
                {"ObjectIdentifier": f"{computer}-{rid}", "ObjectType": "LocalGroup"}
                for rid in (544, 555)
            ]
        record.update(
            {
                "PrimaryGroupSID": f"{self.sid}-{516 if dc else 515}",
                "AllowedToDelegate": [],
                "AllowedToAct": [],
                "HasSIDHistory": [],
                "DumpSMSAPassword": [],
                "DomainSID": self.sid,
                "IsDC": dc,
                "UnconstrainedDelegation": dc,
                "Status": None if reached else {"Connectable": False, "Error": "PortNotOpen"},
                "LocalGroups": local_groups,
                "UserRights": [
                    {
                        "Privilege": "SeRemoteInteractiveLogonRight",
                        "Collected": True,
                        "FailureReason": None,
                        "Results": grantees,
                        "LocalNames": [],
                    }
                ]
                if reached
                else [],
                "Sessions": {
                    "Collected": True,
                    "FailureReason": None,
                    "Results": [
                        {
                            "ComputerSID": computer,
                            "UserSID": f"{self.sid}-{self.user_rid((i * 31 + s) % self.users)}",
                        }
                        for s in range(3)
                    ],
                },
            }
        )
        return record

    def computer_records(self) -> Iterator[dict[str, Any]]:
        for i in range(2):
            yield self.computer_record(self.dc_rid(i), f"DC{i}.{self.name}", i, dc=True)
        for i in range(self.computers):
            yield self.computer_record(self.computer_rid(i), f"HOST{i}.{self.name}", i, dc=False)

    def write(self, folder: Path) -> dict[str, int]:
        """The four documents; returns the records written per type."""
        folder.mkdir(parents=True, exist_ok=True)
        counts = {}
        for meta_type, records in (
            ("domains", [self.domain_record()]),
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
