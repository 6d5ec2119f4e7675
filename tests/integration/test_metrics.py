"""/metrics of a real daemon that ran a job: the figures Grafana reads, valid for promtool."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REQUIRE_SERVICES, LabdProcess


def metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " ") or line == name:
            return float(line.rsplit(" ", 1)[1])
    return None


def test_metrics_after_a_job(start_labd: Any, labd_config: Path) -> None:
    labd_config.write_text(
        labd_config.read_text()
        + '[metrics]\nsnapshot_interval_s = 0.2\nresult_series = ["met/*"]\n'
    )
    daemon: LabdProcess = start_labd()
    spec = {
        "suite": "met",
        "test": "true",
        "scenario": "command",
        "iterations": 3,
        "warmup": 1,
        "params": {"command": ["true"]},
    }
    assert daemon.post("/api/v1/jobs", {"id": "m1", "spec": spec})[0] == 201
    deadline = time.monotonic() + 30
    while daemon.get("/api/v1/jobs/m1")[1]["job"]["state"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(0.6)  # a snapshot or two
    text = daemon.get("/metrics")[1]
    assert metric(text, 'labd_jobs{state="succeeded"}') == 1
    assert metric(text, 'labd_jobs_finished_total{state="succeeded"}') == 1
    assert metric(text, 'labd_iterations_total{result="ok"}') == 4
    assert metric(text, "labd_iteration_duration_seconds_count") == 4
    assert metric(text, 'labd_job_duration_seconds_count{state="succeeded"}') == 1
    assert metric(text, 'labd_job_wait_seconds_count{priority="normal"}') == 1
    assert metric(text, 'labd_devices{platform="host",state="available"}') == 1
    assert metric(text, "labd_outbox_backlog") is not None
    assert metric(text, "labd_mqtt_connected") is not None
    latest = [line for line in text.splitlines() if line.startswith("labd_latest_result{")]
    assert any('metric="wall_time_ms"' in line and 'suite="met"' in line for line in latest)
    assert "labd_events_dropped_total" in text and "labd_event_loop_lag_seconds_bucket" in text

    promtool = shutil.which("promtool")
    if promtool is None:
        if REQUIRE_SERVICES:
            pytest.fail(
                "promtool is missing (apt-get install prometheus) and LABD_REQUIRE_SERVICES=1"
            )
        pytest.skip("promtool is missing (apt-get install prometheus)")
    check = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert daemon.stop() == 0


def test_a_wildcard_pattern_exports_no_more_series_than_the_cap(
    start_labd: Any, labd_config: Path
) -> None:
    """Whoever submits names tests and metrics: past metrics.max_result_series, a new test's
    results are not exported, and the series number stays bounded."""
    labd_config.write_text(
        labd_config.read_text()
        + '[metrics]\nresult_series = ["met/*"]\nmax_result_series = 3\n'
    )
    daemon: LabdProcess = start_labd()
    for test in ("first", "second"):  # three metrics each: wall and CPU time, memory
        spec = {"suite": "met", "test": test, "scenario": "command", "iterations": 1,
                "warmup": 0, "params": {"command": ["true"]}}  # fmt: skip
        assert daemon.post("/api/v1/jobs", {"id": test, "spec": spec})[0] == 201
        deadline = time.monotonic() + 30
        while daemon.get(f"/api/v1/jobs/{test}")[1]["job"]["state"] != "succeeded":
            assert time.monotonic() < deadline
            time.sleep(0.1)
    daemon.wait_for_log(
        "labd_latest_result is at metrics.max_result_series: new series not exported"
    )
    latest = [x for x in daemon.get("/metrics")[1].splitlines() if x.startswith("labd_latest_")]
    assert len(latest) == 3 and all('test="first"' in line for line in latest), latest
    assert daemon.stop() == 0
