"""systemd/labd.service stays hardened: `systemd-analyze security` rates its exposure at 3.0
or less (the unit shipped at 5.5 before)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

UNIT = Path(__file__).parents[3] / "systemd" / "labd.service"
MOST_EXPOSURE = 3.0


def exposure(unit: Path) -> float:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    result = subprocess.run(
        [analyze, "security", "--offline=yes", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout + result.stderr)
    assert found, result.stdout + result.stderr
    return float(found.group(1))


def test_the_shipped_unit_is_exposed_at_most_3() -> None:
    assert exposure(UNIT) <= MOST_EXPOSURE


def test_the_measure_tells_a_bare_unit_apart(tmp_path: Path) -> None:
    """The analysis reads the file given: a unit without hardening scores far above 3."""
    bare = tmp_path / "labd.service"
    bare.write_text("[Service]\nExecStart=/bin/true\nUser=labd\n")
    assert exposure(bare) > MOST_EXPOSURE
