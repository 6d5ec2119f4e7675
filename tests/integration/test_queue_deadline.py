"""`labd run` with a queue deadline: a job whose only device an administrator took out of
service times out at `scheduler.queue_timeout_s`, saying what it waited for, and `labd jobs
show` gives the deadline while it waits (it had waited for ever)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import LabdProcess
from tests.integration.test_disk_full import spec, until


def test_a_job_nothing_can_take_times_out_at_the_labs_queue_deadline(
    tmp_path: Path, start_labd: Callable[..., LabdProcess]
) -> None:
    config = tmp_path / "labd.toml"
    config.write_text(
        f'[daemon]\nlab = "deadline"\nstate_dir = "{tmp_path / "state"}"\nshutdown_grace = 3\n'
        '[http]\nport = 0\napi_port = 0\n[log]\nformat = "json"\n[mqtt]\nenabled = false\n'
        '[policy]\nprograms = ["python3"]\n'
        "[scheduler]\nqueue_timeout_s = 3\nreap_interval_s = 0.5\n"
    )
    daemon = start_labd(config)
    (device,) = daemon.get("/api/v1/devices")[1]["devices"]
    # What a job for it may name (a plugin tester had no way to see it but /metrics).
    shown = daemon.get(f"/api/v1/devices/{device['id']}")[1]["device"]
    assert "command" in shown["scenarios"]
    assert daemon.post(f"/api/v1/devices/{device['id']}/maintenance", {})[0] == 200
    assert daemon.post("/api/v1/jobs", {"id": "parked", "spec": spec("parked", "pass")})[0] == 201
    shown = subprocess.run(
        [sys.executable, "-m", "labd", "--config", str(config), "jobs", "show", "parked"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert f"waiting    waiting for one of 1 matching device(s): {device['id']} maintenance" in (
        shown.stdout
    )
    assert "deadline   20" in shown.stdout  # an ISO time: 2026-...
    job = until(
        lambda: (j := daemon.get("/api/v1/jobs/parked")[1]["job"])["state"] != "queued" and j
    )
    assert job["state"] == "timed_out"
    assert job["error"].startswith(
        f"not started within its queue_timeout_s (3 s): waiting for one of 1 matching device(s): "
        f"{device['id']} maintenance"
    )
    assert daemon.stop() == 0
