"""The CPU a `graphsvc` command spends, start to end, on a small store (the tests' TESTLAB
collection in SQLite): user plus system time of each command's process, the median of
several runs, as an analyst's loop of commands pays it.

    python bench/cli_start.py [--runs 5]

Results are printed and written to bench/results/cli_start.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
TESTLAB = HERE.parent / "tests" / "fixtures" / "bloodhound-ce" / "fixtures" / "v6" / "ingest"
DFM = "S-1-5-21-3130019616-2776909439-2417379446-1105"
ADMINS = "S-1-5-21-3130019616-2776909439-2417379446-512"
COMMANDS = {
    "--version": ["--version"],
    "sign": ["sign", "GET", "/api/v2/self", "--token-id", "00000000-0000-0000-0000-000000000001"],
    "config check": ["config", "check"],
    "domains": ["domains"],
    "find": ["find", "dfm"],
    "list": ["list", "admin-users", "WIN10.TESTLAB.LOCAL"],
    "path": ["path", DFM, ADMINS],
    "path --from-tag": ["path", "--from-tag", "tier-zero", "--to-tag", "owned"],
    "exposure": ["exposure", "testlab.local"],
    "query": ["query", "MATCH (u:User) RETURN count(u) AS users"],
}


def cpu_of(arguments: list[str], environment: dict[str, str]) -> float:
    """User plus system seconds of one command's process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, "-m", "graphsvc", *arguments],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        input=b"key\n",
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as work:
        environment = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GRAPHSVC_")},
            "GRAPHSVC_DATA_DIR": work,
            "GRAPHSVC_TOKEN_KEY": "a-key-of-no-token",
        }
        subprocess.run(
            [sys.executable, "-m", "graphsvc", "ingest", str(TESTLAB)],
            env=environment,
            check=True,
            capture_output=True,
        )
        for name in ("path", "path --from-tag", "exposure"):  # the index files, made once
            cpu_of(COMMANDS[name], environment)
        results = {
            name: round(statistics.median(cpu_of(command, environment) for _ in range(runs)), 3)
            for name, command in COMMANDS.items()
        }
    print(json.dumps(results, indent=1))
    out = HERE / "results" / "cli_start.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
