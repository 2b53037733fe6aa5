"""Commands that only look at the store read it: no migration, no write transaction, and the
data version left where it is, so that a look at the store makes no server's answers or
clients' tags stale, and waits for no write lock. A store that needs an upgrade is named with
the command that upgrades it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from click.testing import CliRunner

from graphsvc.cli import main
from graphsvc.store.data_version import READ_DATA_VERSION
from graphsvc.store.db import Connection, run_in_transaction
from graphsvc.store.migrate import alembic_config, head_revision
from tests.conftest import FIXTURES, TEST_FERNET_KEY, Env

V6 = FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "ingest"
WIN10 = "S-1-5-21-3130019616-2776909439-2417379446-1104"
TESTLAB = "S-1-5-21-3130019616-2776909439-2417379446"
READS = [
    ("find", "win10"),
    ("domains",),
    ("schema", "list"),
    ("user", "list"),
    ("token", "list"),
    ("path", f"{TESTLAB}-1105", f"{TESTLAB}-512"),
    ("exposure", TESTLAB),
    ("list", "admin-users", WIN10),
]


def fetch(env: Env, sql: str) -> object:
    """One statement, in a transaction that says it changes no answer (so moves no data
    version itself)."""

    async def work(conn: Connection) -> object:
        return await conn.fetchval(sql)

    return asyncio.run(run_in_transaction(env.url, work, changes_answers=False))


def test_read_only_commands_move_no_data_version(env: Env) -> None:
    assert env.cli("ingest", str(V6)).exit_code == 0
    before = fetch(env, READ_DATA_VERSION)
    for command in READS:
        done = env.cli(*command)
        assert done.exit_code == 0, (command, done.output)
    assert env.cli("find", "win10").output.startswith(WIN10)
    assert fetch(env, READ_DATA_VERSION) == before  # each moved it before


def test_the_list_command_is_the_list_route_with_names_and_holdings(env: Env) -> None:
    assert env.cli("ingest", str(V6)).exit_code == 0
    answered = env.get(f"/api/v2/computers/{WIN10}/admin-users?sort_by=name&limit=100").json()
    listed = env.cli("list", "admin-users", "win10.testlab.local", "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == answered
    text = env.cli("list", "admin-users", WIN10).output.splitlines()
    assert text[0] == "5 in admin-users of WIN10.TESTLAB.LOCAL:"
    assert text[1].split() == [
        f"{TESTLAB}-2116", "User", "ADMIN@TESTLAB.LOCAL", "(AdminTo", "through",
        "DOMAIN", "ADMINS@TESTLAB.LOCAL)",
    ]  # fmt: skip
    assert text[3].split() == [f"{TESTLAB}-1105", "User", "DFM@TESTLAB.LOCAL", "(AdminTo)"]
    short = env.cli("list", "members", "domain admins@testlab.local", "--limit", "1")
    assert short.output.splitlines()[-1] == "  ... 2 more; see --limit"
    refused = env.cli("list", "rdp-users", "domain admins@testlab.local")
    assert refused.exit_code == 1
    assert "ENTITY" not in refused.output and "LIST: DOMAIN ADMINS@TESTLAB.LOCAL (Group) has " in (
        refused.output
    )
    assert "no rdp-users list; its lists: " in refused.output and "members" in refused.output


def test_a_store_that_needs_an_upgrade_is_named_not_upgraded(env: Env) -> None:
    fetch(env, "UPDATE alembic_version SET version_num = '0017'")
    done = env.cli("domains")
    assert done.exit_code == 1
    assert "is at revision 0017, and this graphsvc reads revision" in done.output
    assert "run `graphsvc db upgrade`" in done.output
    assert fetch(env, "SELECT version_num FROM alembic_version") == "0017"  # left as it was


def test_a_missing_sqlite_store_is_named_not_created(tmp_path: Path) -> None:
    environment = {
        "GRAPHSVC_DATA_DIR": str(tmp_path / "none"),
        "GRAPHSVC_TOKEN_ENCRYPTION_KEY": TEST_FERNET_KEY,
    }
    done = CliRunner().invoke(main, ["find", "x"], env=environment)
    assert done.exit_code == 1 and "no store at" in done.output, done.output
    assert "`graphsvc db upgrade` creates it" in done.output
    assert not list(tmp_path.glob("none/*.sqlite3"))


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_the_head_read_from_file_names_is_alembics(database_url: str) -> None:
    scripts = ScriptDirectory.from_config(alembic_config(database_url))
    assert head_revision() == scripts.get_current_head()
