"""`labd run` on a state directory whose disk a job fills (a real tmpfs, mounted for the
test): leasing pauses and /readyz says why, the device keeps its good name, and work resumes
by itself once an operator frees space. An independent tester found the host quarantined and
the MQTT session restarting in a loop instead."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import LabdProcess, fill_to_the_last_byte

FILL = (
    "import os; s = os.statvfs('.'); "
    "open('ballast', 'wb').write(b'x' * (s.f_bavail * s.f_frsize - 2**20))"  # leave 1 MiB
)


def spec(test: str, program: str) -> dict[str, Any]:
    return {
        "suite": "disk",
        "test": test,
        "scenario": "command",
        "iterations": 1,
        "warmup": 0,
        "params": {"command": ["python3", "-c", program], "tmpfs": False},
    }


def until(check: Callable[[], Any], within: float = 30) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.2)
    raise AssertionError(f"not within {within} s")


def test_a_job_filling_the_disk_pauses_leasing_until_space_is_freed(
    tmp_path: Path, small_disk: Any, start_labd: Callable[..., LabdProcess]
) -> None:
    disk = small_disk(tmp_path / "disk", 24)
    config = tmp_path / "labd.toml"
    config.write_text(
        f'[daemon]\nlab = "diskfull"\nstate_dir = "{disk / "state"}"\nshutdown_grace = 3\n'
        '[http]\nport = 0\napi_port = 0\n[log]\nformat = "json"\n[mqtt]\nenabled = false\n'
        f'[policy]\nprograms = ["python3"]\n[scheduler]\nmin_free_mb = 4\n'
    )
    daemon = start_labd(config)
    assert daemon.post("/api/v1/jobs", {"id": "filler", "spec": spec("fill", FILL)})[0] == 201
    job = until(
        lambda: (
            (j := daemon.get("/api/v1/jobs/filler")[1]["job"])["state"] in ("succeeded", "failed")
            and j
        )
    )
    assert job["state"] == "succeeded", job

    _, ready = until(lambda: (r := daemon.get("/readyz"))[0] == 503 and r)
    problem = ready["checks"]["components"]
    assert "storage down: only 1 MiB free at" in problem and "min_free_mb is 4" in problem

    assert daemon.post("/api/v1/jobs", {"id": "next", "spec": spec("next", "pass")})[0] == 201
    time.sleep(2)
    queued = daemon.get("/api/v1/jobs/next")[1]
    assert queued["job"]["state"] == "queued"
    assert queued["job"]["waiting"].startswith("this host leases no job: only 1 MiB free")
    devices = daemon.get("/api/v1/devices")[1]["devices"]
    assert [d["state"] for d in devices] == ["available"]
    assert [d["consecutive_failures"] for d in devices] == [0]

    (ballast,) = (disk / "state").rglob("ballast")
    ballast.unlink()  # the operator frees space
    until(lambda: daemon.get("/api/v1/jobs/next")[1]["job"]["state"] == "succeeded")
    assert daemon.get("/readyz")[0] == 200
    assert daemon.wait_for_log("leasing resumed: the jobs' folder can take them again")


def test_a_start_on_a_full_disk_says_so(
    tmp_path: Path, small_disk: Any, start_labd: Callable[..., LabdProcess]
) -> None:
    """It said "unexpected error: database or disk is full" or "disk I/O error" (SQLite could
    not make its shared-memory file), which reads as broken hardware."""
    import subprocess
    import sys

    disk = small_disk(tmp_path / "disk", 16)
    config = tmp_path / "labd.toml"
    config.write_text(
        f'[daemon]\nlab = "diskfull"\nstate_dir = "{disk / "state"}"\nshutdown_grace = 3\n'
        '[http]\nport = 0\napi_port = 0\n[log]\nformat = "json"\n[mqtt]\nenabled = false\n'
        "[scheduler]\nmin_free_mb = 4\n"
    )
    assert start_labd(config).stop() == 0  # its database made
    fill_to_the_last_byte(disk / "ballast")
    started = subprocess.run(
        [sys.executable, "-m", "labd", "--config", str(config), "run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 3, started.stderr
    assert "cannot start: the state directory's disk is full (0 MiB free at" in started.stderr
    assert "free some space and start labd again" in started.stderr
    (disk / "ballast").unlink()
    assert start_labd(config).stop() == 0
