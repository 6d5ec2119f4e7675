"""A real job on a real `labd run` (as root, the program runs as nobody, as in the fault found):
a grandchild its program detached is gone when the job has finished, and the iteration says
how many processes labd had to end."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.integration.http.conftest import TOKENS, Lab

# Detaches a shell (setsid between two forks) that would sleep and then write into the job's
# folder, as the stray the fault report found did; then exits at once.
DETACH = """
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sh", ["sh", "-c", "sleep $0; touch late", sys.argv[1]])
    os._exit(0)
os.wait()
"""


def _running(mark: str) -> list[str]:
    """Live (not zombie) processes whose command line holds `mark`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if mark.encode() in argv and state not in ("Z", "X"):
            found.append(proc.name)
    return found


def test_a_detached_grandchild_ends_with_the_job_and_is_counted(lab: Lab) -> None:
    ci = TOKENS["ci"]
    mark = f"30.{uuid.uuid4().int % 10**9:09d}"  # a sleep only this test starts
    spec = lab.touch_spec("detaching")
    spec["params"]["command"] = ["python3", "-c", DETACH, mark]
    spec["iterations"] = 2
    submitted = lab.request("POST", "/api/v1/jobs", {"id": "detaching", "spec": spec}, token=ci)
    assert submitted.status == 201, submitted.body
    assert lab.wait_finished("detaching", ci)["state"] == "succeeded"
    assert _running(mark) == []
    results = lab.request("GET", "/api/v1/jobs/detaching/results", token=ci).body
    # Each iteration's shell and, once the shell has started it, its sleep: ended, and said so
    # (on a loaded host the shell may be ended before it forks).
    ended = [i["fingerprint"]["stray_processes_ended"] for i in results["iterations"]]
    assert len(ended) == 2 and all(n in (1, 2) for n in ended), ended
    warnings = [
        line
        for line in lab.daemon.logs()
        if line.get("event") == "the program left processes running; the launcher ended them"
    ]
    assert [(w["job_id"], w["iteration"], w["count"]) for w in warnings] == [
        ("detaching", 0, ended[0]),
        ("detaching", 1, ended[1]),
    ]
