"""A cancel asked on one host stops a job running on another at once (PostgreSQL's
LISTEN/NOTIFY), not at the running host's next heartbeat."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from tests.conftest import LabdProcess
from tests.integration.recovery.test_takeover import config, sleeper, wait_job


def test_a_cancel_on_another_host_stops_the_job_at_once(
    start_labd: Any, tmp_path: Path, postgres_url: str
) -> None:
    # A minute between heartbeats: without a notice the cancel would wait that long.
    a: LabdProcess = start_labd(config(tmp_path, "host-a", postgres_url, 180, 60))
    b: LabdProcess = start_labd(config(tmp_path, "host-b", postgres_url, 180, 60))
    spec = {**sleeper(60), "device": {"device": "dev-host-a"}}
    assert a.post("/api/v1/jobs", {"id": "long", "spec": spec})[0] == 201
    assert wait_job(a, "long", {"running"})["lease_owner"] == "host-a"
    asked = time.monotonic()
    status, body = b.post("/api/v1/jobs/long/cancel", {})
    assert status in (200, 202), body
    done = wait_job(b, "long", {"cancelled"}, within=30)
    took = time.monotonic() - asked
    assert took < 10, f"the cancel took {took:.1f} s: it waited for the heartbeat"
    assert done["error"] == "cancelled while running"
    # The device is free again: the next job on it runs.
    quick = {**sleeper(1), "device": {"device": "dev-host-a"}}
    assert b.post("/api/v1/jobs", {"id": "next", "spec": quick})[0] == 201
    assert wait_job(a, "next", {"succeeded"})["lease_owner"] == "host-a"
    for daemon in (a, b):
        daemon.signal(signal.SIGTERM)
        assert daemon.stop() == 0
