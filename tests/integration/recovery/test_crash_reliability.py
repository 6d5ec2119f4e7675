"""200 jobs and three SIGKILLs at random moments: nothing is lost, nothing runs twice at once."""

from __future__ import annotations

import hashlib
import itertools
import random
import time
import uuid
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.conftest import LabdProcess

LAB = f"rec-{uuid.uuid4().hex[:10]}"  # its own topics on a shared broker

JOBS = 200
# A CI principal allowed a burst: the local admin's 120 submissions a minute would not do.
TOKEN = f"batch-{uuid.uuid4().hex}"
TERMINAL = {"succeeded", "failed", "cancelled", "timed_out"}


def config(tmp_path: Path) -> Path:
    path = tmp_path / "labd.toml"
    path.write_text(
        f'[daemon]\nlab = "{LAB}"\n'
        f'host = "crashy"\nstate_dir = "{tmp_path / "state"}"\nshutdown_grace = 2\n'
        '[http]\nport = 0\napi_port = 0\n[log]\nformat = "json"\n'
        "[scheduler]\nlease_ttl_s = 3\nheartbeat_s = 0.5\nreap_interval_s = 0.5\n"
        '[drivers.host]\nid = "slot"\nslots = 4\n'
        '[policy]\nprograms = ["sleep"]\n'
        '[auth.principals.batch]\nrole = "submitter"\nsubmits_per_minute = 1000\n'
        f'token_sha256 = ["{hashlib.sha256(TOKEN.encode()).hexdigest()}"]\n'
    )
    return path


def spec(n: int) -> dict[str, Any]:
    return {
        "suite": "reliability",
        "test": f"t{n % 7}",
        "scenario": "command",
        "iterations": 3,
        "warmup": 1,
        "max_attempts": 10,
        "device": {"platform": "host"},
        "params": {"command": ["sleep", "0.02"]},
    }


def test_every_job_ends_once_with_every_raw_value_after_three_sigkills(
    start_labd: Any, tmp_path: Path
) -> None:
    rng = random.Random(20261122)
    path = config(tmp_path)
    daemon: LabdProcess = start_labd(path)
    daemon.api_token = TOKEN
    for n in range(JOBS):
        status, _ = daemon.post("/api/v1/jobs", {"id": f"job-{n:03d}", "spec": spec(n)})
        assert status == 201
    for _ in range(3):
        time.sleep(rng.uniform(0.5, 2.5))
        daemon.kill()
        daemon = start_labd(path)
        daemon.api_token = TOKEN

    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        jobs = daemon.get(f"/api/v1/jobs?limit={JOBS * 2}")[1]["jobs"]
        if all(j["state"] in TERMINAL for j in jobs):
            break
        time.sleep(0.5)
    assert len(jobs) == JOBS
    assert {j["state"] for j in jobs} == {"succeeded"}, [
        j for j in jobs if j["state"] != "succeeded"
    ]

    interrupted = 0
    for job in jobs:
        results = daemon.get(f"/api/v1/jobs/{job['id']}/results")[1]
        by_attempt: dict[int, list[Any]] = defaultdict(list)
        for it in results["iterations"]:
            by_attempt[it["attempt"]].append(it)
        final = by_attempt[job["attempts"]]
        # Every iteration of the finished attempt is there, with every metric.
        assert [it["index"] for it in final] == [0, 1, 2, 3], job["id"]
        assert all(
            set(it["values"]) == {"wall_time_ms", "cpu_time_ms", "max_rss_kib"} for it in final
        )
        # Attempts never overlap in time: the job never ran on two devices at once.
        spans = sorted(
            (min(_t(i["started_at"]) for i in its), max(_t(i["finished_at"]) for i in its))
            for its in by_attempt.values()
        )
        assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(spans))
        interrupted += len(by_attempt) > 1
    assert interrupted >= 1, "no kill landed mid-job; the test proved nothing"
    # Every job the last daemon ended is in its duration histogram, those it took back at
    # start (leased before its broker was up) included.
    metrics = daemon.get("/metrics")[1]
    finished = _sample(metrics, 'labd_jobs_finished_total{state="succeeded"}')
    assert finished > 0
    assert _sample(metrics, 'labd_job_duration_seconds_count{state="succeeded"}') == finished
    assert daemon.stop() == 0


def _sample(metrics: str, series: str) -> float:
    (line,) = [line for line in metrics.splitlines() if line.startswith(series + " ")]
    return float(line.split()[-1])


def _t(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)
