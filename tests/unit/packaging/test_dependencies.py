"""Every runtime dependency is used by runtime code: a library only tests need belongs in the
test extra (statsmodels did not: it brought pandas, patsy and formulaic to every install)."""

from __future__ import annotations

import ast
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).parents[3]
# Used without an import statement of their own: SQLAlchemy loads its SQLite driver by the
# store URL's name (sqlite+aiosqlite://).
LOADED_BY_NAME = {"aiosqlite"}


def imported_modules() -> set[str]:
    found = set()
    for path in [*ROOT.joinpath("labd").rglob("*.py"), *ROOT.joinpath("drivers").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def normalised(name: str) -> str:
    return name.lower().replace("_", "-")


def test_every_runtime_dependency_is_imported_by_runtime_code() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {normalised(Requirement(r).name) for r in project["dependencies"]}
    distributions = packages_distributions()
    used = {
        normalised(dist)
        for module in imported_modules()
        for dist in distributions.get(module, [])
    }
    assert sorted(runtime - used - LOADED_BY_NAME) == []
