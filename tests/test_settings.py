"""The README's configuration table is the settings reference: it must not drift."""

from __future__ import annotations

from pathlib import Path

from graphsvc.settings import Settings

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


def test_settings_come_from_prefixed_environment_variables(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GRAPHSVC_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("GRAPHSVC_EDITION", "community")
    monkeypatch.setenv("GRAPHSVC_MAX_WAIT_SECONDS", "90")
    settings = Settings()
    assert settings.edition == "community" and settings.max_wait_seconds == 90
    assert settings.resolved_database_url() == f"sqlite:///{tmp_path / 'graphsvc.sqlite3'}"
