"""graphsvc runs on what `pip install .` installs: no module of it imports a package only the
`test` or `dev` extras bring (starlette, which the tests drive the app with, was imported by
the operations table for a type, and the quickstart's server died on a fresh clone)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata

# Imported on a fresh install by the quickstart's server, every command and every module;
# the migrations' env.py runs alembic when imported, and __main__ runs the command line.
NOT_IMPORTED = ("graphsvc.store.migrations.env", "graphsvc.__main__")


def requirement_names(requirements: list[str], extra: str | None) -> set[str]:
    """The distributions named by requirements of an extra (None: the plain dependencies)."""
    names = set()
    for requirement in requirements:
        name, _, marker = requirement.partition(";")
        in_extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        if (in_extra.group(1) if in_extra else None) == extra:
            names.add(re.split(r"[\s\[<>=!~(]", name.strip(), maxsplit=1)[0].lower())
    return names


def installed_closure(names: set[str]) -> set[str]:
    """The distributions these need, at any depth (those installed)."""
    seen: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop().replace("_", "-").lower()
        if name in seen:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        pending.extend(requirement_names(requires, None))
    return seen


def test_no_module_imports_what_only_the_tests_install() -> None:
    requires = metadata.requires("graphsvc") or []
    runtime = installed_closure(requirement_names(requires, None))
    extras = requirement_names(requires, "test") | requirement_names(requires, "dev")
    test_only = installed_closure(extras - {"graphsvc"}) - runtime
    modules = sorted(
        module
        for module, distributions in metadata.packages_distributions().items()
        if {d.replace("_", "-").lower() for d in distributions} <= test_only
    )
    assert "starlette" in modules and "pytest" in modules, modules
    code = f"""
import importlib, json, pkgutil, sys
BLOCKED = set({modules!r})
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is only installed for the tests")
sys.meta_path.insert(0, Refuse())
import graphsvc
failed = {{}}
for found in pkgutil.walk_packages(graphsvc.__path__, "graphsvc."):
    if found.name in {NOT_IMPORTED!r}:
        continue
    try:
        importlib.import_module(found.name)
    except ImportError as exc:
        failed[found.name] = str(exc)
print(json.dumps(failed))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(done.stdout.splitlines()[-1]) == {}, done.stdout
