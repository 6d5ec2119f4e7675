"""A metric's direction is the scenario's unless the manifest says otherwise, for every reader:
a higher-is-better metric (frames per second) the manifest does not list, or lists only for
its unit, was read as lower-is-better by `labd compare`, the report, the console and the
baseline alerts, and a drop in frame rate was called an improvement."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from labd.config import PerfherderSettings
from labd.perfherder import perfherder
from labd.report.html import render
from tests.unit.cli.test_compare_context import result

FPS = {"time_ms": {"unit": "fps", "higher_is_better": True}}  # as the runner records it


def scenario_says_higher_is_better(job: dict[str, Any], manifest: list[Any]) -> dict[str, Any]:
    for it in job["iterations"]:
        it["fingerprint"]["metrics"] = FPS
    job["job"]["spec"]["metrics"] = manifest
    return job


def pair(manifest: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    base = result("a", [90.0 + (i % 5) * 0.2 for i in range(20)], "performance", 0)
    new = result("b", [60.0 + (i % 5) * 0.2 for i in range(20)], "performance", 0)
    return (
        scenario_says_higher_is_better(base, manifest),
        scenario_says_higher_is_better(new, manifest),
    )


def compare_verdict(tmp_path: Path, base: dict[str, Any], new: dict[str, Any]) -> str:
    (tmp_path / "base.json").write_text(json.dumps(base))
    (tmp_path / "new.json").write_text(json.dumps(new))
    done = subprocess.run(
        [sys.executable, "-m", "labd", "compare", "base.json", "new.json", "--json"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    (metric,) = json.loads(done.stdout)["metrics"]
    assert done.returncode == (1 if metric["verdict"] == "regression" else 0), done.stderr
    return str(metric["verdict"])


UNLISTED: list[Any] = []
UNIT_ONLY = [{"name": "time_ms", "unit": "frames/s", "higher_is_better": None}]


@pytest.mark.parametrize("manifest", [UNLISTED, UNIT_ONLY], ids=["unlisted", "unit only"])
def test_a_drop_in_a_higher_is_better_metric_is_a_regression_everywhere(
    tmp_path: Path, manifest: list[Any]
) -> None:
    base, new = pair(manifest)
    assert compare_verdict(tmp_path, base, new) == "regression"
    html = render(base, new)
    comparison = html[html.index("<h2>Comparison") :]
    assert "regression" in comparison and "improvement" not in comparison
    (subtest,) = perfherder(new, PerfherderSettings())["suites"][0]["subtests"]
    assert subtest["lowerIsBetter"] is False
    assert subtest["unit"] == ("frames/s" if manifest else "fps")


def test_the_manifest_saying_lower_is_better_is_taken_at_its_word(tmp_path: Path) -> None:
    base, new = pair([{"name": "time_ms", "higher_is_better": False}])
    assert compare_verdict(tmp_path, base, new) == "improvement"
    (subtest,) = perfherder(new, PerfherderSettings())["suites"][0]["subtests"]
    assert subtest["lowerIsBetter"] is True and subtest["unit"] == "fps"


def test_jobs_that_disagree_are_read_by_the_new_jobs_direction_and_said_to_differ(
    tmp_path: Path,
) -> None:
    """`labd compare` took the base's direction and the report the new's: each order of the
    same two jobs was a regression to one and an improvement to the other."""
    higher, _ = pair([])
    lower, _ = pair([{"name": "time_ms", "higher_is_better": False}])
    lower["iterations"] = [{**it, "values": {"time_ms": it["values"]["time_ms"] - 30}}
                           for it in lower["iterations"]]  # fmt: skip
    # higher (90) -> lower (60), read lower-is-better: better; and back, higher-is-better: better
    for base, new in ((higher, lower), (lower, higher)):
        assert compare_verdict(tmp_path, base, new) == "improvement"
        html = render(base, new)
        comparison = html[html.index("<h2>Comparison") :]
        assert "improvement" in comparison and "regression" not in comparison
    as_json = subprocess.run(
        [sys.executable, "-m", "labd", "compare", "base.json", "new.json", "--json"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(as_json.stdout)["conditions_differ"] == [
        "direction of time_ms: lower is better -> higher is better (the new job's is used)"
    ]
