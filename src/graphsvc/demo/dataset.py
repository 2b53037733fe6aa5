"""`graphsvc demo`: a realistic dataset in an empty store, written as collector files
(SharpHound, AzureHound, OpenGraph) and loaded through the ingest path."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from graphsvc import wire
from graphsvc.accounts.saml import create_saml_provider
from graphsvc.accounts.tokens import create_token
from graphsvc.accounts.users import create_user, store_user_secret
from graphsvc.crypto import KeyBox
from graphsvc.demo.collectors import Domain, Tenant, write_azurehound, write_sharphound
from graphsvc.errors import ApiError
from graphsvc.graph.clients import create_client
from graphsvc.ingest.run import ingest_files
from graphsvc.store import accounts, clients, extensions, graph, saml
from graphsvc.store.db import Connection

DOMAIN = "CONTOSO.LOCAL"
DOMAIN_SID = "S-1-5-21-3623811015-3361044348-30300820"
TENANTS = {
    "6F1C2A3B-9D4E-4F5A-8B6C-7D8E9FA0B1C2": "CONTOSO",
    "0B5E8C1D-2F3A-4B6C-9D7E-1A2B3C4D5E6F": "FABRIKAM",
}
HISTORY_DAYS = 30
AGGREGATION_RUNS = 5


@dataclass
class DemoResult:
    run_id: str
    admin_username: str
    admin_secret: str
    token_id: str
    token_key: str
    tenant_ids: list[str]
    computer_object_ids: list[str]
    environment_kind_ids: list[int]
    extension_ids: list[int]
    saml_provider_ids: list[int]
    client_ids: list[str]
    counts: dict[str, int] = field(default_factory=dict)


def sid(rid: int) -> str:
    return f"{DOMAIN_SID}-{rid}"


def demo_domain() -> Domain:
    """One domain; DCOM held directly and through groups nested three levels deep, local
    admins, sessions and a few ACEs."""
    domain = Domain(DOMAIN, DOMAIN_SID)
    domain.users = {
        500: "ADMINISTRATOR",
        501: "GUEST",
        1104: "ALICE",
        1105: "BOB",
        1106: "CAROL",
        1107: "DAVE",
        1108: "ERIN",
        1109: "FRANK",
        1110: "GRACE",
        1111: "SVC_BACKUP",
        1112: "SVC_SCCM",
    }
    domain.groups = {
        512: "DOMAIN ADMINS",
        513: "DOMAIN USERS",
        515: "DOMAIN COMPUTERS",
        1200: "IT OPERATIONS",
        1201: "HELPDESK",
        1202: "TIER1 SUPPORT",
        1203: "DCOM OPERATORS",
        1204: "SERVER ADMINS",
    }
    domain.computers = {
        1000: "DC01",
        1300: "FILE01",
        1301: "APP01",
        1302: "WS01",
        1303: "WS02",
        1304: "WS03",
    }
    domain.members = {
        512: [500],
        1201: [1202, 1106],
        1200: [1201, 1107, 1302],
        1203: [1200],
        1202: [1104, 1105],
        1204: [1108],
    }
    domain.dcom = {1300: [1203, 1111], 1301: [1204, 1112], 1303: [1109], 1000: [512]}
    # An attack path to show: BOB > TIER1 SUPPORT > HELPDESK, admin on WS01, where the
    # ADMINISTRATOR has a session; SVC_BACKUP can DCSync; FRANK can reset ALICE's password.
    domain.admins = {1302: [1201], 1301: [1204], 1000: [512]}
    domain.sessions = {1302: [500, 1107], 1301: [1108]}
    domain.aces = {
        0: [(1111, "GetChanges"), (1111, "GetChangesAll")],
        1104: [(1109, "ForceChangePassword")],
    }
    # Logons (and Windows on every computer), so that the completeness of sessions and
    # local groups has something to measure.
    logon = int(datetime(2026, 11, 1, tzinfo=UTC).timestamp())
    for rid in domain.users:
        domain.extra[rid] = {"lastlogontimestamp": logon - rid}
    for rid in domain.computers:
        domain.extra[rid] = {
            "lastlogontimestamp": logon - rid,
            "operatingsystem": "Windows Server 2022",
        }
    return domain


def demo_tenants(days_ago: int) -> list[Tenant]:
    """Two tenants that grew over the last month (older snapshots are smaller)."""
    shapes = {
        "CONTOSO": {
            "AZUser": 8,
            "AZGroup": 3,
            "AZApp": 3,
            "AZServicePrincipal": 4,
            "AZDevice": 3,
            "AZManagementGroup": 1,
            "AZSubscription": 2,
            "AZResourceGroup": 3,
            "AZVM": 4,
            "AZKeyVault": 2,
        },
        "FABRIKAM": {
            "AZUser": 4,
            "AZGroup": 2,
            "AZApp": 1,
            "AZServicePrincipal": 2,
            "AZDevice": 1,
            "AZManagementGroup": 1,
            "AZSubscription": 1,
            "AZResourceGroup": 1,
            "AZVM": 1,
            "AZKeyVault": 1,
        },
    }
    tenants = []
    for tenant_id, name in TENANTS.items():
        counts = {
            k: max(1, v - (days_ago * v) // (2 * HISTORY_DAYS)) for k, v in shapes[name].items()
        }
        tenants.append(Tenant(tenant_id, name, counts))
    return tenants


GITHUB_NODES = ["GHOrganization", "GHUser", "GHTeam", "GHRepository"]
GITHUB_RELATIONSHIPS = ["GHMemberOf", "GHCanPush", "GHOwns"]


def node(object_id: str, kind: str, name: str, **props: Any) -> dict[str, Any]:
    return {"id": object_id, "kinds": [kind], "properties": {"name": name, **props}}


def edge(kind: str, start: str, end: str) -> dict[str, Any]:
    return {"kind": kind, "start": {"value": start}, "end": {"value": end}}


def github_graph() -> dict[str, Any]:
    """An OpenGraph extension's data: one organisation with users, teams and repositories."""
    org = "GH-ORG-CONTOSO"
    nodes = [node(org, "GHOrganization", "contoso", environmentid=org)]
    nodes += [node(f"GH-USER-{i}", "GHUser", f"dev{i}", environmentid=org) for i in range(1, 7)]
    nodes += [
        node(f"GH-TEAM-{t}", "GHTeam", t, environmentid=org) for t in ("platform", "security")
    ]
    nodes += [
        node(f"GH-REPO-{r}", "GHRepository", r, environmentid=org) for r in ("api", "web", "infra")
    ]
    edges = [
        edge("GHMemberOf", f"GH-USER-{i}", f"GH-TEAM-{'platform' if i % 2 else 'security'}")
        for i in range(1, 7)
    ]
    edges += [edge("GHCanPush", "GH-TEAM-platform", f"GH-REPO-{r}") for r in ("api", "web")]
    edges += [edge("GHCanPush", "GH-TEAM-security", "GH-REPO-infra")]
    edges += [edge("GHOwns", org, f"GH-REPO-{r}") for r in ("api", "web", "infra")]
    return {"metadata": {"source_kind": "GHBase"}, "graph": {"nodes": nodes, "edges": edges}}


async def ingest_history(conn: Connection, folder: Path, now: datetime) -> str:
    """Thirty daily AzureHound collections and five AD and GitHub runs, oldest first, each
    written as collector files and ingested as its own run; returns the newest AD run."""
    for day in reversed(range(HISTORY_DAYS)):
        path = write_azurehound(folder / f"azurehound-{day}.json", demo_tenants(day))
        await ingest_files(conn, [path], now=now - timedelta(days=day))
    (folder / "github.json").write_text(json.dumps(github_graph()))
    run_id = ""
    for day in reversed(range(AGGREGATION_RUNS)):
        paths = write_sharphound(folder / f"sharphound-{day}", demo_domain())
        run = await ingest_files(
            conn, [*paths, folder / "github.json"], now=now - timedelta(days=day)
        )
        run_id = run.run_id
    return run_id


def collection_plan(domains: list[str]) -> clients.CollectionPlan:
    flags = dict.fromkeys(wire.COLLECTION_FLAGS, True)
    flags["all_trusted_domains"] = False
    return clients.CollectionPlan(
        flags,
        [
            wire.OUReference(
                f"OU-{d}",
                f"WORKSTATIONS@{d}",
                f"OU=WORKSTATIONS,DC={d.split('.')[0]},DC={d.split('.')[1]}",
                "OU",
                True,
            )
            for d in domains
        ],
        [wire.DomainReference(DOMAIN_SID, d, "Domain", True) for d in domains],
    )


async def create_clients(conn: Connection, keys: KeyBox, now: datetime) -> list[str]:
    busy, _ = await create_client(
        conn, keys, CLIENTS[0], "10.20.0.15", "collector-hq.contoso.local"
    )
    idle, _ = await create_client(
        conn, keys, CLIENTS[1], "10.30.0.8", "collector-branch.contoso.local"
    )
    await clients.set_client_checkin(
        conn,
        busy,
        configured_user=f"svc_collector@{DOMAIN}",
        last_checkin=now - timedelta(minutes=2),
        version="2.6.1",
        domain_controller=f"DC01.{DOMAIN}",
        user_sid=sid(1113),
    )
    plan = collection_plan([DOMAIN])
    event_id = await clients.insert_client_event(
        conn, busy, "DTSTART:20260101T020000Z\nRRULE:FREQ=DAILY;INTERVAL=1", plan, now
    )
    await clients.insert_client_event(
        conn, busy, "DTSTART:20260104T060000Z\nRRULE:FREQ=WEEKLY;BYDAY=SU", plan, now
    )
    job = clients.CollectionJobRow(
        busy,
        event_id,
        now - timedelta(minutes=30),
        now - timedelta(minutes=29),
        None,
        1,
        "collecting",
        f"DC01.{DOMAIN}",
        plan,
    )
    job_id = await clients.insert_collection_job(conn, job, now)
    await clients.insert_domain_result(
        conn,
        job_id,
        DOMAIN,
        True,
        "collection complete",
        {
            "user_count": 10,
            "group_count": 10,
            "computer_count": 6,
            "gpo_count": 4,
            "ou_count": 3,
            "container_count": 12,
            "deleted_count": 0,
        },
        now,
    )
    await clients.insert_domain_result(
        conn, job_id, "PARTNER.LOCAL", False, "LDAP bind failed: trust not reachable", {}, now
    )
    await clients.set_client_work(conn, busy, job_id, None, 41, 3)
    return [busy, idle]


DEMO_TOKEN_NAME = "demo admin token"  # noqa: S105 - a label, not a secret
SAML_PROVIDERS = ("okta", "entra")
CLIENTS = ("COLLECTOR-HQ", "COLLECTOR-BRANCH")


async def open_demo(conn: Connection, keys: KeyBox, secret: str) -> tuple[DemoResult, bool]:
    """The demo in this store, with credentials that work on it: loaded into an empty store,
    or, where it was loaded before, its administrator's secret set anew (secrets are kept
    only as hashes) and its token reused. The flag says whether it was loaded now."""
    if await graph.store_is_empty(conn):
        return await create_demo(conn, keys, secret), True
    admin = await accounts.find_user_login(conn, "admin")
    saml_ids = await saml.find_provider_ids(conn, SAML_PROVIDERS)
    client_ids = await clients.find_client_ids(conn, CLIENTS)
    if admin is None or len(saml_ids) < len(SAML_PROVIDERS) or len(client_ids) < len(CLIENTS):
        raise ApiError(
            409,
            "the store holds data that is not the demo: the demo loads into an empty store "
            "(point GRAPHSVC_DATA_DIR or GRAPHSVC_DATABASE_URL elsewhere)",
            "demo",
        )
    await store_user_secret(conn, admin.id, secret)
    token_id = await accounts.find_user_token_id(conn, admin.id, DEMO_TOKEN_NAME)
    credentials = (
        None if token_id is None else await accounts.find_token_credentials(conn, token_id)
    )
    if token_id is None or credentials is None:
        token = await create_token(conn, keys, user_id=admin.id, name=DEMO_TOKEN_NAME)
        token_id, token_key = token.id, token.key
    else:
        token_key = keys.open(credentials.key_ciphertext)
    nodes, edges = await graph.count_graph(conn)
    return demo_result(
        run_id=await graph.find_newest_run_id(conn) or "",
        secret=secret,
        token_id=token_id,
        token_key=token_key,
        saml_provider_ids=[saml_ids[name] for name in SAML_PROVIDERS],
        client_ids=[client_ids[name] for name in CLIENTS],
        registered=await extensions.list_extensions(conn),
        counts={"nodes": nodes, "edges": edges},
    ), False


def demo_result(
    run_id: str,
    secret: str,
    token_id: str,
    token_key: str,
    saml_provider_ids: list[int],
    client_ids: list[str],
    registered: list[extensions.Extension],
    counts: dict[str, int],
) -> DemoResult:
    return DemoResult(
        run_id=run_id,
        admin_username="admin",
        admin_secret=secret,
        token_id=token_id,
        token_key=token_key,
        tenant_ids=list(TENANTS),
        computer_object_ids=[sid(r) for r in (1300, 1301, 1302, 1303, 1304, 1000)],
        environment_kind_ids=[env.kind_id for x in registered for env in x.environments],
        extension_ids=[x.id for x in registered],
        saml_provider_ids=saml_provider_ids,
        client_ids=client_ids,
        counts=counts,
    )


async def create_demo(conn: Connection, keys: KeyBox, secret: str) -> DemoResult:
    if not await graph.store_is_empty(conn):
        raise ApiError(
            409,
            "the store is not empty: the demo fills an empty store only "
            "(point GRAPHSVC_DATA_DIR or GRAPHSVC_DATABASE_URL elsewhere)",
            "demo",
        )
    now = datetime.now(UTC)
    await extensions.create_extension(
        conn,
        "GH",
        "GitHub",
        "1.0.0",
        GITHUB_NODES,
        GITHUB_RELATIONSHIPS,
        [("GHOrganization", "GHBase")],
        now,
    )
    with tempfile.TemporaryDirectory(prefix="graphsvc-demo-") as folder:
        run_id = await ingest_history(conn, Path(folder), now)
    nodes, edges = await graph.count_graph(conn)

    admin_id = await create_user(conn, "admin", "Administrator", secret, False)
    token = await create_token(conn, keys, user_id=admin_id, name=DEMO_TOKEN_NAME)
    saml_ids = [
        await create_saml_provider(
            conn,
            SAML_PROVIDERS[0],
            "Okta Workforce",
            "http://www.okta.com/exk1demo0000000000",
            "https://contoso.okta.com/app/graphsvc/exk1demo0000000000/sso/saml",
            ["http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress"],
        ),
        await create_saml_provider(
            conn,
            SAML_PROVIDERS[1],
            "Microsoft Entra ID",
            "https://sts.windows.net/6f1c2a3b-9d4e-4f5a-8b6c-7d8e9fa0b1c2/",
            "https://login.microsoftonline.com/6f1c2a3b-9d4e-4f5a-8b6c-7d8e9fa0b1c2/saml2",
            [
                "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name",
                "http://schemas.microsoft.com/identity/claims/objectidentifier",
            ],
        ),
    ]
    client_ids = await create_clients(conn, keys, now)
    return demo_result(
        run_id=run_id,
        secret=secret,
        token_id=token.id,
        token_key=token.key,
        saml_provider_ids=saml_ids,
        client_ids=client_ids,
        registered=await extensions.list_extensions(conn),
        counts={"nodes": nodes, "edges": edges},
    )
