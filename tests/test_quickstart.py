"""The README's quickstart, played as a new user would in a fresh folder: on SQLite (twice,
the second time on the store it made) and on a PostgreSQL database that does not exist yet,
every command it prints is pasted into a shell and answers with success; a busy port is
refused before anything is printed."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from tests.conftest import (
    POSTGRES_URL,
    admin_sql,
    chromium,
    free_port,
    require_postgres,
    with_database,
)

REPOSITORY = Path(__file__).resolve().parents[1]


def fresh_clone(folder: Path) -> Path:
    """The quickstart as a clone has it, with the tests' environment as its .venv (so it does
    not install again)."""
    (folder / "scripts").mkdir(parents=True)
    shutil.copy(REPOSITORY / "scripts" / "quickstart.sh", folder / "scripts")
    (folder / ".venv").symlink_to(Path(sys.prefix))
    return folder


def readme_commands(title: str) -> list[str]:
    """The shell blocks of one README section, as written."""
    readme = (REPOSITORY / "README.md").read_text()
    section = readme.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, flags=re.S)


def play_quickstart(
    folder: Path,
    environment: dict[str, str],
    while_serving: str = "",
    on_printed: Callable[[list[str]], None] | None = None,
) -> tuple[list[str], str]:
    """Run the quickstart until it says it serves; paste every printed command into one shell,
    then run `while_serving` there, and `on_printed` with what it printed; return each
    printed command's output, and the shell's."""
    port = free_port()
    process = subprocess.Popen(
        ["bash", "scripts/quickstart.sh"],
        cwd=folder,
        env={**os.environ, "PORT": str(port), **environment},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    printed = []
    try:
        deadline = time.monotonic() + 180
        for line in process.stdout:
            printed.append(line.rstrip("\n"))
            if line.startswith("# Serving on") or time.monotonic() > deadline:
                break
        assert printed and printed[-1].startswith("# Serving on"), printed
        commands = [line for line in printed if line.startswith(("curl ", "JWT="))]
        script = "\n".join(
            command if command.startswith("JWT=") else f"echo @@; {command}" for command in commands
        )
        pasted = subprocess.run(
            ["bash", "-c", script], capture_output=True, text=True, timeout=60, check=True
        )
        extra = subprocess.run(
            ["bash", "-c", "set -e\n" + while_serving.replace(":8000", f":{port}")],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert extra.returncode == 0, extra.stderr
        if on_printed is not None:
            on_printed(printed)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)
    outputs = pasted.stdout.split("@@\n")[1:]
    assert len(outputs) == len([c for c in commands if c.startswith("curl ")]) == 10
    return outputs, extra.stdout


def assert_all_succeeded(outputs: list[str]) -> None:
    for output in outputs:
        body = json.loads(output)
        assert "http_status" not in body, body  # the error body; success bodies have none
        assert "data" in body or "count" in body


def open_the_printed_console(printed: list[str]) -> None:
    """Open the console the quickstart names, sign in with the secret it prints, and see the
    statistics as charts and the printed path as a graph."""
    console = next(line for line in printed if line.startswith("# The web console: "))
    found = re.fullmatch(
        r"# The web console: open (\S+) and sign in as admin with the secret (\S+)", console
    )
    assert found is not None, console
    address, secret = found.groups()
    path = next(line for line in printed if line.startswith("# A path from")).rsplit(" ", 1)[1]
    with chromium() as browser:
        page = browser.new_page()
        page.goto(address)
        page.fill("#username", "admin")
        page.fill("#secret", secret)
        page.click("#sign-in-form button[type=submit]")
        page.wait_for_selector(".environment")
        page.click("#nav a[data-page=quality]")
        page.wait_for_selector("svg.chart .point")
        page.goto(path)
        page.wait_for_selector("svg.path-graph .node")
        assert page.locator("svg.path-graph .edge").count() == 5


def test_the_quickstart_on_sqlite_twice(tmp_path: Path) -> None:
    folder = fresh_clone(tmp_path / "clone")
    (folder / "tests").symlink_to(REPOSITORY / "tests")  # the README ingests its fixtures
    operations = "\n".join(readme_commands("The operations, one example each"))
    finding = "\n".join(readme_commands("Find the ids to ask for"))
    tokens = "\n".join(readme_commands("Accounts, tokens and permissions"))
    uploading = "\n".join(readme_commands("Upload from another machine"))
    asking = "\n".join(readme_commands("Ask in Cypher"))
    marker, uploaded = "echo @@README@@", "echo @@UPLOAD@@"
    asked = f"echo @@CYPHER@@\n{asking}\necho @@CYPHER@@"
    # In the README's order, in one shell: a section that changed what the next ones sign
    # with (the upload's collector token once did) fails them.
    played = [operations, marker, uploaded, uploading, uploaded, finding, asked, tokens]
    printed, said = play_quickstart(folder, {}, "\n".join(played))
    assert_all_succeeded(printed)
    examples, found = said.split("@@README@@\n")
    _, upload_result, found = found.split("@@UPLOAD@@\n")
    before, cypher, after = found.split("@@CYPHER@@\n")
    found = before + after
    # The README's Cypher examples, as it shows their answers.
    kerberoastable = "ADMINISTRATOR@PHANTOM.CORP\nSVC_KERB_DEL@PHANTOM.CORP\n(2 rows)"
    assert kerberoastable in cypher and "NOPREAUTH@PHANTOM.CORP\n(1 row)" in cypher, cypher
    assert "-[HasSession]-> ADMINISTRATOR@PHANTOM.CORP -[MemberOf]-> DOMAIN ADMINS" in cypher
    answer = json.loads(next(line for line in cypher.splitlines() if line.startswith('{"data"')))
    assert {v["value"] for v in answer["data"]["literals"]} == {
        "ADMINISTRATOR@PHANTOM.CORP",
        "SVC_KERB_DEL@PHANTOM.CORP",
    }
    # The README's saved queries: one saved, the legacy file imported but for its query of
    # two steps, listed, and exported as a zip of one file each.
    assert "1 Kerberoastable users owned\n" in cypher, cypher
    assert "['Members of a group, by name', 'Computers without LAPS']\n" in cypher
    assert "[('Pick a domain, then its computers', 'a query of 2 steps" in cypher
    listed = "['Computers without LAPS', 'Kerberoastable users', 'Members of a group, by name']"
    assert f"{listed}\n" in cypher
    files = "['Computers without LAPS.json', 'Kerberoastable users.json', "
    assert files + "'Members of a group, by name.json']" in cypher
    # The README's owned marking, and the paths from it to Tier Zero.
    assert "['svc_kerb_del']\n[('SVC_KERB_DEL@PHANTOM.CORP', True)]\n" in cypher
    assert "SVC_KERB_DEL@PHANTOM.CORP | owned\n(1 row)" in cypher
    owned_paths = (
        "2 shortest path(s) from 1 start(s):\n"
        "  1. SVC_KERB_DEL@PHANTOM.CORP -MemberOf-> DOMAIN USERS@PHANTOM.CORP -ADCSESC3-> "
        "PHANTOM.CORP\n"
    )
    assert owned_paths in cypher, cypher
    # The README's Azure paths: through an Azure role, an Entra role, a synchronized user.
    assert "  1. ALICE@CONTOSO.EXAMPLE -AZOwner-> PRODUCTION\n" in cypher, cypher
    assert "-AZHasRole-> HELPDESK@CONTOSO -AZResetPassword-> CAROL@CONTOSO.EXAMPLE\n" in cypher
    synced = "CAROL@LAB.LOCAL -SyncedToEntraUser-> CAROL@CONTOSO.EXAMPLE -AZOwns-> "
    assert synced + "PAYROLL@CONTOSO.EXAMPLE -AZRunsAs-> PAYROLL@CONTOSO\n" in cypher
    assert "['SyncedToEntraUser', 'AZOwns', 'AZRunsAs']\n['INTUNE@CONTOSO']\n" in cypher, cypher
    job = json.loads(upload_result.splitlines()[-1])
    assert job["status"] == 2 and job["run_id"], job
    answers = [json.loads(line) for line in examples.splitlines() if line.strip()]
    assert len(answers) == 5
    assert_all_succeeded([json.dumps(a) for a in answers])
    win10 = "S-1-5-21-3130019616-2776909439-2417379446-1104"
    assert found.count(win10) >= 2 and "TESTLAB.LOCAL" in found and "token key:" in found
    assert '"http_status"' not in found
    # The README's loading steps, as written, on the quickstart's store.
    loading = subprocess.run(
        ["bash", "-c", "set -e\n" + "\n".join(readme_commands("Load your own data"))],
        cwd=folder,
        env={k: v for k, v in os.environ.items() if not k.startswith("GRAPHSVC_")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert loading.returncode == 0, loading.stderr
    assert "extension" in loading.stdout and "OKTA" in loading.stdout
    # Again on the store it made: the demo is found there, with new credentials, and the
    # console it prints shows them.
    printed, _ = play_quickstart(folder, {}, on_printed=open_the_printed_console)
    assert_all_succeeded(printed)
    demo = folder / "data" / "demo.json"
    assert demo.stat().st_mode & 0o777 == 0o600  # it holds the admin secret and token key


def test_the_quickstart_on_a_postgresql_database_that_does_not_exist(tmp_path: Path) -> None:
    require_postgres()
    name = f"graphsvc_qs_{uuid.uuid4().hex[:10]}"
    url = with_database(POSTGRES_URL, name)
    folder = fresh_clone(tmp_path / "clone")
    sqlite_demo = folder / "data" / "demo.json"  # a SQLite quickstart's, from before
    sqlite_demo.parent.mkdir()
    sqlite_demo.write_text('{"kept": true}')
    printed: list[str] = []
    try:
        outputs, _ = play_quickstart(
            folder, {"GRAPHSVC_DATABASE_URL": url}, on_printed=printed.extend
        )
    finally:
        asyncio.run(admin_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    assert_all_succeeded(outputs)
    # Its credentials in a file of that store's own; the SQLite store's are left alone.
    assert sqlite_demo.read_text() == '{"kept": true}'
    parts = urlsplit(url)
    own = folder / "data" / f"demo-postgresql-{parts.hostname}-{parts.port or 5432}-{name}.json"
    assert json.loads(own.read_text())["token_id"]
    # Its last lines point a second terminal at this store, not at the SQLite one.
    export = next(line for line in printed if "export GRAPHSVC_URL=" in line)
    assert f"GRAPHSVC_DATABASE_URL={url}" in export
    assert any(str(own) in line for line in printed)


def test_a_busy_port_is_refused_before_anything_is_printed(tmp_path: Path) -> None:
    folder = fresh_clone(tmp_path / "clone")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            ["bash", "scripts/quickstart.sh"],
            cwd=folder,
            env={**os.environ, "PORT": str(port)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        # On PostgreSQL, the command it suggests keeps the store.
        on_postgres = subprocess.run(
            ["bash", "scripts/quickstart.sh"],
            cwd=folder,
            env={**os.environ, "PORT": str(port), "GRAPHSVC_DATABASE_URL": "postgresql://h/db"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1 and result.stdout == ""
    assert f"port {port} is in use" in result.stderr and "PORT=" in result.stderr
    assert "GRAPHSVC_DATABASE_URL=postgresql://h/db PORT=8001" in on_postgres.stderr
