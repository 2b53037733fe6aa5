"""docs/operations.md, played as an operator would: a store with a graph and a user's token
backed up with the doc's commands, the originals gone, restored with its commands; the
restored store answers as the original did, and the token still signs (its key was sealed
with the key file kept beside the store). SQLite, and PostgreSQL with pg_dump."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import httpx2 as httpx

from graphsvc.accounts import tokens
from tests.conftest import (
    FIXTURES,
    POSTGRES_URL,
    admin_sql,
    require_postgres,
    served,
    signed_headers,
    with_database,
)

DOC = Path(__file__).resolve().parents[1] / "docs" / "operations.md"
V6 = FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "ingest"


def doc_blocks(title: str) -> list[str]:
    """The shell blocks of one section of docs/operations.md ("### SQLite", under "## Backup
    and restore"), as written, to its next heading."""
    section = re.split(rf"^#{{2,}} {re.escape(title)}\n", DOC.read_text(), flags=re.M)[1]
    section = re.split(r"^#{2,} ", section, maxsplit=1, flags=re.M)[0]  # a heading, not a comment
    return re.findall(r"```sh\n(.*?)```", section, flags=re.S)


def run(folder: Path, environment: dict[str, str], script: str) -> str:
    done = subprocess.run(
        ["bash", "-c", "set -e\n" + script],
        cwd=folder,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("GRAPHSVC_")},
             **environment},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def a_store_with_a_token(folder: Path, environment: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The graph of TESTLAB and a Read-Only user's token; what `graphsvc domains` says."""
    run(
        folder,
        environment,
        f""".venv/bin/graphsvc ingest {V6} >/dev/null 2>&1
        .venv/bin/graphsvc user create reader --role Read-Only >/dev/null 2>&1
        .venv/bin/graphsvc token create --user reader --save token.json >/dev/null 2>&1""",
    )
    domains = run(folder, environment, ".venv/bin/graphsvc domains")
    saved: dict[str, str] = json.loads((folder / "token.json").read_text())
    return domains, saved


def the_token_signs(environment: dict[str, str], saved: dict[str, str]) -> None:
    token = tokens.CreatedToken(saved["id"], saved["key"], None)
    with served(environment) as (base, _):
        headers = signed_headers(token, "GET", "/api/v2/self")
        answer = httpx.get(f"{base}/api/v2/self", headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"]["principal_name"] == "reader"


def operator_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "ops"
    folder.mkdir()
    (folder / ".venv").symlink_to(Path(sys.prefix))
    return folder


def test_sqlite_backup_and_restore_as_the_doc_says(tmp_path: Path) -> None:
    folder = operator_folder(tmp_path)
    data = tmp_path / "data"
    environment = {"GRAPHSVC_DATA_DIR": str(data)}
    run(folder, environment, ".venv/bin/graphsvc db upgrade >/dev/null")
    domains, saved = a_store_with_a_token(folder, environment)
    the_token_signs(environment, saved)  # served once: the session key is made then
    backup, restore = doc_blocks("SQLite")
    run(folder, environment, backup)
    shutil.rmtree(data)  # the machine lost
    run(folder, environment, restore)
    assert run(folder, environment, ".venv/bin/graphsvc domains") == domains
    the_token_signs(environment, saved)


def test_postgresql_backup_and_restore_as_the_doc_says(tmp_path: Path) -> None:
    require_postgres()
    names = [f"graphsvc_ops_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    original, restored = (with_database(POSTGRES_URL, name) for name in names)
    folder = operator_folder(tmp_path)
    data = tmp_path / "data"
    environment = {"GRAPHSVC_DATA_DIR": str(data), "GRAPHSVC_DATABASE_URL": original}
    try:
        run(folder, environment, ".venv/bin/graphsvc db upgrade >/dev/null 2>&1")
        asyncio.run(admin_sql(f"CREATE DATABASE {names[1]}"))
        domains, saved = a_store_with_a_token(folder, environment)
        the_token_signs(environment, saved)  # served once: the session key is made then
        backup, restore = doc_blocks("PostgreSQL")
        run(folder, environment, backup)
        run(folder, {**environment, "RESTORE_URL": restored}, restore)
        moved = {"GRAPHSVC_DATA_DIR": str(data), "GRAPHSVC_DATABASE_URL": restored}
        run(folder, moved, ".venv/bin/graphsvc db upgrade >/dev/null 2>&1")
        assert run(folder, moved, ".venv/bin/graphsvc domains") == domains
        the_token_signs(moved, saved)
    finally:
        asyncio.run(admin_sql(*(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)" for name in names)))


def test_a_store_restored_without_its_token_key_refuses_tokens_and_says_why(
    tmp_path: Path,
) -> None:
    """The doc's restore, less the token encryption key (a new one is made): each token is
    refused as any bad signature is, a 401, and the server says once what is missing."""
    folder = operator_folder(tmp_path)
    data = tmp_path / "data"
    environment = {"GRAPHSVC_DATA_DIR": str(data)}
    run(folder, environment, ".venv/bin/graphsvc db upgrade >/dev/null")
    _, saved = a_store_with_a_token(folder, environment)
    the_token_signs(environment, saved)
    backup, restore = doc_blocks("SQLite")
    run(folder, environment, backup)
    shutil.rmtree(data)
    (folder / "backup" / "token-encryption.key").unlink()
    run(folder, environment, restore.replace(" backup/token-encryption.key", ""))
    token = tokens.CreatedToken(saved["id"], saved["key"], None)
    with served(environment) as (base, process):
        for _ in range(2):
            headers = signed_headers(token, "GET", "/api/v2/self")
            answer = httpx.get(f"{base}/api/v2/self", headers=headers, timeout=10)
            assert answer.status_code == 401, answer.text
    said = process.stderr.read().decode()  # type: ignore[union-attr]
    assert said.count("a token's key cannot be opened with the token encryption key") == 1
