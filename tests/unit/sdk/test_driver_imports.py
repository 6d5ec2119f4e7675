"""Drivers import labd only through the plugin SDK and the capabilities' public faces, so
labd's internals can change without breaking a plugin (and a plugin cannot lean on them)."""

from __future__ import annotations

import ast
from pathlib import Path

DRIVERS = Path(__file__).parents[3] / "drivers"
FACES = {"labd.sdk", "labd.capture", "labd.markers", "labd.replay", "labd.process"}


def labd_imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [(node.lineno, n) for n in names if n == "labd" or n.startswith("labd.")]
    return found


def test_drivers_import_only_the_sdk_and_public_faces() -> None:
    files = sorted(DRIVERS.rglob("*.py"))
    assert len(files) > 20  # the scan found the drivers
    wrong = [
        f"{path.relative_to(DRIVERS)}:{line}: {module}"
        for path in files
        for line, module in labd_imports(path)
        if module not in FACES
    ]
    assert wrong == [], "drivers may import only " + ", ".join(sorted(FACES))
