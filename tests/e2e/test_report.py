"""`labd report` as a person sees it: opened in headless Chromium, plots drawn, no errors."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from labd.report.html import render
from tests.conftest import REQUIRE_SERVICES, LabdProcess

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def need_chromium() -> str:
    if CHROMIUM is None:
        if REQUIRE_SERVICES:
            pytest.fail(
                "chromium is missing (apt-get install chromium) and LABD_REQUIRE_SERVICES=1"
            )
        pytest.skip("chromium is missing (apt-get install chromium)")
    return CHROMIUM


def chromium(html: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            need_chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--enable-logging=stderr",
            "--v=0",
            *args,
            html.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_job(daemon: LabdProcess, job_id: str, command: list[str], revision: str) -> None:
    spec = {
        "suite": "rep",
        "test": "t",
        "scenario": "command",
        "iterations": 8,
        "warmup": 1,
        "params": {"command": command},
        "build": {"revision": revision},
        "metrics": [{"name": "wall_time_ms", "unit": "ms"}],
    }
    assert daemon.post("/api/v1/jobs", {"id": job_id, "spec": spec})[0] == 201
    deadline = time.monotonic() + 60
    while daemon.get(f"/api/v1/jobs/{job_id}")[1]["job"]["state"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_report_of_an_ab_pair_renders_in_chromium(
    start_labd: Any, labd_config: Path, tmp_path: Path
) -> None:
    need_chromium()
    daemon: LabdProcess = start_labd()
    run_job(daemon, "fast", ["sleep", "0.01"], "r1")
    run_job(daemon, "slow", ["sleep", "0.05"], "r2")
    out = tmp_path / "report.html"
    env = {**os.environ, "LABD_HTTP__PORT": str(daemon.port)}
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "labd",
            "--config",
            str(labd_config),
            "report",
            "fast",
            "slow",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    # Without -o: report-<jobs>.html in the working directory, never over an existing file.
    again = [sys.executable, "-m", "labd", "--config", str(labd_config), "report", "fast"]
    first = subprocess.run(again, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert first.returncode == 0 and (tmp_path / "report-fast.html").is_file(), first.stderr
    second = subprocess.run(again, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert second.returncode == 2 and "report-fast.html exists; pass --force" in second.stderr
    forced = subprocess.run(
        [*again, "--force"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert forced.returncode == 0, forced.stderr
    html = out.read_text()
    # Nothing is fetched (links to the console are only links) and nothing runs.
    assert not re.search(r"""(src|href)=['"]?https?://[^'"]*\.(css|js)|<link|@import|url\(""", html)
    assert "<script" not in html and " src=" not in html
    console = f"http://127.0.0.1:{daemon.port}/console/jobs/fast"
    assert "Evidence: job fast" in html and f"{console}/artefacts/job.log" in html
    assert "regression" in html  # 5x slower is a regression on wall_time_ms

    dom = chromium(out, tmp_path, "--dump-dom")
    assert dom.returncode == 0
    assert dom.stdout.count("<svg") >= 5 and dom.stdout.count("<polyline") >= 3
    shot = tmp_path / "shot.png"
    rendered = chromium(out, tmp_path, "--window-size=1200,3000", f"--screenshot={shot}")
    assert rendered.returncode == 0 and shot.exists()
    console = [line for line in rendered.stderr.splitlines() if "CONSOLE" in line]
    assert console == [], console

    import cv2

    image = cv2.imread(str(shot))
    line_blue = np.array([0xB5, 0x63, 0x24])  # the plots' line colour (#2463b5) as BGR
    drawn = int((np.abs(image.astype(int) - line_blue).sum(axis=2) < 40).sum())
    assert drawn > 2000, f"only {drawn} plot pixels on the screenshot"
    assert daemon.stop() == 0


def test_report_for_an_unknown_job_says_so(start_labd: Any, labd_config: Path) -> None:
    daemon: LabdProcess = start_labd()
    env = {**os.environ, "LABD_HTTP__PORT": str(daemon.port)}
    result = subprocess.run(
        [sys.executable, "-m", "labd", "--config", str(labd_config), "report", "nope"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert (result.returncode, result.stderr.strip()) == (2, "no job 'nope'")
    assert daemon.stop() == 0


def fake_results(values: list[float], job_id: str = "j", error: str = "") -> dict[str, Any]:
    now = "2026-01-01T00:00:00Z"
    return {
        "job": {
            "id": job_id,
            "attempts": 1,
            "state": "succeeded",
            "error": "",
            "device_id": "d",
            "spec": {"suite": "s", "test": "t", "build": {"revision": ""}, "metrics": []},
        },
        "iterations": [
            {
                "job_id": job_id,
                "attempt": 1,
                "index": i,
                "warmup": False,
                "values": {} if error else {"m": v},
                "error": error,
                "started_at": now,
                "finished_at": now,
                "device_id": "d",
                "fingerprint": {},
            }
            for i, v in enumerate(values)
        ],
    }


def test_odd_inputs_give_a_report_that_says_so() -> None:
    same = render(
        fake_results([5.0] * 10),
        history={"series": {"s/t/m/d": {"builds": ["r1"], "values": [5.0], "jobs": ["j"]}}},
    )
    assert "All values are identical" in same and "one build so far" in same
    empty = render(fake_results([1.0, 2.0], error="crash"))
    assert "no measured iteration with values" in empty
    nothing = render(fake_results([1.0, 2.0, 3.0]), history={"series": {}})
    assert "No succeeded run of this test is stored yet" in nothing
