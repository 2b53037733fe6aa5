"""The README's configuration table is the settings reference: it must not drift."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from graphsvc.settings import Settings, describe_settings_error

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_setting_is_documented_with_its_docstring() -> None:
    for name, field in Settings.model_fields.items():
        row = next(
            (
                line
                for line in README.splitlines()
                if line.startswith(f"| `GRAPHSVC_{name.upper()}` |")
            ),
            None,
        )
        assert row is not None, f"GRAPHSVC_{name.upper()} is missing from the README"
        assert field.description and field.description in row, name


def test_settings_come_from_prefixed_environment_variables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GRAPHSVC_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("GRAPHSVC_EDITION", "community")
    monkeypatch.setenv("GRAPHSVC_MAX_WAIT_SECONDS", "90")
    settings = Settings()
    assert settings.edition == "community" and settings.max_wait_seconds == 90
    assert settings.resolved_database_url() == f"sqlite:///{tmp_path / 'graphsvc.sqlite3'}"


@pytest.mark.parametrize("variable", ["GRAPHSVC_INGESTER", "GRAPHSVC_INGEST_WORKER"])
def test_the_ingester_is_turned_off_by_its_name_or_its_former_one(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    assert Settings().ingester
    monkeypatch.setenv(variable, "false")
    assert not Settings().ingester


@pytest.mark.parametrize("variable", ["GRAPHSVC_INGESTER", "GRAPHSVC_INGEST_WORKER"])
def test_a_bad_value_is_named_by_the_variable_that_holds_it(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "maybe")
    with pytest.raises(ValidationError) as raised:
        Settings()
    assert describe_settings_error(raised.value).startswith(f"{variable}='maybe': ")
