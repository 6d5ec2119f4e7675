"""Fencing on real daemons sharing PostgreSQL: a host frozen past its lease (SIGSTOP) loses
its job to another host, and when it wakes (SIGCONT) it writes nothing and kills what it ran."""

from __future__ import annotations

import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

from tests.conftest import LabdProcess
from tests.integration.recovery.test_takeover import config, wait_job, wait_until

# Each run of the measured program notes its pid when it starts and again if it ends.
PROGRAM = (
    "import os, sys, time; log = sys.argv[1]; pid = os.getpid()\n"
    "open(log, 'a').write(f'{pid} start\\n'); time.sleep(float(sys.argv[2]))\n"
    "open(log, 'a').write(f'{pid} end\\n')"
)


def measured(log: Path, seconds: float, iterations: int, **device: str) -> dict[str, Any]:
    return {
        "suite": "recovery",
        "test": "fencing",
        "scenario": "command",
        "iterations": iterations,
        "warmup": 0,
        "params": {"command": ["python3", "-c", PROGRAM, str(log), str(seconds)]},
        "device": {"platform": "host", **device},
    }


def test_a_host_frozen_past_its_lease_writes_nothing_and_kills_its_program(
    start_labd: Any, tmp_path: Path, postgres_url: str
) -> None:
    # Measured programs run as an unprivileged user: their notes go where it can write.
    shared = Path(tempfile.mkdtemp(prefix="labd-fencing-"))
    shared.chmod(0o777)
    log, filler_log = shared / "programs.log", shared / "filler.log"
    for path in (log, filler_log):
        path.touch()
        path.chmod(0o666)
    a: LabdProcess = start_labd(config(tmp_path, "host-a", postgres_url))
    b: LabdProcess = start_labd(config(tmp_path, "host-b", postgres_url))
    filler = measured(filler_log, 0.5, 3, device="dev-host-b")  # keeps host-b busy first
    assert b.post("/api/v1/jobs", {"id": "filler", "spec": filler})[0] == 201
    wait_job(b, "filler", {"running"})
    assert a.post("/api/v1/jobs", {"id": "victim", "spec": measured(log, 6, 2)})[0] == 201
    running = wait_job(a, "victim", {"running"})
    assert running["lease_owner"] == "host-a"
    wait_until(lambda: "start" in log.read_text())  # host-a's program is measuring
    a.signal(signal.SIGSTOP)  # frozen: no heartbeat, but its program runs on
    try:
        taken = wait_until(
            lambda: (job := b.get("/api/v1/jobs/victim")[1]["job"])["lease_owner"] == "host-b"
            and job
        )
        assert taken["attempts"] == 2
        iterations_before = b.get("/api/v1/jobs/victim/results")[1]["iterations"]
    finally:
        a.signal(signal.SIGCONT)
    woke = len(a.logs())
    lost = a.wait_for_log(
        "lease lost: the run was stopped and its measured program killed; "
        "another host owns the job now",
        after=woke - 1 if woke else 0,
    )
    assert lost["job_id"] == "victim"

    done = wait_job(b, "victim", {"succeeded"}, within=60)
    assert done["lease_owner"] == "host-b" and done["attempts"] == 2
    results = b.get("/api/v1/jobs/victim/results")[1]["iterations"]
    first = [it for it in results if it["attempt"] == 1]
    # Host-a stored no value after it was frozen: its first iteration was still running then.
    assert first == [it for it in iterations_before if it["attempt"] == 1] == []
    assert [it["index"] for it in results if it["attempt"] == 2] == [0, 1]
    # Host-a's program was killed when it woke: it started and never ended.
    lines = [line for line in log.read_text().split("\n") if line]
    host_a_pid = lines[0].split()[0]
    assert f"{host_a_pid} end" not in lines
    assert sum(line.endswith(" end") for line in lines) == 2  # host-b's two iterations
    # Host-a is not blamed: its device is available again.
    devices = {d["id"]: d for d in a.get("/api/v1/devices")[1]["devices"]}
    assert devices["dev-host-a"]["state"] == "available", devices["dev-host-a"]
    for daemon in (a, b):
        daemon.signal(signal.SIGTERM)
        assert daemon.stop() == 0, daemon.raw_log()[-2000:]
    shutil.rmtree(shared, ignore_errors=True)
