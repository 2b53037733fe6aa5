"""The `graphsvc` command line, run in-process against both stores."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sqlite3
import stat
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner, Result

import graphsvc.ingest.run
from graphsvc.cli import main
from graphsvc.ingest.records import IngestError
from graphsvc.ingest.run import cyclic_collector_paused, ingest_files
from graphsvc.store import graph, sqlite
from tests.conftest import (
    FIXTURES,
    POSTGRES_URL,
    TEST_FERNET_KEY,
    Env,
    admin_sql,
    require_postgres,
    with_database,
)

JWT_SECRET = "test-jwt-signing-key-of-sufficient-length-0123456789"


@pytest.fixture
def cli(database_url: str, tmp_path: Path) -> Callable[..., Result]:
    """Runs graphsvc with settings matching the test app's (same database and keys)."""
    environment = {
        "GRAPHSVC_DATABASE_URL": database_url,
        "GRAPHSVC_DATA_DIR": str(tmp_path / "data"),
        "GRAPHSVC_TOKEN_ENCRYPTION_KEY": TEST_FERNET_KEY,
        "GRAPHSVC_JWT_SECRET": JWT_SECRET,
    }

    def run(*args: str, extra: dict[str, str] | None = None) -> Result:
        return CliRunner().invoke(main, list(args), env={**environment, **(extra or {})})

    return run


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_db_upgrade_says_what_it_did(tmp_path: Path) -> None:
    """On a new store it names the migrations it applied; then, that there were none."""
    environment = {"GRAPHSVC_DATABASE_URL": f"sqlite:///{tmp_path / 'new.sqlite3'}"}
    first = CliRunner().invoke(main, ["db", "upgrade"], env=environment)
    assert first.exit_code == 0, first.output
    assert "migrated the schema at sqlite:///" in first.stdout
    assert "to revision 0027 (27 migrations: 0001, 0002," in first.stdout
    again = CliRunner().invoke(main, ["db", "upgrade"], env=environment)
    assert again.exit_code == 0 and "was up to date already" in again.stdout


def test_a_command_names_the_store_it_was_not_told_to_use(tmp_path: Path) -> None:
    """Without GRAPHSVC_DATA_DIR or GRAPHSVC_DATABASE_URL the per-user store is used, and
    said to be; told which, a command says nothing of it."""
    environment: dict[str, str | None] = {
        name: None for name in os.environ if name.startswith("GRAPHSVC_")
    }
    environment["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    default = tmp_path / "xdg" / "graphsvc" / "graphsvc.sqlite3"
    said = (
        f"graphsvc: the store is sqlite:///{default}, the default: set GRAPHSVC_DATA_DIR or "
        "GRAPHSVC_DATABASE_URL to choose one"
    )
    missing = CliRunner().invoke(main, ["domains"], env=environment)  # a read creates nothing
    assert missing.exit_code == 1 and said in missing.stderr, missing.output
    for command in (["db", "upgrade"], ["domains"]):
        told = CliRunner().invoke(main, command, env=environment)
        assert told.exit_code == 0, told.output
        assert said in told.stderr
    chosen = {**environment, "GRAPHSVC_DATA_DIR": str(tmp_path / "d")}
    for command in (["db", "upgrade"], ["domains"]):
        done = CliRunner().invoke(main, command, env=chosen)
        assert done.exit_code == 0 and "the store is" not in done.stderr


def test_demo_json_has_every_identifier(cli: Callable[..., Result]) -> None:
    demo = ok_json(cli("demo", "--json"))
    for key in (
        "tenant_ids",
        "computer_object_ids",
        "environment_kind_ids",
        "extension_ids",
        "saml_provider_ids",
        "client_ids",
    ):
        assert isinstance(demo[key], list) and demo[key], key
    assert demo["token_id"] and demo["token_key"]
    # Again on the same store: the demo is found, with its token and a new admin secret.
    again = ok_json(cli("demo", "--json"))
    assert {k: v for k, v in again.items() if k not in ("admin_secret", "run_id")} == {
        k: v for k, v in demo.items() if k not in ("admin_secret", "run_id")
    }
    assert again["admin_secret"] != demo["admin_secret"]


def test_demo_refuses_a_store_with_other_data(cli: Callable[..., Result]) -> None:
    made = cli("user", "create", "someone", "--role", "User")
    assert made.exit_code == 0, made.output
    line = one_error_line(cli("demo"))
    assert "holds data that is not the demo" in line


def test_demo_prints_a_summary(cli: Callable[..., Result]) -> None:
    result = cli("demo")
    assert result.exit_code == 0
    assert "API token key:" in result.output and "Administrator login: admin / " in result.output


def test_user_and_token_work_on_the_server(cli: Callable[..., Result], make_env) -> None:  # type: ignore[no-untyped-def]
    user = ok_json(
        cli(
            "user",
            "create",
            "analyst",
            "--role",
            "read-only",
            "--json",
            extra={"GRAPHSVC_USER_SECRET": "pw-0123456789"},
        )
    )
    assert user["name"] == "analyst"
    token = ok_json(cli("token", "create", "--user", "analyst", "--json"))
    assert {"id", "key", "user_id", "expires_at"} <= set(token)
    assert token["user_id"] == {"uuid": user["id"], "valid": True}
    env: Env = make_env()
    uri = "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"
    signed = cli("sign", "GET", uri, "--token-id", token["id"], "--token-key", token["key"])
    headers = json.loads(signed.stdout)
    assert env.request("GET", uri, headers).status_code == 200
    jwt = env.login("analyst", "pw-0123456789")
    assert env.request("GET", uri, {"Authorization": f"Bearer {jwt}"}).status_code == 200


def test_a_saved_token_is_readable_by_its_owner_alone(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    assert cli("user", "create", "collector", "--role", "Upload-Only").exit_code == 0
    target = tmp_path / "collector.json"
    made = cli("token", "create", "--user", "collector", "--save", str(target))
    assert made.exit_code == 0, made.output
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    saved = json.loads(target.read_text())
    assert saved["key"] and saved["key"] not in made.stdout and str(target) in made.stdout
    again = cli("token", "create", "--user", "collector", "--save", str(target))
    assert again.exit_code == 1 and "the file exists; choose a new name" in again.output
    assert json.loads(target.read_text()) == saved  # not overwritten
    missing = tmp_path / "elsewhere.json"
    refused = cli("token", "create", "--user", "nobody", "--save", str(missing))
    assert refused.exit_code == 1 and not missing.exists()  # no token, no file


def test_user_create_errors(cli: Callable[..., Result]) -> None:
    bad_role = cli("user", "create", "x", "--role", "Overlord")
    assert bad_role.exit_code == 1 and "unknown role 'Overlord'" in bad_role.stderr
    assert "Administrator" in bad_role.stderr
    assert cli("user", "create", "x", "--role", "User").exit_code == 0
    duplicate = cli("user", "create", "x", "--role", "User")
    assert duplicate.exit_code == 1 and "already exists" in duplicate.stderr
    missing = cli("token", "create", "--user", "nobody")
    assert missing.exit_code == 1 and "no user named 'nobody'" in missing.stderr


def test_disabled_user(cli: Callable[..., Result], make_env) -> None:  # type: ignore[no-untyped-def]
    cli("user", "create", "off", "--role", "User", "--disabled")
    token = ok_json(cli("token", "create", "--user", "off", "--json"))
    env: Env = make_env()
    uri = "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"
    headers = json.loads(
        cli("sign", "GET", uri, "--token-id", token["id"], "--token-key", token["key"]).stdout
    )
    assert env.request("GET", uri, headers).status_code == 403


def test_saml_create(cli: Callable[..., Result]) -> None:
    provider = ok_json(
        cli(
            "saml",
            "create",
            "--name",
            "okta",
            "--display-name",
            "Okta",
            "--idp-issuer-uri",
            "http://www.okta.com/x",
            "--idp-sso-uri",
            "https://okta/sso",
            "--principal-attribute-mapping",
            "email",
            "--principal-attribute-mapping",
            "upn",
            "--json",
            extra={"GRAPHSVC_PUBLIC_URL": "https://graph.example.com"},
        )
    )
    assert provider["id"] >= 1 and provider["principal_attribute_mappings"] == ["email", "upn"]
    assert provider["sp_acs_uri"] == "https://graph.example.com/api/v2/sso/okta/callback"


def test_saml_create_names_the_server_the_client_commands_use(cli: Callable[..., Result]) -> None:
    """Without GRAPHSVC_PUBLIC_URL, the URIs printed are those of GRAPHSVC_URL (the server
    `get` and `examples` are pointed at), not a fixed port."""
    provider = ok_json(
        cli(
            *("saml", "create", "--name", "ping", "--display-name", "Ping"),
            *("--idp-issuer-uri", "http://ping/x", "--idp-sso-uri", "https://ping/sso", "--json"),
            extra={"GRAPHSVC_URL": "http://127.0.0.1:8123"},
        )
    )
    assert provider["sp_acs_uri"] == "http://127.0.0.1:8123/api/v2/sso/ping/callback"


def test_client_create_and_edition(cli: Callable[..., Result], make_env) -> None:  # type: ignore[no-untyped-def]
    created = ok_json(
        cli(
            "client",
            "create",
            "--name",
            "HQ",
            "--ip-address",
            "10.0.0.5",
            "--hostname",
            "hq.local",
            "--json",
        )
    )
    assert created["name"] == "HQ" and created["ip_address"] == "10.0.0.5"
    assert created["token"]["key"] == "********" and len(created["token_key"]) > 20
    env: Env = make_env()
    env.create_admin()
    assert env.get(f"/api/v2/clients/{created['id']}").json()["data"]["name"] == "HQ"
    bad_ip = cli("client", "create", "--name", "X", "--ip-address", "10.0.0.300")
    assert bad_ip.exit_code == 1 and "not an IP address" in bad_ip.stderr
    community = cli("client", "create", "--name", "Y", extra={"GRAPHSVC_EDITION": "community"})
    assert community.exit_code == 1 and "Enterprise edition" in community.stderr


def test_ingest_files_and_folders(cli: Callable[..., Result], tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(2):
        (folder / f"part{i}.json").write_text(
            json.dumps({"graph": {"nodes": [{"id": f"n{i}", "kinds": ["Thing"]}]}})
        )
    result = ok_json(cli("ingest", str(folder), "--json"))
    assert result["nodes"] == 2 and result["edges"] == 0 and len(result["files"]) == 2
    assert len(result["run_id"]) == 36
    text = cli("ingest", str(folder / "part0.json"))
    assert text.exit_code == 0 and "1 nodes, 0 edges from 1 file(s)" in text.output
    assert result["skipped"] == {} and "not read" not in text.output


def test_ingest_names_the_records_it_does_not_read(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    records = [{"kind": "AZStorageAccount", "data": {}}, {"kind": "AZStorageAccount", "data": {}}]
    path = tmp_path / "azure.json"
    path.write_text(json.dumps({"meta": {"type": "azure", "version": 5}, "data": records}))
    assert ok_json(cli("ingest", str(path), "--json"))["skipped"] == {
        "AzureHound AZStorageAccount": 2
    }
    text = cli("ingest", str(path))
    assert "not read: 2 record(s) of AzureHound AZStorageAccount" in text.output


def test_ingest_errors_name_the_file_and_write_nothing(
    cli: Callable[..., Result], tmp_path: Path, make_env: Callable[..., Env]
) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"graph": {"nodes": [{"id": "a", "kinds": ["A"]}]}}))
    bad.write_text(json.dumps({"graph": {"nodes": [{"id": "b"}]}}))
    result = cli("ingest", str(good), str(bad))
    assert result.exit_code == 1
    assert f"{bad}: graph.nodes[0]: 'kinds' must be" in result.stderr
    assert "nothing was written" in result.stderr
    env: Env = make_env()
    assert env.run_in_transaction(graph.count_graph) == (0, 0)
    missing = cli("ingest", str(tmp_path / "nope.json"))
    assert missing.exit_code == 1 and "no such file" in missing.stderr


def test_bad_database_url_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["db", "upgrade"],
        env={
            "GRAPHSVC_DATABASE_URL": "postgresql://postgres:hunter2@127.0.0.1:1/none",
            "GRAPHSVC_DATA_DIR": str(tmp_path),
        },
    )
    assert result.exit_code == 1 and "cannot migrate the database" in result.stderr
    assert "hunter2" not in result.stderr


def one_error_line(result: Result) -> str:
    """The command failed with exit status 1 and exactly one line, no traceback."""
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphsvc: error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("GRAPHSVC_EDITION", "platinum", "'enterprise' or 'community'"),
        ("GRAPHSVC_LOG_LEVEL", "verbose", "'debug', 'info', 'warning' or 'error'"),
        ("GRAPHSVC_DATABASE_URL", "mysql://u:hunter2@db/x", "use sqlite:///"),
        ("GRAPHSVC_DATABASE_URL", "sqlite:////no/such/folder/g.db", "does not exist"),
        ("GRAPHSVC_DB_POOL_SIZE", "0", "greater than or equal to 1"),
        ("GRAPHSVC_MAX_WAIT_SECONDS", "soon", "valid integer"),
        ("GRAPHSVC_RATE_LIMIT_PER_SECOND", "-5", "greater than or equal to 0"),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_variable(
    tmp_path: Path, variable: str, value: str, expected: str
) -> None:
    result = CliRunner().invoke(
        main, ["db", "upgrade"], env={variable: value, "GRAPHSVC_DATA_DIR": str(tmp_path)}
    )
    line = one_error_line(result)
    assert variable in line and expected in line
    assert "hunter2" not in line and not Path("/no").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["serve", "--port", "99999"], "'--port': 99999 is not in the range 1<=x<=65535"),
        (["serve", "--port", "0"], "'--port'"),
        (["schema", "register", "/no/such.json"], "does not exist"),
        (["examples", "/no/such.json"], "No such file"),
        (["nosuch"], "No such command"),
    ],
)
def test_a_bad_option_or_missing_file_is_one_line(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    result = CliRunner().invoke(main, args, env={"GRAPHSVC_DATA_DIR": str(tmp_path)})
    assert expected in one_error_line(result)


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("graphsvc ")


def test_schema_register_list_and_ingest_for_the_extension(
    cli: Callable[..., Result], tmp_path: Path, make_env: Any
) -> None:
    definition = tmp_path / "okta.json"
    definition.write_text(
        json.dumps(
            {
                "name": "OKTA",
                "display_name": "Okta",
                "version": "1.0",
                "node_kinds": ["OktaOrg", "OktaUser", "OktaGroup"],
                "relationship_kinds": ["OktaMemberOf"],
                "environment_kinds": [{"kind": "OktaOrg", "source_kind": "OktaBase"}],
            }
        )
    )
    registered = ok_json(cli("schema", "register", str(definition), "--json"))
    again = cli("schema", "register", str(definition))
    assert again.exit_code == 1 and "already exists" in again.stderr
    listed = ok_json(cli("schema", "list", "--json"))
    okta = next(x for x in listed if x["name"] == "OKTA")
    assert okta["id"] == registered["id"] and not okta["builtin"]
    assert {x["name"] for x in listed} >= {"AD", "AZ", "OKTA"}
    environment_kind = okta["environment_kinds"][0]["id"]

    org = "ORG-1"
    data = {
        "metadata": {"source_kind": "OktaBase"},
        "graph": {
            "nodes": [{"id": org, "kinds": ["OktaOrg"], "properties": {"environmentid": org}}]
            + [
                {"id": f"U{i}", "kinds": ["OktaUser"], "properties": {"environmentid": org}}
                for i in range(3)
            ]
            + [
                {"id": "G1", "kinds": ["OktaGroup"], "properties": {"environmentid": org}},
                {"id": "STRAY", "kinds": ["OktaUser"]},
            ],
            "edges": [
                {"kind": "OktaMemberOf", "start": {"value": f"U{i}"}, "end": {"value": "G1"}}
                for i in range(3)
            ],
        },
    }
    (tmp_path / "okta-data.json").write_text(json.dumps(data))
    run = ok_json(cli("ingest", str(tmp_path / "okta-data.json"), "--json"))
    env: Env = make_env()
    env.create_admin()
    body = env.get(
        f"/api/v2/data-quality-stats-aggregations?schema_environment_kind_id="
        f"{environment_kind}&schema_extension_id={okta['id']}"
    ).json()
    rows = {
        (r["metric_type"], r["metric_name"]): r["metric_value"]
        for r in body["data"]
        if r["run_id"] == run["run_id"]
    }
    # The node without an environmentid belongs to no environment and is not counted.
    assert rows == {
        ("node", "OktaOrg"): 1.0,
        ("node", "OktaUser"): 3.0,
        ("node", "OktaGroup"): 1.0,
        ("relationship", "OktaMemberOf"): 3.0,
    }


def test_schema_register_rejects_bad_definitions(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "X"}))
    result = cli("schema", "register", str(bad))
    assert result.exit_code == 1 and "bad.json: not an extension definition" in result.stderr
    bad.write_text(
        json.dumps(
            {
                "name": "X",
                "display_name": "X",
                "version": "1",
                "node_kinds": ["A"],
                "relationship_kinds": [],
                "environment_kinds": [{"kind": "B"}],
            }
        )
    )
    result = cli("schema", "register", str(bad))
    assert result.exit_code == 1 and "must be node kinds too: B" in result.stderr


def test_ingest_reports_progress_as_plain_lines_off_a_terminal(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    (tmp_path / "a.json").write_text(
        json.dumps({"graph": {"nodes": [{"id": "a", "kinds": ["A"]}]}})
    )
    result = cli("ingest", str(tmp_path / "a.json"))
    assert result.exit_code == 0
    assert f"reading {tmp_path / 'a.json'} (" in result.stderr


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_second_ingest_on_sqlite_exits_1_with_one_line(
    cli: Callable[..., Result], database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ingest that waits past the busy timeout for another write (here an open write
    transaction, as a running ingest holds) says so in one line, and writes nothing."""
    sample = FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "ingest" / "sessions.json"
    assert cli("db", "upgrade").exit_code == 0
    monkeypatch.setattr(sqlite, "SQLITE_BUSY_TIMEOUT_MS", 300)
    holder = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        result = cli("ingest", str(sample))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.exit_code == 1
    error = [line for line in result.stderr.splitlines() if line.startswith("graphsvc: error:")]
    assert len(error) == 1 and "Traceback" not in result.stderr
    assert "locked by another write" in error[0] and "nothing was written" in error[0]
    assert cli("ingest", str(sample)).exit_code == 0


def test_secrets_come_from_standard_input(database_url: str, tmp_path: Path) -> None:
    runner = CliRunner()
    environment = {
        "GRAPHSVC_DATABASE_URL": database_url,
        "GRAPHSVC_DATA_DIR": str(tmp_path / "data"),
        "GRAPHSVC_TOKEN_ENCRYPTION_KEY": TEST_FERNET_KEY,
    }
    made = runner.invoke(
        main,
        ["user", "create", "piped", "--role", "User", "--secret-stdin", "--json"],
        input="a-piped-secret-123\n",
        env=environment,
    )
    assert made.exit_code == 0, made.output
    short = runner.invoke(
        main, ["user", "create", "weak", "--role", "User", "--secret", "short"], env=environment
    )
    assert "at least 12 characters" in one_error_line(short)
    empty = runner.invoke(
        main, ["user", "create", "e", "--role", "User", "--secret-stdin"], input="", env=environment
    )
    assert "--secret-stdin" in one_error_line(empty)
    signed = runner.invoke(
        main,
        ["sign", "GET", "/api/v2/self", "--token-id", "t", "--token-key-stdin"],
        input="the-key\n",
    )
    assert signed.exit_code == 0 and "svcsignature t" in signed.output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["sign", "get", "/api/v2/x", "--token-id", "t", "--token-key", "k"], "METHOD 'get'"),
        (["sign", "GET", "api/v2/x", "--token-id", "t", "--token-key", "k"], "must start with '/'"),
        (["sign", "GET", "/api/v2/x", "--token-id", "t"], "no token key"),
    ],
)
def test_sign_refuses_what_would_not_match_the_request_sent(args: list[str], expected: str) -> None:
    result = CliRunner().invoke(main, args, env={"GRAPHSVC_TOKEN_KEY": ""})
    assert expected in one_error_line(result)


def test_examples_of_a_file_that_is_not_the_demo_output(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "other.json").write_text('{"a": 1}')
    first = CliRunner().invoke(main, ["examples", str(tmp_path / "bad.json")])
    assert "not JSON" in one_error_line(first)
    second = one_error_line(CliRunner().invoke(main, ["examples", str(tmp_path / "other.json")]))
    assert "fields are missing" in second and "KeyError" not in second


def test_a_zip_that_is_not_a_zip_says_so(cli: Callable[..., Result], tmp_path: Path) -> None:
    fake = tmp_path / "collection.zip"
    fake.write_text('{"data": []}')
    line = one_error_line(cli("ingest", str(fake)))
    assert "collection.zip: named .zip but not a zip file" in line


def test_files_holding_secrets_are_private_under_an_ordinary_umask(tmp_path: Path) -> None:
    data = tmp_path / "data"
    environment = {"GRAPHSVC_DATA_DIR": str(data)}  # the default store, in the data dir
    previous = os.umask(0o022)
    try:
        result = CliRunner().invoke(main, ["demo", "--json"], env=environment)
        assert result.exit_code == 0, result.output
        made = CliRunner().invoke(main, ["user", "create", "u", "--role", "User"], env=environment)
        assert made.exit_code == 0, made.output
    finally:
        os.umask(previous)
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    files = [p for p in data.iterdir() if p.is_file()]
    names = {p.name for p in files}
    assert {"graphsvc.sqlite3", "token-encryption.key"} <= names
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    # While the store is open, SQLite's -wal and -shm files take the store file's mode.
    previous = os.umask(0o022)
    try:
        conn = sqlite3.connect(data / "graphsvc.sqlite3")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE probe (x)")
        conn.commit()
        side_files = [data / "graphsvc.sqlite3-wal", data / "graphsvc.sqlite3-shm"]
        modes = [stat.S_IMODE(p.stat().st_mode) for p in side_files]
        conn.close()
    finally:
        os.umask(previous)
    assert modes == [0o600, 0o600]


def test_a_missing_postgresql_database_is_created_or_its_command_named(tmp_path: Path) -> None:
    require_postgres()
    name = f"graphsvc_new_{uuid.uuid4().hex[:10]}"
    role = f"graphsvc_weak_{uuid.uuid4().hex[:6]}"
    asyncio.run(admin_sql(f"CREATE ROLE {role} LOGIN NOCREATEDB"))
    try:
        base = {"GRAPHSVC_DATA_DIR": str(tmp_path / "data")}
        weak_url = with_database(POSTGRES_URL, name).replace("postgres@", f"{role}@", 1)
        refused = CliRunner().invoke(
            main, ["db", "upgrade"], env={**base, "GRAPHSVC_DATABASE_URL": weak_url}
        )
        line = one_error_line(refused)
        server = urlsplit(POSTGRES_URL)  # the message names the configured server's host and port
        host = f"-h {server.hostname} " if server.hostname else ""
        port = f"-p {server.port} " if server.port else ""
        assert f"createdb {host}{port}-U postgres -O {role} {name}" in line
        made = CliRunner().invoke(
            main,
            ["db", "upgrade"],
            env={**base, "GRAPHSVC_DATABASE_URL": with_database(POSTGRES_URL, name)},
        )
        assert made.exit_code == 0 and "created the database" in made.stderr
    finally:
        asyncio.run(admin_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"DROP ROLE {role}"))


def test_sign_imports_neither_the_store_nor_the_server() -> None:
    """`graphsvc sign` runs once per request in the README's examples: it loads what signing
    needs, not the database drivers, migrations, ingest or server (0.87 s a call with
    them, 0.30 s without), nor the settings, asyncio, JWT, argon2 or Fernet (0.20 s a call
    with them, 0.04 s without; measured on this project's machine)."""
    code = (
        "import sys; from graphsvc.cli import main; main(['sign', 'GET', '/api/v2/self']); "
        "heavy = ('sqlalchemy', 'alembic', 'asyncpg', 'uvicorn', 'numpy', 'graphsvc.store.db', "
        "'graphsvc.ingest', 'graphsvc.api.app', 'pydantic', 'asyncio', 'jwt', 'argon2', "
        "'cryptography', 'graphsvc.settings', 'graphsvc.crypto'); "
        "print('loaded:', sorted(m for m in heavy if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "GRAPHSVC_TOKEN_ID": str(uuid.uuid4()), "GRAPHSVC_TOKEN_KEY": "k"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "svcsignature" in done.stdout and "loaded: []" in done.stdout, done.stdout


def test_read_commands_import_neither_the_ingest_nor_numpy(tmp_path: Path) -> None:
    """`graphsvc find` and `list` run in loops an analyst scripts: the ingest and numpy were
    a third of their start (`find`: 0.34 s of CPU, 0.23 s without, on this project's machine);
    on SQLite, asyncpg was 50 ms more and pydantic, for the settings, 90 ms (bench/README)."""
    environment = {**os.environ, "GRAPHSVC_DATABASE_URL": f"sqlite:///{tmp_path / 's.db'}"}
    subprocess.run([sys.executable, "-m", "graphsvc", "db", "upgrade"], env=environment, check=True)
    for command in (["find", "win10"], ["domains"], ["list", "members", "x"]):
        code = (
            f"import sys; from graphsvc.cli import main\ntry: main({command!r})\n"
            "except SystemExit: pass\n"
            "heavy = ('numpy', 'graphsvc.ingest.run', 'graphsvc.api.app', 'alembic',"
            " 'asyncpg', 'pydantic')\n"
            "print('loaded:', sorted(m for m in heavy if m in sys.modules))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], env=environment, capture_output=True, text=True
        )
        assert "loaded: []" in done.stdout, (command, done.stdout, done.stderr)


def test_the_ingest_command_pauses_the_cyclic_collector_and_serve_does_not(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`graphsvc ingest` runs with Python's cyclic garbage collector paused (bench/README:
    a fifth of a run's time) and turns it back on after; `ingest_files` alone, as the
    server's ingester calls it, leaves it on (requests answered meanwhile need it)."""
    seen: list[bool] = []

    def progress(source: object) -> Callable[[int], None]:
        return lambda _: seen.append(gc.isenabled())

    sample = FIXTURES / "bloodhound-docs" / "ad_sampledata.zip"
    env.run_in_transaction(lambda conn: ingest_files(conn, [sample], progress=progress))
    assert seen and all(seen)

    during: list[bool] = []

    async def watched(*args: Any, **kwargs: Any) -> Any:
        during.append(gc.isenabled())
        return await ingest_files(*args, **kwargs)

    monkeypatch.setattr(graphsvc.ingest.run, "ingest_files", watched)
    environment = {
        "GRAPHSVC_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}",
        "GRAPHSVC_DATA_DIR": str(tmp_path),
    }
    done = CliRunner().invoke(main, ["ingest", str(sample)], env=environment)
    assert done.exit_code == 0, done.output
    assert during == [False] and gc.isenabled()


def test_the_collector_comes_back_after_a_failure_and_only_if_it_was_on() -> None:
    with pytest.raises(IngestError), cyclic_collector_paused():
        assert not gc.isenabled()
        raise IngestError("users.json", "bad")
    assert gc.isenabled()
    gc.disable()
    try:
        with cyclic_collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
