"""The alerting rules under Prometheus's own rule engine (`promtool test rules`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REQUIRE_SERVICES

DEPLOY = Path(__file__).parents[2] / "deploy"


def test_alerting_rules_pass_their_unit_tests() -> None:
    """deploy/prometheus-rules.test.yml: the first regression after a start alerts, whether
    the counter's series appears at 1 or was initialised at 0; a quiet counter and a restart's
    reset do not."""
    promtool = shutil.which("promtool")
    if promtool is None:
        if REQUIRE_SERVICES:
            pytest.fail("promtool is missing (apt-get install prometheus)")
        pytest.skip("promtool is missing (apt-get install prometheus)")
    check = subprocess.run(
        [promtool, "test", "rules", "prometheus-rules.test.yml"],
        cwd=DEPLOY,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS" in check.stdout
