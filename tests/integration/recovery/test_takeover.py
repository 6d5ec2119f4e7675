"""Several real daemons sharing one PostgreSQL queue: a host that dies loses its job to another."""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path
from typing import Any

from tests.conftest import LabdProcess

LAB = f"rec-{uuid.uuid4().hex[:10]}"  # its own topics on a shared broker


def config(
    tmp_path: Path, name: str, url: str, lease_ttl_s: float = 3, heartbeat_s: float = 0.5
) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(
        f'[daemon]\nlab = "{LAB}"\n'
        f'host = "{name}"\nstate_dir = "{tmp_path / name}"\nshutdown_grace = 2\n'
        f'[http]\nport = 0\napi_port = 0\n[log]\nformat = "json"\n[store]\nurl = "{url}"\n'
        f"[scheduler]\nlease_ttl_s = {lease_ttl_s}\nheartbeat_s = {heartbeat_s}\n"
        "reap_interval_s = 0.5\n"
        f'[drivers.host]\nid = "dev-{name}"\n'
        '[policy]\nprograms = ["sleep", "python3"]\n'
    )
    return path


def sleeper(iterations: int) -> dict[str, Any]:
    return {
        "suite": "recovery",
        "test": "sleep",
        "scenario": "command",
        "iterations": iterations,
        "warmup": 0,
        "params": {"command": ["sleep", "0.5"]},
        "device": {"platform": "host"},
    }


def wait_until(check: Any, within: float = 60) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.1)
    raise AssertionError("condition never met")


def wait_job(daemon: LabdProcess, job_id: str, states: set[str], within: float = 60) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        job = daemon.get(f"/api/v1/jobs/{job_id}")[1]["job"]
        if job["state"] in states:
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} never reached {states}: {job}")


def test_a_killed_hosts_job_is_taken_over_after_its_lease_expires(
    start_labd: Any, tmp_path: Path, postgres_url: str
) -> None:
    a: LabdProcess = start_labd(config(tmp_path, "host-a", postgres_url))
    b: LabdProcess = start_labd(config(tmp_path, "host-b", postgres_url))
    # Keep host-b busy first, so host-a takes the job under test.
    assert (
        b.post(
            "/api/v1/jobs",
            {"id": "filler", "spec": {**sleeper(4), "device": {"device": "dev-host-b"}}},
        )[0]
        == 201
    )
    wait_job(b, "filler", {"running"})
    assert a.post("/api/v1/jobs", {"id": "victim", "spec": sleeper(8)})[0] == 201
    running = wait_job(a, "victim", {"running"})
    assert running["lease_owner"] == "host-a"
    # Host a has done part of the job (a second on a quiet machine; under load, longer).
    wait_until(lambda: a.get("/api/v1/jobs/victim/results")[1]["iterations"])
    a.kill()  # SIGKILL: no goodbye, the lease just stops being renewed
    killed_at = time.monotonic()

    done = wait_job(b, "victim", {"succeeded"})
    assert done["lease_owner"] == "host-b" and done["device_id"] == "dev-host-b"
    assert done["attempts"] == 2
    assert time.monotonic() - killed_at >= 2  # not before the 3 s lease ran out
    status, results = b.get("/api/v1/jobs/victim/results")
    assert status == 200
    attempts = {}
    for it in results["iterations"]:
        attempts.setdefault(it["attempt"], []).append(it)
    first_end = max(it["finished_at"] for it in attempts[1])
    second_start = min(it["started_at"] for it in attempts[2])
    assert first_end < second_start  # never ran on two hosts at once
    assert len(attempts[2]) == 8 and all("wall_time_ms" in it["values"] for it in attempts[2])
    b.signal(signal.SIGTERM)
    assert b.stop() == 0
