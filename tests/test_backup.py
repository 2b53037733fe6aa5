"""`graphsvc backup`: the SQLite copy whole and owner-only, taken while another connection
holds a write; the keys beside it, or said to be in the environment; PostgreSQL's command
printed without its password; an existing folder or a missing store refused. The restore
is played by tests/test_operations_doc.py."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

from click.testing import CliRunner

from graphsvc.cli.common import main
from tests.conftest import TEST_FERNET_KEY


def invoke(environment: dict[str, str | None], *args: str) -> tuple[int, str]:
    done = CliRunner().invoke(main, list(args), env=environment)
    return done.exit_code, done.output


def test_a_sqlite_store_and_its_keys_are_copied_while_written(tmp_path: Path) -> None:
    data = tmp_path / "data"
    environment: dict[str, str | None] = {
        "GRAPHSVC_DATA_DIR": str(data), "GRAPHSVC_DATABASE_URL": None,
        "GRAPHSVC_TOKEN_ENCRYPTION_KEY": None, "GRAPHSVC_JWT_SECRET": None,
    }  # fmt: skip
    assert invoke(environment, "backup", str(tmp_path / "nothing"))[0] == 1
    assert invoke(environment, "user", "create", "reader", "--role", "Read-Only",
                  "--secret", "a-long-secret-1")[0] == 0  # fmt: skip
    assert invoke(environment, "token", "create", "--user", "reader")[0] == 0
    (data / "jwt-signing.key").write_text("a session key, as a server makes it\n")  # at start
    (data / "jwt-signing.key").chmod(0o600)
    writer = sqlite3.connect(data / "graphsvc.sqlite3")
    writer.execute("BEGIN IMMEDIATE")  # a write under way: not in the copy
    writer.execute("DELETE FROM users")
    status, said = invoke(environment, "backup", str(tmp_path / "kept"))
    writer.rollback()
    writer.close()
    assert status == 0, said
    kept = tmp_path / "kept"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o700
    for name in ("graphsvc.sqlite3", "token-encryption.key", "jwt-signing.key"):
        assert stat.S_IMODE((kept / name).stat().st_mode) == 0o600, name
    copy = sqlite3.connect(kept / "graphsvc.sqlite3")
    assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert copy.execute("SELECT count(*) FROM users WHERE name = 'reader'").fetchone() == (1,)
    assert (kept / "token-encryption.key").read_text() == (
        data / "token-encryption.key"
    ).read_text()
    again, said = invoke(environment, "backup", str(kept))
    assert again == 1 and "exists" in said
    with_key = {**environment, "GRAPHSVC_TOKEN_ENCRYPTION_KEY": TEST_FERNET_KEY}
    status, said = invoke(with_key, "backup", str(tmp_path / "other"))
    assert status == 0 and "GRAPHSVC_TOKEN_ENCRYPTION_KEY is in the environment" in said
    assert not (tmp_path / "other" / "token-encryption.key").exists()


def test_postgresql_gets_the_command_to_run_without_its_password(tmp_path: Path) -> None:
    environment: dict[str, str | None] = {
        "GRAPHSVC_DATA_DIR": str(tmp_path / "data"),
        "GRAPHSVC_DATABASE_URL": "postgresql://graphsvc:s3cret@127.0.0.1:5432/graphsvc",
    }
    status, said = invoke(environment, "backup", str(tmp_path / "kept"))
    assert status == 0, said
    assert "pg_dump --format=custom --file=" in said and '"$GRAPHSVC_DATABASE_URL"' in said
    assert "s3cret" not in said
