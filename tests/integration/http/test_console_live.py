"""The console's live stream on a real daemon: it opens with where the page's jobs stand, and
open streams never hold up the daemon's stop."""

from __future__ import annotations

import http.client
import time
import urllib.parse
from typing import Any

from tests.conftest import LabdProcess


def sign_in(daemon: LabdProcess) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=10)
    form = urllib.parse.urlencode({"token": daemon.token})
    headers = {
        "Origin": f"http://127.0.0.1:{daemon.port}",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    conn.request("POST", "/console/login", body=form, headers=headers)
    answer = conn.getresponse()
    answer.read()
    assert answer.status == 303
    return answer.getheader("Set-Cookie", "").split(";")[0]


def test_a_stream_opens_with_its_jobs_state_and_does_not_hold_up_the_stop(
    start_labd: Any,
) -> None:
    daemon: LabdProcess = start_labd()
    spec = {"suite": "s", "test": "t", "scenario": "command", "iterations": 2,
            "params": {"command": ["true"]}}  # fmt: skip
    assert daemon.post("/api/v1/jobs", {"id": "done", "spec": spec})[0] == 201
    deadline = time.monotonic() + 60
    while daemon.get("/api/v1/jobs/done")[1]["job"]["state"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    cookie = sign_in(daemon)
    streams = []
    for _ in range(3):
        conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=10)
        conn.request("GET", "/console/live?job=done&job=nope", headers={"Cookie": cookie})
        answer = conn.getresponse()
        assert answer.status == 200
        assert answer.getheader("Content-Type", "").startswith("text/event-stream")
        streams.append((conn, answer))
    first = b""
    while b'"state": "succeeded"' not in first:  # a page that missed the end learns it now
        first += streams[0][1].read1(200)
    assert b"event: finished" in first and b"nope" not in first
    started = time.monotonic()
    assert daemon.stop(timeout=20) == 0
    # The stop closed the streams rather than waiting out the server's shutdown timeout.
    assert time.monotonic() - started < 15
    for conn, answer in streams:
        answer.read()  # ends: the daemon closed it
        conn.close()
