"""The README, played as a new user would in a fresh folder: the quickstart on SQLite (twice,
the second time on the store it made) and on a PostgreSQL database that does not exist yet,
every command it prints pasted into a shell and answering with success, then every `sh`
block of the README in order in one shell, each exiting 0 and printing the answers the
README shows; a busy port is refused before anything is printed. The harness here (a
fresh clone, the quickstart serving, a document's blocks played) is tests/test_docs_commands.py's
too."""

from __future__ import annotations

import asyncio
import contextlib
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
from collections.abc import Iterator
from dataclasses import dataclass
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
README = REPOSITORY / "README.md"
# A line above a block's fence that keeps a test from playing it, with the reason.
NOT_PLAYED = re.compile(r"<!-- not played: (.*?) -->")
MARKER = re.compile(r"^@@block (\d+|end)@@\n", flags=re.M)


def fresh_clone(folder: Path) -> Path:
    """The quickstart as a clone has it, with the tests' environment as its .venv (so it does
    not install again), and the tests' fixtures, which the documents ingest."""
    (folder / "scripts").mkdir(parents=True)
    shutil.copy(REPOSITORY / "scripts" / "quickstart.sh", folder / "scripts")
    (folder / ".venv").symlink_to(Path(sys.prefix))
    (folder / "tests").symlink_to(REPOSITORY / "tests")
    return folder


@dataclass(frozen=True)
class Block:
    """One ```sh block of a document: its text as written, where it is, and the reason it
    is not played, if the line above its fence gives one."""

    doc: str
    line: int
    heading: str
    text: str
    not_played: str | None


def shell_blocks(path: Path) -> list[Block]:
    """Every ```sh block of a markdown document, in order."""
    lines = path.read_text().split("\n")
    name = str(path.relative_to(REPOSITORY))
    blocks: list[Block] = []
    heading, fence, start, above = "", None, 0, ""
    for number, line in enumerate(lines, 1):
        if fence is not None:
            if line.rstrip() == "```":
                if fence == "sh":
                    marked = NOT_PLAYED.fullmatch(above.strip())
                    text = "\n".join(lines[start : number - 1]) + "\n"
                    reason = marked.group(1) if marked else None
                    blocks.append(Block(name, start, heading, text, reason))
                fence = None
            continue
        if line.startswith("```"):
            fence = line[3:].strip()
            start = number
            continue
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.strip():
            above = line
    assert fence is None, f"{name}: a block is not closed"
    return blocks


def shell_environment(base: str) -> dict[str, str]:
    """A second terminal's: no setting of the tests', and the quickstart's last lines'
    `GRAPHSVC_URL` for the server it started (on a port of the test's)."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHSVC_")}
    return {**kept, "GRAPHSVC_URL": base}


@dataclass(frozen=True)
class Played:
    """What each block printed, by its place in the document."""

    blocks: list[Block]
    outputs: list[str | None]

    def under(self, heading: str) -> str:
        """What the blocks under a heading printed, together."""
        found = [
            output or ""
            for block, output in zip(self.blocks, self.outputs, strict=True)
            if block.heading == heading
        ]
        assert found, f"no block under {heading!r}"
        return "".join(found)

    @property
    def everything(self) -> str:
        return "".join(output or "" for output in self.outputs)


def play(blocks: list[Block], folder: Path, environment: dict[str, str]) -> Played:
    """Every block not marked, as written, in order, in one shell (`set -e`: a command that
    fails stops it), from the clone; a block that fails fails the test, naming it."""
    script = ["set -e"]
    for number, block in enumerate(blocks):
        if block.not_played is None:
            script += [f"echo '@@block {number}@@'; echo '@@block {number}@@' >&2", block.text]
    script.append("echo '@@block end@@'")
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=folder,
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    pieces = MARKER.split(done.stdout)
    said = dict(zip(pieces[1::2], pieces[2::2], strict=True))
    if done.returncode != 0 or "end" not in said:
        last = [key for key in said if key != "end"]
        failed = blocks[int(last[-1])] if last else None
        where = f"{failed.doc}:{failed.line} ({failed.heading})" if failed else "before a block"
        errors = done.stderr.rsplit(f"@@block {last[-1]}@@", 1)[-1] if last else done.stderr
        raise AssertionError(
            f"the block at {where} failed (exit {done.returncode}):\n"
            f"{failed.text if failed else ''}\n--- it printed:\n"
            f"{said.get(last[-1], '') if last else ''}\n--- on standard error:\n{errors[-4000:]}"
        )
    outputs = [said.get(str(number)) for number in range(len(blocks))]
    return Played(blocks, outputs)


@contextlib.contextmanager
def quickstart(folder: Path, environment: dict[str, str]) -> Iterator[tuple[str, list[str]]]:
    """The quickstart, run until it says it serves: the server's address and what it printed;
    stopped at the end."""
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
        yield f"http://127.0.0.1:{port}", printed
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)


def paste_printed(printed: list[str]) -> list[str]:
    """Every command the quickstart printed, pasted into one shell: what each curl printed."""
    commands = [line for line in printed if line.startswith(("curl ", "JWT="))]
    script = "\n".join(
        command if command.startswith("JWT=") else f"echo @@; {command}" for command in commands
    )
    pasted = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    outputs = pasted.stdout.split("@@\n")[1:]
    assert len(outputs) == len([c for c in commands if c.startswith("curl ")]) == 10
    return outputs


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


def check_the_readme_answers(played: Played) -> None:
    """The answers the README shows, as its blocks printed them."""
    assert '"http_status"' not in played.everything  # no error body anywhere
    # The seed's five operations.
    answers = played.under("The operations, one example each").splitlines()
    assert len(answers) == 5
    assert_all_succeeded(answers)
    # The tour on TESTLAB.LOCAL: loaded, its lists, a path, its exposure.
    loaded = played.under("Load a collection")
    assert ": 86 nodes, 963 edges from 9 file(s)\n" in loaded, loaded
    assert "active-directory TESTLAB.LOCAL: S-1-5-21-3130019616-2776909439-2417379446\n" in loaded
    win10 = "S-1-5-21-3130019616-2776909439-2417379446-1104  Computer       WIN10.TESTLAB.LOCAL"
    assert win10 in loaded, loaded
    lists = played.under("Who administers a computer")
    assert "5 in admin-users of WIN10.TESTLAB.LOCAL:\n" in lists, lists
    assert "DFM@TESTLAB.LOCAL  (AdminTo)\n" in lists
    assert "ADMIN@TESTLAB.LOCAL  (AdminTo through DOMAIN ADMINS@TESTLAB.LOCAL)\n" in lists
    assert "3 in dc-syncers of TESTLAB.LOCAL:\n" in lists
    path = played.under("A path to Domain Admins")
    assert "2 shortest path(s) of 3 step(s) from DFM@TESTLAB.LOCAL to DOMAIN ADMINS" in path
    steps = "-HasSession-> ADMINISTRATOR@TESTLAB.LOCAL -MemberOf-> DOMAIN ADMINS@TESTLAB.LOCAL\n"
    assert f"  1. DFM@TESTLAB.LOCAL -AdminTo-> WIN10.TESTLAB.LOCAL {steps}" in path, path
    assert "4 nodes, 4 edges: ['AdminTo', 'CanPSRemote', 'HasSession', 'MemberOf']\n" in path
    exposure = played.under("Exposure: who reaches tier zero")
    assert exposure.startswith("13 of 15 enabled users (86.7%) have a path to tier zero; 22 ")
    # Cypher on the AD sample collection, as the README shows its answers.
    cypher = played.under("Ask in Cypher")
    kerberoastable = "ADMINISTRATOR@PHANTOM.CORP\nSVC_KERB_DEL@PHANTOM.CORP\n(2 rows)"
    assert kerberoastable in cypher and "NOPREAUTH@PHANTOM.CORP\n(1 row)" in cypher, cypher
    assert "-[HasSession]-> ADMINISTRATOR@PHANTOM.CORP -[MemberOf]-> DOMAIN ADMINS" in cypher
    answer = json.loads(next(line for line in cypher.splitlines() if line.startswith('{"data"')))
    assert {v["value"] for v in answer["data"]["literals"]} == {
        "ADMINISTRATOR@PHANTOM.CORP",
        "SVC_KERB_DEL@PHANTOM.CORP",
    }
    # The owned marking, and the paths from it to Tier Zero.
    owned = played.under("Mark what you own, and its paths to Tier Zero")
    assert "['svc_kerb_del']\n[('SVC_KERB_DEL@PHANTOM.CORP', True)]\n" in owned
    assert "SVC_KERB_DEL@PHANTOM.CORP | owned\n(1 row)" in owned
    owned_paths = (
        "2 shortest path(s) from 1 start(s):\n"
        "  1. SVC_KERB_DEL@PHANTOM.CORP -MemberOf-> DOMAIN USERS@PHANTOM.CORP -ADCSESC3-> "
        "PHANTOM.CORP\n"
    )
    assert owned_paths in owned, owned
    # Azure: through an Azure role, an Entra role, a synchronized user.
    azure = played.under("Azure, briefly")
    assert "  azure CONTOSO: 6C12B0B0-B2CC-4A73-8252-0B94BFCA2145\n" in azure, azure
    assert "active-directory" not in azure  # its AD user is of no domain the tour loaded
    assert "  1. ALICE@CONTOSO.EXAMPLE -AZOwner-> PRODUCTION\n" in azure, azure
    assert "-AZHasRole-> HELPDESK@CONTOSO -AZResetPassword-> CAROL@CONTOSO.EXAMPLE\n" in azure
    synced = "CAROL@LAB.LOCAL -SyncedToEntraUser-> CAROL@CONTOSO.EXAMPLE -AZOwns-> "
    assert synced + "PAYROLL@CONTOSO.EXAMPLE -AZRunsAs-> PAYROLL@CONTOSO\n" in azure
    assert "['SyncedToEntraUser', 'AZOwns', 'AZRunsAs']\n['INTUNE@CONTOSO']\n" in azure, azure


def test_the_quickstart_and_the_readme_on_sqlite_twice(tmp_path: Path) -> None:
    folder = fresh_clone(tmp_path / "clone")
    blocks = shell_blocks(README)
    not_played = [block for block in blocks if block.not_played]
    # The two that start the server: this test runs the first, the PostgreSQL test the second.
    assert [block.text for block in not_played] == [
        "./scripts/quickstart.sh\n",
        "GRAPHSVC_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/graphsvc "
        "./scripts/quickstart.sh\n",
    ]
    with quickstart(folder, {}) as (base, printed):
        assert_all_succeeded(paste_printed(printed))
        # Every block, top to bottom, in one shell: a block that changed what the next ones
        # sign with (the upload's collector token once did) fails them.
        played = play(blocks, folder, shell_environment(base))
    check_the_readme_answers(played)
    # Again on the store it made: the demo is found there, with new credentials, and the
    # console it prints shows them.
    with quickstart(folder, {}) as (_, printed):
        assert_all_succeeded(paste_printed(printed))
        open_the_printed_console(printed)
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
    # As the README writes it, on this test's database.
    command = next(b.text for b in shell_blocks(README) if "GRAPHSVC_DATABASE_URL=" in b.text)
    written = re.fullmatch(r"GRAPHSVC_DATABASE_URL=(\S+) \./scripts/quickstart\.sh\n", command)
    assert written is not None, command
    try:
        with quickstart(folder, {"GRAPHSVC_DATABASE_URL": url}) as (_, printed):
            outputs = paste_printed(printed)
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
    # The README's file name for its credentials is the one the quickstart makes.
    readme_parts = urlsplit(written.group(1))
    readme_name = f"demo-postgresql-{readme_parts.hostname}-{readme_parts.port}-graphsvc.json"
    assert f"`data/{readme_name}`" in README.read_text()


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
