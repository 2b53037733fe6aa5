"""docs/configuration.md's table is the settings reference: it must not drift."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import graphsvc.settings as settings_module
from graphsvc.cli import main
from graphsvc.settings import (
    Secret,
    Settings,
    SettingsError,
    describe_settings_error,
    describe_unknown_variables,
)
from graphsvc.store.db import redact_url

REFERENCE = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()


def settings_docstrings() -> dict[str, str]:
    """Each field of the Settings class and the docstring under it, read from its source
    (the reference is the code's own documentation, whatever reads the class)."""
    tree = ast.parse(Path(settings_module.__file__).read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Settings")
    found = {}
    for field, after in zip(cls.body, cls.body[1:], strict=False):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            found[field.target.id] = " ".join(after.value.value.split())
    return found


def test_every_setting_is_documented_with_its_docstring() -> None:
    documented = settings_docstrings()
    assert sorted(documented) == sorted(f.name for f in dataclasses.fields(Settings))
    for name, description in documented.items():
        row = next(
            (
                line
                for line in REFERENCE.splitlines()
                if line.startswith(f"| `GRAPHSVC_{name.upper()}` |")
            ),
            None,
        )
        assert row is not None, f"GRAPHSVC_{name.upper()} is missing from docs/configuration.md"
        assert description in row, name
    # And the table names no setting that is gone.
    rows = re.findall(r"^\| `GRAPHSVC_(\w+)` \|", REFERENCE, flags=re.M)
    assert sorted(row.lower() for row in rows) == sorted(documented)


def test_settings_come_from_prefixed_environment_variables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GRAPHSVC_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("GRAPHSVC_EDITION", "community")
    monkeypatch.setenv("GRAPHSVC_MAX_WAIT_SECONDS", "90")
    settings = Settings.from_environment()
    assert settings.edition == "community" and settings.max_wait_seconds == 90
    assert settings.resolved_database_url() == f"sqlite:///{tmp_path / 'graphsvc.sqlite3'}"


@pytest.mark.parametrize("variable", ["GRAPHSVC_INGESTER", "GRAPHSVC_INGEST_WORKER"])
def test_the_ingester_is_turned_off_by_its_name_or_its_former_one(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    assert Settings.from_environment().ingester
    monkeypatch.setenv(variable, "false")
    assert not Settings.from_environment().ingester


@pytest.mark.parametrize("variable", ["GRAPHSVC_INGESTER", "GRAPHSVC_INGEST_WORKER"])
def test_a_bad_value_is_named_by_the_variable_that_holds_it(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "maybe")
    with pytest.raises(SettingsError) as raised:
        Settings.from_environment()
    assert describe_settings_error(raised.value).startswith(f"{variable}='maybe': ")


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("GRAPHSVC_TOKEN_ENCRYPTION_KEY", "short", "=(hidden): must be a Fernet key"),
        ("GRAPHSVC_TOKEN_ENCRYPTION_KEY", "A" * 43 + "!", "=(hidden): must be a Fernet key"),
        ("GRAPHSVC_REDIS_URL", "localhost:6379", "='localhost:6379': use redis://host:port/db"),
        ("GRAPHSVC_REDIS_URL", "http://r:6379/0", "='http://r:6379/0': use redis://host:port/db"),
        ("GRAPHSVC_REDIS_URL", "redis://r:6379/x", "the database index 'x' must be a whole"),
        # Each of these passed the check before, then the rate limiter's client refused it
        # with a traceback that showed the password.
        ("GRAPHSVC_REDIS_URL", "redis://u:short@r:99999/0", "the host or port cannot be read"),
        ("GRAPHSVC_REDIS_URL", "redis://r/0", "name the host and its port"),
        ("GRAPHSVC_REDIS_URL", "redis://r:6379/\u00b2", "the database index '\u00b2' must be"),
        ("GRAPHSVC_REDIS_URL", "redis://[::1/0", "the host or port cannot be read"),
        ("GRAPHSVC_REDIS_URL", "rediss://r:1/0?ssl_cert_reqs=x", "ssl_cert_reqs must be none"),
        ("GRAPHSVC_JWT_SECRET", "\udcff", "=(hidden): should be text in UTF-8"),
    ],
)
def test_keys_and_redis_urls_are_checked_at_start(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, said: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as raised:
        Settings.from_environment()
    described = describe_settings_error(raised.value)
    assert described.startswith(variable) and said in described, described
    assert "short" not in described  # a key is never shown, even a wrong one


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:6379/0", "rediss://h:6380", "redis+unix:///run/redis.sock"]
)
def test_redis_urls_of_every_kind_are_taken(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("GRAPHSVC_REDIS_URL", url)
    assert Settings.from_environment().redis_url == url


def test_a_damaged_generated_key_file_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from graphsvc.settings import SettingsFileError

    monkeypatch.setenv("GRAPHSVC_DATA_DIR", str(tmp_path))
    settings = Settings.from_environment()
    key = settings.resolved_token_encryption_key()  # generated, and kept
    assert settings.resolved_token_encryption_key() == key
    (tmp_path / "token-encryption.key").write_text("edited by hand\n")
    with pytest.raises(SettingsFileError, match=r"token-encryption\.key does not hold a Fernet"):
        settings.resolved_token_encryption_key()


def test_a_redis_password_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHSVC_REDIS_URL", "redis://:s3cretpw@127.0.0.1:6379/abc")
    with pytest.raises(SettingsError) as raised:
        Settings.from_environment()
    described = describe_settings_error(raised.value)
    assert "s3cretpw" not in described and "redis://:***@127.0.0.1:6379/abc" in described


def test_a_key_pasted_with_a_newline_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "ZmDfcTF7_60GrrY167zsiPd67pEvs0aGOv2oasOM1Pg="
    monkeypatch.setenv("GRAPHSVC_TOKEN_ENCRYPTION_KEY", key + "\n")
    assert Settings.from_environment().resolved_token_encryption_key() == key.encode()


def test_a_misspelt_variable_is_refused_with_the_name_it_is_near(tmp_path: Path) -> None:
    store = {"GRAPHSVC_DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite3'}"}
    cases = [
        ("GRAPHSVC_DATABSE_URL", "unknown variable GRAPHSVC_DATABSE_URL (did you mean "
         "GRAPHSVC_DATABASE_URL?)"),
        ("GRAPHSVC_LOGLEVEL", "unknown variable GRAPHSVC_LOGLEVEL (did you mean "
         "GRAPHSVC_LOG_LEVEL?)"),
        ("GRAPHSVC_FROBNICATE", "unknown variable GRAPHSVC_FROBNICATE: graphsvc reads no such"),
    ]  # fmt: skip
    for variable, said in cases:
        refused = CliRunner().invoke(main, ["db", "upgrade"], env={**store, variable: "1"})
        assert refused.exit_code == 1, refused.output
        assert f"invalid configuration: {said}" in refused.output
        assert not (tmp_path / "store.sqlite3").exists()  # nothing done
    # The command line's client variables, and the test suite's, are graphsvc's own.
    ours = {"GRAPHSVC_URL": "http://127.0.0.1:1", "GRAPHSVC_USER_SECRET": "s" * 12}
    taken = CliRunner().invoke(
        main, ["db", "upgrade"], env={**store, **ours, "GRAPHSVC_TEST_ANYTHING": "1"}
    )
    assert taken.exit_code == 0, taken.output


def test_settings_read_as_pydantic_settings_read_them(tmp_path: Path) -> None:
    """The variables' names in any case; a choice in any case; an empty variable leaves its
    setting unset; true and false in their usual spellings; a number with spaces."""
    settings = Settings.from_environment(
        {
            "graphsvc_edition": "Community",
            "GRAPHSVC_LOG_LEVEL": "WARNING",
            "GRAPHSVC_DATABASE_URL": "",
            "GRAPHSVC_DATA_DIR": str(tmp_path),
            "GRAPHSVC_ALLOW_UNLIMITED_WAIT": "yes",
            "GRAPHSVC_CITRIX_RDP_SUPPORT": "On",
            "GRAPHSVC_MAX_WAIT_SECONDS": " 90 ",
            "GRAPHSVC_TOKEN_CACHE_SECONDS": "2.5",
        }
    )
    assert (settings.edition, settings.log_level) == ("community", "warning")
    assert settings.database_url is None and settings.data_dir == tmp_path
    assert settings.allow_unlimited_wait and settings.citrix_rdp_support
    assert (settings.max_wait_seconds, settings.token_cache_seconds) == (90, 2.5)
    assert not Settings.from_environment({"GRAPHSVC_INGESTER": "off"}).ingester


def test_every_problem_is_named_and_a_copy_is_checked_again(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_environment(
            {
                "GRAPHSVC_DB_POOL_SIZE": "0",
                "GRAPHSVC_TOKEN_CACHE_SECONDS": "nan",
                "GRAPHSVC_SDK_COMPATIBILITY": "2",
            }
        )
    described = describe_settings_error(raised.value)
    assert "GRAPHSVC_DB_POOL_SIZE='0': should be greater than or equal to 1" in described
    assert "GRAPHSVC_TOKEN_CACHE_SECONDS='nan': should be a finite number" in described
    assert "GRAPHSVC_SDK_COMPATIBILITY='2': should be true or false" in described
    settings = Settings.from_environment({"GRAPHSVC_DATA_DIR": str(tmp_path)})
    with pytest.raises(SettingsError, match="greater than or equal to 60"):
        dataclasses.replace(settings, jwt_lifetime_seconds=5)
    with pytest.raises(SettingsError, match="GRAPHSVC_METRICS_TOKEN"):
        dataclasses.replace(settings, metrics="token")


def test_a_secret_setting_is_never_shown() -> None:
    key = "ZmDfcTF7_60GrrY167zsiPd67pEvs0aGOv2oasOM1Pg="
    settings = Settings.from_environment(
        {"GRAPHSVC_TOKEN_ENCRYPTION_KEY": key, "GRAPHSVC_JWT_SECRET": "a-session-key-for-tests"}
    )
    assert key not in repr(settings) and "a-session-key" not in repr(settings)
    assert settings.token_encryption_key == Secret(key)
    assert settings.resolved_jwt_secret() == b"a-session-key-for-tests"


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (
            {"ingest_poll_seconds": float("nan")},
            "GRAPHSVC_INGEST_POLL_SECONDS=nan: should be a finite",
        ),
        ({"token_cache_seconds": 10**400}, "GRAPHSVC_TOKEN_CACHE_SECONDS=1000"),
        ({"data_dir": None}, "GRAPHSVC_DATA_DIR=None: should be a folder's path"),
        ({"jwt_secret": b"key"}, "GRAPHSVC_JWT_SECRET=(hidden): should be text, not bytes"),
        ({"max_wait_seconds": "1e3"}, "should be a valid integer"),
        ({"max_wait_seconds": "\u0665"}, "should be a valid integer"),  # an Arabic-Indic 5
        ({"max_wait_seconds": "+-5"}, "should be a valid integer"),
        # More than any machine this runs on: SQLite took 10**20 MiB without a word.
        ({"ingest_cache_mb": "99999999999999999999"}, "GRAPHSVC_INGEST_CACHE_MB='9999"),
    ],
)
def test_values_given_in_python_are_checked_as_the_environment_s(
    given: dict[str, object], said: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_environment({}, **given)
    assert said in describe_settings_error(raised.value)
    assert "key" not in repr(raised.value.problems)  # a bad secret is not kept either


def test_a_path_too_long_for_the_system_is_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{'a' * 300}/graphsvc.sqlite3"
    refused = CliRunner().invoke(main, ["domains"], env={"GRAPHSVC_DATABASE_URL": url})
    assert refused.exit_code == 1, refused.output
    assert refused.exception is None or isinstance(refused.exception, SystemExit)
    assert "GRAPHSVC_DATABASE_URL=" in refused.output and "cannot be used" in refused.output


def test_passwords_are_shown_nowhere_whatever_they_hold() -> None:
    cases = {
        "postgresql://u:hun@ter2@h:5432/db": "postgresql://u:***@h:5432/db",
        "postgresql://u:pw@h/db?password=hunter2&sslmode=require": (
            "postgresql://u:***@h/db?password=***&sslmode=require"
        ),
        "redis://u:hun/ter2@h:6379/0": "redis://u:***@h:6379/0",
        "redis://:hunter2@h:6379/0": "redis://:***@h:6379/0",
        "postgresql://postgres@127.0.0.1:5432/test": "postgresql://postgres@127.0.0.1:5432/test",
        "sqlite:////var/lib/graphsvc/store.sqlite3": "sqlite:////var/lib/graphsvc/store.sqlite3",
    }
    assert {url: redact_url(url) for url in cases} == cases
    settings = Settings.from_environment(
        {
            "GRAPHSVC_DATABASE_URL": "postgresql://u:hunter2@h/db",
            "GRAPHSVC_REDIS_URL": "redis://:hunter2@h:6379/0",
        }
    )
    assert "hunter2" not in repr(settings)


def test_a_misspelt_variable_in_lower_case_is_refused_too() -> None:
    said = describe_unknown_variables({"graphsvc_editon": "community", "graphsvc_edition": "x"})
    assert said is not None and said.startswith(
        "unknown variable graphsvc_editon (did you mean GRAPHSVC_EDITION?)"
    )
