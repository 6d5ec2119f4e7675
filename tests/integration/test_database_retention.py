"""`labd run` with the database's retention: a job's raw values go `raw_max_age_days` after it
ended and every view still shows what they gave, saying why the values are gone; what needs
them (a comparison, the Perfherder export) refuses with the reason instead of a wrong answer."""

from __future__ import annotations

import http.client
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import LabdProcess
from tests.integration.http.test_console_live import sign_in
from tests.integration.test_disk_full import until

AFTER_S = 15  # raw values kept after a job ends (the limit is in days)


def labd(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labd", "--config", str(config), *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_raw_values_go_after_their_limit_and_every_view_says_so(
    labd_config: Path, start_labd: Callable[..., LabdProcess]
) -> None:
    with labd_config.open("a") as config:
        config.write(f"[store]\nraw_max_age_days = {AFTER_S / 86400}\nretention_interval_s = 1\n")
    daemon = start_labd(labd_config)

    def run(job_id: str, test: str, revision: str) -> None:
        spec = {"suite": "s", "test": test, "scenario": "command", "iterations": 3, "warmup": 0,
                "params": {"command": ["true"]}, "build": {"revision": revision}}  # fmt: skip
        assert daemon.post("/api/v1/jobs", {"id": job_id, "spec": spec})[0] == 201
        until(lambda: daemon.get(f"/api/v1/jobs/{job_id}")[1]["job"]["state"] == "succeeded", 60)

    run("old-base", "t", "r0")
    run("old", "t", "r1")
    before = daemon.get("/api/v1/jobs/old/results")[1]
    history = daemon.get("/api/v1/history?suite=s&test=t")[1]
    assert len(before["iterations"]) == 3 and "raw_values_removed" not in before

    after = until(
        lambda: "raw_values_removed" in (r := daemon.get("/api/v1/jobs/old/results")[1]) and r,
        AFTER_S + 30,
    )
    # Another test, run at both revisions since: its comparison is made, the pruned one named.
    run("new-base", "u", "r0")
    run("new", "u", "r1")
    cookie = sign_in(daemon)
    compared = console(daemon, "/console/compare?base=r0&new=r1", cookie)
    assert "1 test(s), 3 metric(s)" in compared and "Not compared:" in compared
    assert "s/t: job &#x27;old-base&#x27;: its raw values were removed on" in compared
    assert after["iterations"] == [] and after["summary"] == before["summary"]
    assert after["raw_values_removed"]["iterations"] == 3
    assert daemon.get("/api/v1/history?suite=s&test=t")[1] == history
    assert daemon.wait_for_log("database retention applied")["iterations"] in (3, 6)
    metrics = daemon.get("/metrics")[1]
    assert 'labd_db_retention_jobs_total{action="digested"} ' in metrics
    assert "labd_db_retention_failing_passes 0.0" in metrics

    table = labd(labd_config, "jobs", "results", "old")
    assert table.returncode == 0, table.stderr
    assert "wall_time_ms" in table.stdout  # the summary, as before
    assert "3 raw iterations removed on" in " ".join(table.stdout.split())
    shown = labd(labd_config, "jobs", "show", "old")
    assert "progress   3 raw iterations removed on" in shown.stdout  # not "0/3 iterations"
    for refused in (
        labd(labd_config, "jobs", "results", "old", "--format", "perfherder"),
        labd(labd_config, "jobs", "results", "old", "--format", "csv"),  # not a bare header
        labd(labd_config, "compare", "old", "old"),
    ):
        assert refused.returncode == 2, refused.stdout
        assert "removed on" in refused.stderr and "raw_max_age_days" in refused.stderr

    page = console(daemon, "/console/jobs/old", cookie)
    assert "3 raw iterations were removed on" in page
    assert "<td>wall_time_ms</td><td>ms</td><td>3</td>" in page  # the unit kept too
    assert daemon.stop() == 0


def console(daemon: LabdProcess, path: str, cookie: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    conn.request("GET", path, headers={"Cookie": cookie})
    return conn.getresponse().read().decode()
