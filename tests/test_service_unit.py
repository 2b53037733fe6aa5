"""docs/graphsvc.service: the systemd unit verified by systemd-analyze (with this checkout's
graphsvc in place of /opt/graphsvc's), with no warning; it checks the configuration before
each start and gives the server its shutdown grace."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

from graphsvc.settings import Settings

UNIT = Path(__file__).parents[1] / "docs" / "graphsvc.service"
INSTALLED = "/opt/graphsvc/.venv/bin/graphsvc"


def test_the_unit_verifies_without_a_warning(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze is not None, "systemd-analyze is missing: apt-get install systemd"
    here = str(Path(sys.prefix) / "bin" / "graphsvc")
    unit = tmp_path / "graphsvc.service"
    unit.write_text(UNIT.read_text().replace(INSTALLED, here))
    done = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


def test_the_unit_checks_first_and_waits_for_the_grace() -> None:
    parsed = configparser.ConfigParser(strict=False, interpolation=None)
    parsed.optionxform = str  # type: ignore[assignment,method-assign]
    parsed.read_string(UNIT.read_text())
    service = parsed["Service"]
    assert service["ExecStartPre"] == f"{INSTALLED} config check"
    assert service["ExecStart"].startswith(f"{INSTALLED} serve ")
    grace = Settings.from_environment({}).shutdown_grace_seconds
    assert int(service["TimeoutStopSec"]) > grace
    assert service["UMask"] == "0077" and service["StateDirectoryMode"] == "0700"
