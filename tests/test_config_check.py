"""`graphsvc config check`: every check on a store a server started on (both stores), and
each kind of problem a server would refuse or trip on, named with its fix and exit 1."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from graphsvc.cli.common import main
from tests.conftest import Env


def check(environment: dict[str, str | None]) -> tuple[int, dict[str, tuple[str, str]]]:
    done = CliRunner().invoke(main, ["config", "check", "--json"], env=environment)
    answer = json.loads(done.stdout)
    assert answer["ok"] is (done.exit_code == 0), done.output
    return done.exit_code, {c["name"]: (c["outcome"], c["detail"]) for c in answer["checks"]}


def test_a_store_in_use_passes_every_check(env: Env) -> None:
    done = env.cli("config", "check")
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[0].startswith("ok       settings: ")
    assert any(line.startswith("ok       store: ") and "schema at revision 0027" in line
               for line in lines), lines  # fmt: skip
    assert any(line.startswith("ok       token encryption key: ") for line in lines)


def fresh(tmp_path: Path) -> dict[str, str | None]:
    return {"GRAPHSVC_DATA_DIR": str(tmp_path / "data"), "GRAPHSVC_DATABASE_URL": None,
            "GRAPHSVC_TOKEN_ENCRYPTION_KEY": None, "GRAPHSVC_REDIS_URL": None}  # fmt: skip


def test_a_new_data_folder_is_noted_not_refused(tmp_path: Path) -> None:
    status, found = check(fresh(tmp_path))
    assert status == 0
    assert found["store"][0] == found["token encryption key"][0] == "note"
    assert not (tmp_path / "data").exists(), "a check writes nothing"


def test_each_problem_is_named_and_fails_the_check(tmp_path: Path) -> None:
    environment = fresh(tmp_path)
    (tmp_path / "data").mkdir(mode=0o700)
    key = tmp_path / "data" / "token-encryption.key"
    key.write_text("not a key\n")
    key.chmod(0o600)
    status, found = check(environment)
    assert status == 1 and found["token encryption key"][0] == "problem"
    assert "does not hold a key" in found["token encryption key"][1]
    key.write_text("kJ6kOaQf0fUQ2PSBEEWAcgSdCnSo9c6j9D7Df0eNeCo=\n")
    key.chmod(0o644)
    status, found = check(environment)
    assert status == 1 and "open to others (mode 644)" in found["token encryption key"][1]
    key.chmod(0o600)
    assert check(environment)[0] == 0
    unreachable = {**environment, "GRAPHSVC_REDIS_URL": "redis://127.0.0.1:1/0"}
    status, found = check(unreachable)
    assert status == 1 and "does not answer" in found["redis"][1]
    misspelt = {**environment, "GRAPHSVC_MAX_LIMTI": "10"}
    status, found = check(misspelt)
    assert status == 1 and "GRAPHSVC_MAX_LIMTI" in found["settings"][1]
    assert list(found) == ["settings"], "nothing else is checked on settings that do not load"
    invalid = {**environment, "GRAPHSVC_MAX_LIMIT": "none"}
    status, found = check(invalid)
    assert status == 1 and "GRAPHSVC_MAX_LIMIT" in found["settings"][1]
    unreachable_store = {
        **environment,
        "GRAPHSVC_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/x",
    }
    status, found = check(unreachable_store)
    assert status == 1 and found["store"][0] == "problem"
