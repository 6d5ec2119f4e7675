"""Retention of artefacts on a real `labd run`: `labd artefacts gc` says what it would remove,
then removes it and says how much it freed (checked against du), never a running job's files;
/metrics shows each suite's disk use; the daemon applies the limits by itself."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.conftest import LabdProcess

WRITE_300K = "import os; open('data.bin', 'wb').write(os.urandom(300 * 1024))"


def _job(daemon: LabdProcess, job_id: str, suite: str, command: list[str]) -> None:
    spec = {"suite": suite, "test": "t", "scenario": "command", "iterations": 1, "warmup": 0,
            "params": {"command": command}}  # fmt: skip
    assert daemon.post("/api/v1/jobs", {"id": job_id, "spec": spec})[0] == 201


def _wait_state(daemon: LabdProcess, job_id: str, states: set[str]) -> None:
    deadline = time.monotonic() + 30
    while (state := daemon.get(f"/api/v1/jobs/{job_id}")[1]["job"]["state"]) not in states:
        assert time.monotonic() < deadline, f"{job_id} still {state}"
        time.sleep(0.1)


def _du(path: Path) -> int:
    """Bytes on disk as GNU du counts them (an independent measure)."""
    out = subprocess.run(["du", "-s", "-B1", str(path)], capture_output=True, text=True)
    return int(out.stdout.split()[0])


def _metric(daemon: LabdProcess, name: str, suite: str) -> float:
    text = daemon.get("/metrics")[1]
    found = re.search(rf'^{name}\{{suite="{re.escape(suite)}"\}} (\S+)$', text, re.M)
    assert found, f"{name}{{suite={suite!r}}} not in /metrics"
    return float(found.group(1))


def _labd(config: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "labd", "--config", str(config), "artefacts", *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_gc_removes_old_artefacts_and_says_what_it_freed(
    start_labd: Any, labd_config: Path, tmp_path: Path
) -> None:
    labd_config.write_text(
        labd_config.read_text()
        + "[artefacts]\nmax_age_days = 0\nhost_max_total_mb = 0\ngc_interval_s = 3600\n"
        # 2 seconds for the suite "old"; "keep" keeps its files forever (and, not listed, is
        # counted in /metrics as suite="(other)")
        + "[artefacts.suites.old]\nmax_age_days = 0.0000231\n"
        + "[artefacts.suites.quiet]\nmax_total_mb = 100\n"
    )
    daemon: LabdProcess = start_labd()
    jobs = tmp_path / "state" / "jobs"
    # Configured suites are exported from the start, at 0.
    assert _metric(daemon, "labd_artefacts_bytes", "quiet") == 0
    _job(daemon, "o1", "old", ["python3", "-c", WRITE_300K])
    _job(daemon, "k1", "keep", ["python3", "-c", WRITE_300K])
    _wait_state(daemon, "o1", {"succeeded"})
    _wait_state(daemon, "k1", {"succeeded"})
    old_bytes, keep_bytes = _du(jobs / "o1"), _du(jobs / "k1")
    assert old_bytes > 300 * 1024
    deadline = time.monotonic() + 10
    while _metric(daemon, "labd_artefacts_bytes", "(other)") != keep_bytes:
        assert time.monotonic() < deadline, "the finished job's files were not counted"
        time.sleep(0.1)
    assert _metric(daemon, "labd_artefacts_bytes", "old") == old_bytes
    assert _metric(daemon, "labd_artefacts_jobs", "old") == 1
    assert 'suite="keep"' not in daemon.get("/metrics")[1]  # a submitter's suite adds no series

    listed = _labd(daemon.config, "list", "k1")
    assert re.search(r"^data\.bin\s+file\s+300\.0 KiB\s+/api/v1/jobs/k1/artefacts/data\.bin$",
                     listed, re.M), listed  # fmt: skip

    _job(daemon, "r1", "old", ["sleep", "30"])  # running while the limits are applied
    _wait_state(daemon, "r1", {"running"})
    time.sleep(2.5)  # o1 and r1's folder are older than the suite's 2 s now

    dry = _labd(daemon.config, "gc", "--dry-run")
    row = r"^o1\s+old\s+[\d.]+d\s+[\d.]+ KiB\s+older than 2.31e-05 days$"
    assert re.search(row, dry, re.M), dry
    assert "would remove 1 jobs' artefacts" in dry and (jobs / "o1").exists()

    done = _labd(daemon.config, "gc")
    assert f"freed {old_bytes / 1024:.1f} KiB" in done, (done, old_bytes)
    # A manual pass is logged with the jobs it removed and who asked, besides the audit line.
    line = daemon.wait_for_log("artefacts removed by the retention limits")
    assert line["job_ids"] == ["o1"] and line["asked_by"], line
    assert not (jobs / "o1").exists()
    assert (jobs / "k1" / "data.bin").exists() and (jobs / "r1").exists()
    assert _metric(daemon, "labd_artefacts_removed_bytes_total", "old") == old_bytes
    assert _metric(daemon, "labd_artefacts_bytes", "(other)") == keep_bytes
    assert daemon.post("/api/v1/jobs/r1/cancel")[0] == 200


def test_the_daemon_applies_the_limits_by_itself(start_labd: Any, labd_config: Path) -> None:
    labd_config.write_text(
        labd_config.read_text() + "[artefacts]\nmax_age_days = 0.0000116\ngc_interval_s = 1\n"
    )
    daemon: LabdProcess = start_labd()
    _job(daemon, "p1", "periodic", ["python3", "-c", WRITE_300K])
    _wait_state(daemon, "p1", {"succeeded"})
    line = daemon.wait_for_log("artefacts removed by the retention limits", timeout=20)
    assert line["jobs"] == 1 and line["freed_bytes"] > 300 * 1024
    assert line["job_ids"] == ["p1"] and line["trigger"] == "periodic"
    listing = daemon.get("/api/v1/jobs/p1/artefacts")[1]
    assert listing["artefacts"] == []
