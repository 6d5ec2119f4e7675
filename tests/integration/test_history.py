"""`labd detect --suite --test`: a test's history as the running daemon stored it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.conftest import LabdProcess


def test_detect_reads_the_stored_history_of_a_test(start_labd: Any, labd_config: Path) -> None:
    daemon: LabdProcess = start_labd()
    for n in range(3):
        spec = {
            "suite": "hist",
            "test": "sleepy",
            "scenario": "command",
            "iterations": 3,
            "warmup": 0,
            "params": {"command": ["sleep", "0.01"]},
            "build": {"revision": f"r{n}"},
            # The newest job's declaration sets a series' direction.
            "metrics": [{"name": "wall_time_ms", "higher_is_better": n == 2}],
        }
        assert daemon.post("/api/v1/jobs", {"id": f"h{n}", "spec": spec})[0] == 201
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        states = {daemon.get(f"/api/v1/jobs/h{n}")[1]["job"]["state"] for n in range(3)}
        if states == {"succeeded"}:
            break
        time.sleep(0.2)
    status, history = daemon.get("/api/v1/history?suite=hist&test=sleepy")
    assert status == 200
    wall = next(s for name, s in history["series"].items() if "/wall_time_ms/" in name)
    assert wall["builds"] == ["r0", "r1", "r2"] and len(wall["values"]) == 3
    assert wall["higher_is_better"] is True
    cpu = next(s for name, s in history["series"].items() if "/cpu_time_ms/" in name)
    assert cpu["higher_is_better"] is False  # the scenario's, undeclared by the manifest

    env = {**os.environ, "LABD_HTTP__PORT": str(daemon.port)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "labd",
            "--config",
            str(labd_config),
            "detect",
            "--suite",
            "hist",
            "--test",
            "sleepy",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["alerts"] == [] and answer["series"][0]["judged"] is False
    directions = {s["series"].split("/")[2]: s["higher_is_better"] for s in answer["series"]}
    assert directions["wall_time_ms"] is True and directions["cpu_time_ms"] is False
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "labd",
            "--config",
            str(labd_config),
            "detect",
            "--suite",
            "hist",
            "--test",
            "nope",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert (missing.returncode, missing.stderr.strip()) == (
        2,
        "no succeeded job of hist/nope in the store",
    )
    assert daemon.stop() == 0
