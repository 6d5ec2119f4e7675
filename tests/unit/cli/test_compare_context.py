"""`labd compare` on two result files: set-aside counts and differing conditions are shown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from labd.cli.main import main

GOV = {"performance": {"governor": "performance"}, "powersave": {"governor": "powersave"}}


def result(job_id: str, values: list[float], governor: str, aside: int) -> dict[str, Any]:
    def it(index: int, value: float, set_aside: bool = False) -> dict[str, Any]:
        return {
            "job_id": job_id, "attempt": 1, "index": index, "warmup": False,
            "values": {"time_ms": value}, "error": "",
            "started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:00:01Z",
            "device_id": "d1", "variant": "", "set_aside": set_aside,
            "flags": ["timed out after 5 s (the run was killed)"] if set_aside else [],
            "fingerprint": {"model": "Rig 1", "stabilisation": GOV[governor]},
        }  # fmt: skip

    iterations = [it(i, v) for i, v in enumerate(values)]
    iterations += [it(len(values) + i, 9999.0, True) for i in range(aside)]
    spec = {"suite": "s", "test": "t", "metrics": [], "build": {}}
    job = {"id": job_id, "attempts": 1, "spec": spec, "device_id": "d1", "state": "succeeded",
           "error": ""}  # fmt: skip
    return {"job": job, "iterations": iterations}


def test_compare_names_set_aside_counts_and_differing_conditions(tmp_path: Path) -> None:
    values = [100.0 + (i % 5) * 0.2 for i in range(20)]
    (tmp_path / "base.json").write_text(json.dumps(result("a", values, "performance", 2)))
    (tmp_path / "new.json").write_text(json.dumps(result("b", values, "powersave", 0)))
    done = subprocess.run(
        [sys.executable, "-m", "labd", "compare", "base.json", "new.json"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "base: 2 iterations set aside (2x timed out after 5 s)" in done.stdout
    assert "conditions differ between base and new" in done.stdout
    assert 'stabilisation: {"governor": "performance"} -> {"governor": "powersave"}' in done.stdout
    assert "no change" in done.stdout  # the 9999s set aside were never compared
    as_json = subprocess.run(
        [sys.executable, "-m", "labd", "compare", "base.json", "new.json", "--json"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    context = json.loads(as_json.stdout)
    assert context["set_aside"]["base"]["count"] == 2 and context["conditions_differ"]


def test_a_whole_ab_job_is_refused_naming_its_variants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its iterations are its variants': it said "no measured iteration with values"."""
    values = [100.0 + (i % 5) * 0.2 for i in range(16)]
    ab = result("ab1", values, "performance", 0)
    for n, it in enumerate(ab["iterations"]):
        it["variant"] = "base" if n % 2 == 0 else "new"
    (tmp_path / "ab.json").write_text(json.dumps(ab))
    (tmp_path / "other.json").write_text(json.dumps(result("b", values, "performance", 0)))
    assert main(["compare", str(tmp_path / "ab.json"), str(tmp_path / "other.json")]) == 2
    assert capsys.readouterr().err.strip() == (
        "ab.json: an A/B job: its iterations belong to its variants base and new, not to the "
        "job; compare one variant, ab1@base or ab1@new (the job's own verdict of new against "
        "base: labd jobs results ab1)"
    )
