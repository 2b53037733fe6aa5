"""Every doc a user follows, played as written: after a quickstart of its own (in a fresh
clone, on SQLite), each doc's `sh` blocks in order in one shell, a second terminal's, each
exiting 0 (the shell stops at a command that fails) and printing the answers the doc shows.
A block that cannot run in a test says why on the line above its fence (`<!-- not played:
... -->`); those are few, and each gives its reason. The README's blocks are played by
tests/test_quickstart.py, the backup and restore blocks of docs/operations.md on both stores
by tests/test_operations_doc.py."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_quickstart import (
    README,
    REPOSITORY,
    Played,
    fresh_clone,
    play,
    quickstart,
    shell_blocks,
    shell_environment,
)

# The docs with commands, in the order a reader takes them: analysts', then operators'.
USER_DOCS = [
    "docs/api.md",
    "docs/cli.md",
    "docs/cypher.md",
    "docs/operations.md",
    "docs/configuration.md",
    "docs/security.md",
]
# A handful at most, each for a reason a test cannot meet (root, systemd, other machines, a
# stopped server, the whole suite); the README's two start the server the tests start.
MOST_NOT_PLAYED = 8


def demo(folder: Path) -> dict[str, str]:
    found: dict[str, str] = json.loads((folder / "data" / "demo.json").read_text())
    return found


def check_api(played: Played, folder: Path, base: str) -> None:
    assert '"http_status"' not in played.everything  # no error body anywhere
    opengraph = played.under("OpenGraph schema extensions")
    assert "extension OKTA registered" in opengraph and "OktaOrg" in opengraph, opengraph
    job = json.loads(played.under("Uploading from another machine").splitlines()[-1])
    assert job["status"] == 2 and job["run_id"], job
    win10 = "S-1-5-21-3130019616-2776909439-2417379446-1104"
    found = played.under("Finding the ids to ask for")
    assert found.count(win10) >= 2 and "TESTLAB.LOCAL" in found, found
    entities = played.under("Entities and their lists")
    admins = json.loads(next(line for line in entities.splitlines() if '"holds"' in line))
    assert admins["count"] == 5, admins
    assert "EXTERNAL.LOCAL" in entities
    escalations = played.under("Escalation through certificate services")
    assert "(7 rows)\n23\nACCOUNT OPERATORS@PHANTOM.CORP ['ADCSESC10a'" in escalations
    paths = played.under("Attack paths")
    assert paths.startswith("['CanPSRemote', 'HasSession', 'MemberOf']\nno path from "), paths
    exposure = played.under("Exposure: who reaches tier zero")
    assert "'exposed': 13" in exposure and "1 WIN10.TESTLAB.LOCAL HasSession\n" in exposure
    saved = played.under("Saved queries")
    assert saved.startswith("1 Kerberoastable users owned\n"), saved
    assert "['Members of a group, by name', 'Computers without LAPS']\n" in saved
    assert "[('Pick a domain, then its computers', 'a query of 2 steps" in saved
    listed = "['Computers without LAPS', 'Kerberoastable users', 'Members of a group, by name']"
    assert f"{listed}\n" in saved
    files = "['Computers without LAPS.json', 'Kerberoastable users.json', "
    assert files + "'Members of a group, by name.json']" in saved
    owned = played.under("Owned, Tier Zero and labels")
    nearest = "DFM@TESTLAB.LOCAL -> UCCOMP.TESTLAB.LOCAL -> TESTLAB.LOCAL\n"
    assert owned.startswith("1 start(s) reach it\n") and nearest in owned, owned
    asked = played.under("Asking again: ETags, 304 and answers from memory")
    statuses = re.findall(r"^HTTP/1.1 (\d+)", asked, flags=re.M)
    assert statuses == ["200", "304", "200"], asked
    tags = re.findall(r"^etag: (.*?)\r?$", asked, flags=re.M)
    assert tags[0] == tags[1] != tags[2], tags
    tokens = played.under("Accounts, tokens and permissions")
    assert "token key:" in tokens and "last used never" in tokens, tokens
    cleared = played.under("Clearing data")
    assert cleared == "deleted: HasSession\n204\ndeleted: collected graph data\n", cleared
    # Its Python: the signing example, as written, with the demo's token.
    signing = python_blocks(REPOSITORY / "docs" / "api.md")[0]
    assert "def signed_get" in signing
    credentials = demo(folder)
    environment = {
        **shell_environment(base),
        "GRAPHSVC_TOKEN_ID": credentials["token_id"],
        "GRAPHSVC_TOKEN_KEY": credentials["token_key"],
    }
    ran = subprocess.run(
        [str(folder / ".venv" / "bin" / "python"), "-c", signing],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith('b\'{"count":'), ran.stdout


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.M | re.S)


def check_cli(played: Played, folder: Path, base: str) -> None:
    said = played.under("The command line")
    assert re.match(r"graphsvc \S+\n\['TESTLAB.LOCAL'\]\n16 in rdp-users of WIN10", said), said
    labels = "['ADMINISTRATOR@TESTLAB.LOCAL', 'DFM@TESTLAB.LOCAL', 'DOMAIN ADMINS@TESTLAB.LOCAL', "
    assert labels + "'WIN10.TESTLAB.LOCAL']\n" in said
    assert said.endswith("exit status 1\n"), said


def check_cypher(played: Played, folder: Path, base: str) -> None:
    said = played.under("Cypher")
    answer = json.loads(said.splitlines()[0])
    assert [v["value"] for v in answer["data"]["literals"]] == [
        "ADMINISTRATOR@PHANTOM.CORP",
        "SVC_KERB_DEL@PHANTOM.CORP",
    ]
    assert "SVC_KERB_DEL@PHANTOM.CORP\n(2 rows)\n" in said
    examples = played.under("Examples on the tests' fixtures")
    assert "NOPREAUTH@PHANTOM.CORP\n(1 row)\n" in examples
    assert "UCCOMP.TESTLAB.LOCAL\n" in examples and "(5 rows)\n" in examples, examples
    assert "-[HasSession]-> ADMINISTRATOR@TESTLAB.LOCAL -[MemberOf]-> DOMAIN ADMINS" in examples


def check_operations(played: Played, folder: Path, base: str) -> None:
    checked = played.under("Checking the configuration")
    assert "ok       store: sqlite:///" in checked and "problem" not in checked, checked
    token_hash = hashlib.sha256(demo(folder)["token_id"].encode()).hexdigest()[:12]
    assert played.under("Logs") == f"{token_hash}\n"
    health = played.under("Health, readiness and shutdown").splitlines()
    assert json.loads(health[0])["data"]["status"] == "ok"
    assert json.loads(health[1])["data"] == {
        "status": "ready",
        "database": "sqlite",
        "redis": "none",
    }
    assert "copied the store" in played.under("SQLite")
    assert sorted(p.name for p in (folder / "backup").iterdir()) == [
        "graphsvc.sqlite3",
        "jwt-signing.key",
        "token-encryption.key",
    ]
    assert "up to date already" in played.under("Upgrading")


def check_configuration(played: Played, folder: Path, base: str) -> None:
    checked = played.under("Checking the settings")
    refused = "unknown variable GRAPHSVC_LOGLEVEL (did you mean GRAPHSVC_LOG_LEVEL?)"
    assert refused in checked and checked.endswith("exit status 1\n"), checked
    fernet, secret = played.under("Keys and secrets").splitlines()
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}=", fernet) and len(secret) == 64


def check_security(played: Played, folder: Path, base: str) -> None:
    assert played.under("Secrets") == (
        "700 data\n600 data/graphsvc.sqlite3\n600 data/token-encryption.key\n"
        "600 data/jwt-signing.key\n600 data/demo.json\n"
    )


CHECKS: dict[str, Callable[[Played, Path, str], None]] = {
    "docs/api.md": check_api,
    "docs/cli.md": check_cli,
    "docs/cypher.md": check_cypher,
    "docs/operations.md": check_operations,
    "docs/configuration.md": check_configuration,
    "docs/security.md": check_security,
}


@pytest.mark.parametrize("doc", USER_DOCS)
def test_a_docs_commands_run_as_written_after_the_quickstart(doc: str, tmp_path: Path) -> None:
    folder = fresh_clone(tmp_path / "clone")
    blocks = shell_blocks(REPOSITORY / doc)
    with quickstart(folder, {}) as (base, _):
        played = play(blocks, folder, shell_environment(base))
        CHECKS[doc](played, folder, base)


def test_every_doc_with_commands_is_played() -> None:
    """A doc with commands to run is in the list above (and none is there without any), and
    no doc shows commands in a block the tests do not play (`console` sessions)."""
    docs = sorted((REPOSITORY / "docs").glob("*.md"))
    with_commands = [
        str(path.relative_to(REPOSITORY))
        for path in docs
        if any(block.not_played is None for block in shell_blocks(path))
    ]
    assert sorted(with_commands) == sorted(USER_DOCS)
    for path in [README, *docs]:
        assert "```console" not in path.read_text(), f"{path.name}: a console block"


def test_few_blocks_are_not_played_and_each_says_why() -> None:
    marked = [
        block
        for path in [README, *sorted((REPOSITORY / "docs").glob("*.md"))]
        for block in shell_blocks(path)
        if block.not_played is not None
    ]
    assert 0 < len(marked) <= MOST_NOT_PLAYED, [(b.doc, b.line) for b in marked]
    for block in marked:
        assert len(block.not_played or "") >= 20, f"{block.doc}:{block.line}: say why"
    # A mark stands above a block's fence, or it marks nothing.
    for path in [README, *sorted((REPOSITORY / "docs").glob("*.md"))]:
        marks = len(re.findall(r"^<!-- not played: .* -->$", path.read_text(), flags=re.M))
        assert marks == sum(1 for b in shell_blocks(path) if b.not_played), path.name
