"""The whole-graph analysis at scale: a generated domain with certificate services,
relay-relevant facts and trusts, ingested (the ingest ends with an analysis), then analysed
again alone, each in a process of its own for its time and peak memory.

    python bench/analysis.py [--objects 1000000] [--postgres URL] [--smoke]

The collection is `shapes.LargeDomain` (users, nested groups, computers with local groups
and sessions, ACLs on everything) plus what the analysis reads beyond it: every reached
computer's SMB signing, NTLM and WebClient blocks, the DCs' LDAP facts, three trusts, and
certificate services (a root CA, two enterprise CAs hosted on the DCs, an NTAuth store, 60
templates of every escalation's shape, enrolment by team groups, Domain Users and
Authenticated Users, issuance policies linked to groups). Results are printed and written
to bench/results/analysis.json; --smoke (CI) runs 2,000 objects on SQLite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ingest_large import run_ingest
from shapes import LargeDomain

from graphsvc.demo.collectors import write_document

HERE = Path(__file__).parent
ANY_PURPOSE, AGENT, CLIENT_AUTH = "2.5.29.37.0", "1.3.6.1.4.1.311.20.2.1", "1.3.6.1.5.5.7.3.2"
TEMPLATES = 60
ANALYSE_ALONE = """
import asyncio, json, sys, time
from datetime import UTC, datetime
from graphsvc.analysis import analyze
from graphsvc.store import db

async def main():
    started = time.monotonic()
    derived = await db.run_in_transaction(sys.argv[1], lambda c: analyze(c, 0, datetime.now(UTC)))
    print(json.dumps({"derived": derived, "seconds": time.monotonic() - started}))

asyncio.run(main())
"""
TAG_ALONE = """
import asyncio, json, sys, time
from datetime import UTC, datetime
from graphsvc.tags.tagging import tag_graph
from graphsvc.store import db

async def tag(conn):
    await tag_graph(conn, datetime.now(UTC))
    return await conn.fetchval("SELECT count(DISTINCT node_id) FROM tag_members WHERE tag_id = 1")

async def main():
    started = time.monotonic()
    members = await db.run_in_transaction(sys.argv[1], tag)
    print(json.dumps({"tier_zero": members, "seconds": time.monotonic() - started}))

asyncio.run(main())
"""
COUNT_DERIVED = """
import asyncio, json, sys
from graphsvc.store import db

async def read(conn):
    return await conn.fetch(
        "SELECT k.name, count(*) FROM edges e JOIN kinds k ON k.id = e.kind_id"
        " WHERE e.derived GROUP BY k.name ORDER BY k.name"
    )

print(json.dumps(dict(asyncio.run(db.run_in_transaction(sys.argv[1], read)))))
"""


class PkiDomain(LargeDomain):
    """LargeDomain with the facts and objects the analysis reads."""

    def domain_record(self) -> dict[str, Any]:
        record = super().domain_record()
        record["Properties"]["functionallevel"] = "2016"
        record["Trusts"] = [
            {
                "TargetDomainSid": f"S-1-5-21-{910 + n}-{910 + n}-{910 + n}",
                "TargetDomainName": f"TRUSTED{n}.LOCAL",
                "IsTransitive": True,
                "SidFilteringEnabled": n != 0,
                "TrustDirection": "Bidirectional" if n else "Outbound",
                "TrustType": "ParentChild" if n == 2 else "External",
            }
            for n in range(3)
        ]
        return record

    def computer_record(self, rid: int, host: str, i: int, dc: bool) -> dict[str, Any]:
        record = super().computer_record(rid, host, i, dc)
        if dc:
            record["Properties"].update(
                {
                    "ldapsigning": i != 0,
                    "ldapenabled": True,
                    "ldapsenabled": True,
                    "ldapsepa": False,
                }
            )
        if record["LocalGroups"]:  # reached: the collector read its SMB, NTLM and WebClient
            record["SmbInfo"] = {"Collected": True, "Result": {"SigningEnabled": i % 3 != 0}}
            record["NTLMRegistryData"] = {
                "Collected": True,
                "Result": {"RestrictSendingNtlmTraffic": 2 if i % 4 == 0 else 0},
            }
            record["IsWebClientRunning"] = {"Collected": True, "Result": i % 7 == 0}
        return record

    def group(self, g: int) -> str:
        return f"{self.sid}-{self.group_rid(g % self.groups)}"

    def enroll(self, *principals: str) -> list[dict[str, Any]]:
        return [
            {
                "PrincipalSID": p,
                "PrincipalType": "Group",
                "RightName": "Enroll",
                "IsInherited": False,
            }
            for p in principals
        ]

    def template_records(self) -> Iterator[dict[str, Any]]:
        for t in range(TEMPLATES):
            shape = t % 6  # ESC1, ESC3 agent, ESC4-writable, ESC6/9/10, ESC13, plain
            aces = self.enroll(
                self.group(t), f"{self.sid}-513" if shape == 5 else self.group(t + 1)
            )
            if shape == 2:
                aces.append(
                    {
                        "PrincipalSID": self.group(t + 2),
                        "PrincipalType": "Group",
                        "RightName": "GenericWrite",
                        "IsInherited": False,
                    }
                )
            properties = {
                "name": f"TEMPLATE{t}@{self.name}",
                "domainsid": self.sid,
                "requiresmanagerapproval": shape == 5,
                "authenticationenabled": shape != 1,
                "enrolleesuppliessubject": shape == 0,
                "nosecurityextension": shape == 3,
                "schemaversion": 1 if shape in (1, 3) else 2,
                "authorizedsignatures": 0,
                "effectiveekus": [AGENT] if shape == 1 else [CLIENT_AUTH],
                "applicationpolicies": [],
                "subjectaltrequireupn": shape == 3,
                "subjectaltrequirespn": False,
                "subjectaltrequiredns": shape == 3 and t % 12 == 3,
                "subjectaltrequiredomaindns": False,
                "certificatepolicy": [f"1.3.6.1.4.1.311.21.8.{t}"] if shape == 4 else [],
            }
            yield {"ObjectIdentifier": f"TEMPLATE-{t}", "Properties": properties, "Aces": aces}

    def policy_records(self) -> Iterator[dict[str, Any]]:
        for t in range(4, TEMPLATES, 6):
            yield {
                "ObjectIdentifier": f"POLICY-{t}",
                "Properties": {
                    "name": f"POLICY{t}@{self.name}",
                    "domainsid": self.sid,
                    "certtemplateoid": f"1.3.6.1.4.1.311.21.8.{t}",
                },
                "GroupLink": {"ObjectIdentifier": self.group(t + 3), "ObjectType": "Group"},
            }

    def pki_documents(self) -> dict[str, list[dict[str, Any]]]:
        root = "ROOT-THUMBPRINT"
        cas = [
            {
                "ObjectIdentifier": f"ENTERPRISECA-{n}",
                "Properties": {
                    "name": f"CA{n}@{self.name}",
                    "domainsid": self.sid,
                    "certthumbprint": f"CA{n}-THUMBPRINT",
                    "certchain": [f"CA{n}-THUMBPRINT", root],
                },
                "Aces": self.enroll(f"{self.name}-S-1-5-11" if n else f"{self.sid}-513"),
                "HostingComputer": f"{self.sid}-{self.dc_rid(n)}",
                "EnabledCertTemplates": [
                    {"ObjectIdentifier": f"TEMPLATE-{t}", "ObjectType": "CertTemplate"}
                    for t in range(n, TEMPLATES, 2)
                ],
                "CARegistryData": {
                    "IsUserSpecifiesSanEnabled": {"Collected": True, "Value": n == 0},
                    "EnrollmentAgentRestrictions": {"Collected": True, "Restrictions": []},
                },
                "HttpEnrollmentEndpoints": [
                    {
                        "Collected": True,
                        "Result": {"Url": f"http://ca{n}/certsrv", "ADCSWebEnrollmentHTTP": True},
                    }
                ],
            }
            for n in range(2)
        ]
        return {
            "rootcas": [
                {
                    "ObjectIdentifier": "ROOTCA-0",
                    "DomainSID": self.sid,
                    "Properties": {
                        "name": f"ROOT@{self.name}",
                        "domainsid": self.sid,
                        "certthumbprint": root,
                        "certchain": [root],
                    },
                }
            ],
            "ntauthstores": [
                {
                    "ObjectIdentifier": "NTAUTH-0",
                    "DomainSID": self.sid,
                    "Properties": {
                        "name": f"NTAUTH@{self.name}",
                        "domainsid": self.sid,
                        "certthumbprints": ["CA0-THUMBPRINT", "CA1-THUMBPRINT"],
                    },
                }
            ],
            "enterprisecas": cas,
            "certtemplates": list(self.template_records()),
            "issuancepolicies": list(self.policy_records()),
        }

    def write(self, folder: Path) -> dict[str, int]:
        counts = super().write(folder)
        for meta_type, records in self.pki_documents().items():
            with (folder / f"{meta_type}.json").open("w") as out:
                counts[meta_type] = write_document(out, meta_type, records, version=6)
        return counts


def generate(folder: Path, objects: int) -> dict[str, int]:
    domain = PkiDomain.of_size("SCALE.LOCAL", "S-1-5-21-900-900-900", objects)
    return PkiDomain(**{f: getattr(domain, f) for f in domain.__dataclass_fields__}).write(folder)


def alone(url: str, script: str) -> dict[str, Any]:
    """The script run on the store in a process of its own: what it printed, its time and
    peak memory."""
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-c", script, url], stdout=subprocess.PIPE, env=os.environ
    )
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"the run alone failed with status {status}")
    found: dict[str, Any] = json.loads(output)
    return {
        **found,
        "seconds": round(found["seconds"], 1),
        "process_seconds": round(time.monotonic() - started, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
    }


def count_derived(url: str) -> dict[str, int]:
    found = subprocess.run(
        [sys.executable, "-c", COUNT_DERIVED, url], capture_output=True, check=True, text=True
    ).stdout
    counts: dict[str, int] = json.loads(found)
    return counts


def measure(url: str, folder: Path) -> dict[str, Any]:
    environment = {"GRAPHSVC_DATABASE_URL": url}
    subprocess.run(
        [sys.executable, "-m", "graphsvc", "db", "upgrade"],
        env={**os.environ, **environment},
        check=True,
        capture_output=True,
    )
    ingested = run_ingest(folder, environment)
    os.environ["GRAPHSVC_DATABASE_URL"] = url
    return {
        "ingest_with_analysis": ingested,
        "analysis_alone": alone(url, ANALYSE_ALONE),
        # The tags made again over the whole graph (Tier Zero's default selectors), which
        # the ingest above ends with too.
        "tagging_alone": alone(url, TAG_ALONE),
        "derived": count_derived(url),
    }


def run_benchmark(
    description: str,
    default_objects: int,
    generate_collection: Callable[[Path, int], dict[str, int]],
    name: str,
    check: Callable[[dict[str, int]], str | None],
) -> None:
    """Parse the command line, generate the collection, measure it on SQLite (and on
    PostgreSQL if given), print and write bench/results/<name>.json; `check` says what is
    wrong with the derived counts, if anything (the shape, not the speed)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--objects", type=int, default=default_objects)
    parser.add_argument("--postgres", default=None, help="a database URL to measure too")
    parser.add_argument("--smoke", action="store_true", help="seconds-long run for CI")
    args = parser.parse_args()
    objects = 2000 if args.smoke else args.objects
    results: dict[str, Any] = {"objects": objects}
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work) / "collection"
        started = time.monotonic()
        results["records"] = generate_collection(folder, objects)
        results["generate_seconds"] = round(time.monotonic() - started, 1)
        results["sqlite"] = measure(f"sqlite:///{work}/store.sqlite3", folder)
        if args.postgres and not args.smoke:
            results["postgresql"] = measure(args.postgres, folder)
    print(json.dumps(results, indent=1))
    problem = check(results["sqlite"]["derived"])
    if problem:
        raise SystemExit(problem)
    out = HERE / "results" / (f"{name}-smoke.json" if args.smoke else f"{name}.json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")


def main() -> None:
    run_benchmark(
        __doc__.splitlines()[0],
        1_000_000,
        generate,
        "analysis",
        lambda derived: (
            None
            if derived.get("ADCSESC1")
            else "the generated collection gave no ESC1: the shape is wrong"
        ),
    )


if __name__ == "__main__":
    main()
