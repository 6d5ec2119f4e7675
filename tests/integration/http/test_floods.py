"""Clients that open connections and never finish a request: labd times them out on every HTTP
listener, caps them well below its file descriptor limit, outlives running out of descriptors
without flooding its log, and raises its soft descriptor limit at start. A real `labd run`
(or a real side port) in a process with a low RLIMIT_NOFILE, real sockets."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from labd.daemon import reachable
from tests.conftest import TEST_PROGRAMS, LabdProcess

FDS = 256
HEADER_TIMEOUT_S = 1.5


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "labd.toml"
    config.write_text(
        f'[daemon]\nlab = "t-{uuid.uuid4().hex[:10]}"\n'
        f'state_dir = "{tmp_path / "state"}"\nshutdown_grace = 3\n'
        f"[http]\nport = 0\napi_port = 0\nheader_timeout_s = {HEADER_TIMEOUT_S}\n"
        '[log]\nformat = "json"\n[mqtt]\nenabled = false\n'
        f"[policy]\nprograms = {json.dumps(TEST_PROGRAMS)}\n"
    )
    return config


def _low_fds(soft: int = FDS, hard: int = FDS) -> list[str]:
    return ["prlimit", f"--nofile={soft}:{hard}", "--"]


def _flood(port: int, n: int) -> list[socket.socket]:
    """n connections that each send the start of a request and never the rest (those the
    server's listen queue has no room for stay half-open)."""
    held = []
    for _ in range(n):
        conn = socket.socket()
        conn.settimeout(0.2)
        try:
            conn.connect(("127.0.0.1", port))
            conn.send(b"GET /healthz HTTP/1.1\r\n")
        except OSError:
            pass
        held.append(conn)
    return held


def _closed_by_server(conns: list[socket.socket]) -> int:
    closed = 0
    for conn in conns:
        conn.setblocking(False)
        try:
            closed += conn.recv(100) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


def _healthz(port: int, within: float) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=within) as r:
        return int(r.status)


def _seconds_until_closed(conn: socket.socket, within: float = 10) -> float:
    """Send the start of a request on `conn` and time how long until the server closes it."""
    conn.settimeout(within)
    began = time.perf_counter()
    conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    assert conn.recv(100) == b""
    return time.perf_counter() - began


def test_a_flood_of_unfinished_requests_leaves_the_api_and_jobs_working(
    tmp_path: Path, start_labd: Any
) -> None:
    """With 256 descriptors, 400 such connections to the side port took every one: the API
    and /healthz stopped answering, jobs failed with EMFILE, and asyncio logged 'socket.accept()
    out of system resource' some 8,000 times a second (124 MB of log in about 30 s)."""
    daemon: LabdProcess = start_labd(_config(tmp_path), wrapper=_low_fds())
    flood = _flood(daemon.port, 400)
    try:
        time.sleep(HEADER_TIMEOUT_S / 2)
        assert daemon.get("/api/v1/devices")[0] == 200  # another listener: answers at once
        status, answer = daemon.post(
            "/api/v1/jobs",
            {
                "id": "under-flood",
                "spec": {
                    "suite": "flood",
                    "test": "job",
                    "scenario": "command",
                    "iterations": 3,
                    "warmup": 0,
                    "params": {"command": ["true"]},
                },
            },
        )
        assert status == 201, answer
        deadline = time.monotonic() + 60
        while (job := daemon.get("/api/v1/jobs/under-flood")[1]["job"])["state"] not in (
            "succeeded",
            "failed",
        ):
            assert time.monotonic() < deadline, job
            time.sleep(0.2)
        assert job["state"] == "succeeded", job
        # The connections the side port took were closed when their headers were late.
        time.sleep(HEADER_TIMEOUT_S + 1)
        assert _closed_by_server(flood) >= FDS // 6 - 1
    finally:
        for conn in flood:
            conn.close()
    assert _healthz(daemon.port, within=5) == 200
    daemon.stop()
    log = daemon.raw_log()
    assert "out of system resource" not in log
    assert log.count("connection limit reached") == 1, log[-3000:]
    assert len(log) < 200_000


def test_every_listener_times_out_unfinished_request_headers(
    tmp_path: Path, start_labd: Any
) -> None:
    """aiohttp's keep-alive timer (an hour by default) was all there was: headers begun and
    never finished held a connection and its descriptor for an hour."""
    daemon: LabdProcess = start_labd(_config(tmp_path))
    tcp = [("side port", daemon.port), ("api port", daemon.api_port)]
    for what, port in tcp:
        with socket.create_connection(("127.0.0.1", port)) as conn:
            waited = _seconds_until_closed(conn)
        assert HEADER_TIMEOUT_S - 0.2 < waited < HEADER_TIMEOUT_S + 2, what
    with socket.socket(socket.AF_UNIX) as conn, reachable(daemon.socket) as address:
        conn.connect(address)
        assert HEADER_TIMEOUT_S - 0.2 < _seconds_until_closed(conn) < HEADER_TIMEOUT_S + 2


def test_labd_raises_its_soft_open_files_limit_to_the_hard_one(
    tmp_path: Path, start_labd: Any
) -> None:
    """systemd starts services with a soft limit of 1024 and a hard one far above: labd kept
    1024, so a few hundred idle clients could take the descriptors its jobs needed."""
    daemon: LabdProcess = start_labd(_config(tmp_path), wrapper=_low_fds(256, 4096))
    limits = Path(f"/proc/{daemon.proc.pid}/limits").read_text()
    line = next(line for line in limits.splitlines() if line.startswith("Max open files"))
    assert line.split()[3:5] == ["4096", "4096"], line
    said = daemon.wait_for_log("open files limit")
    assert (said["soft_at_start"], said["soft"]) == (256, 4096)


# A side port whose process has all but a few descriptors taken (by its jobs, say) when a
# flood comes: accept() itself fails with EMFILE until they are given back.
STARVED = """
import asyncio, os, sys
from labd.config import HttpSettings
from labd.daemon.http import SidePort
from labd.logs import configure_logging

async def main():
    configure_logging("info", "json")
    side = SidePort(HttpSettings(port=0, api_host=""), lambda: b"")
    await side.start()
    hog = []
    try:
        while True:
            hog.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    for fd in hog[:3]:
        os.close(fd)
    print(side.port, flush=True)
    await asyncio.sleep(float(sys.argv[1]))  # the flood comes meanwhile
    for fd in hog[3:]:
        os.close(fd)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_accept_outlives_running_out_of_descriptors_and_says_so_once() -> None:
    """asyncio's own accept loop logged a traceback for each failed accept, thousands a
    second; now one line, and the port serves again once descriptors are free."""
    starved_for = 3.0
    server = subprocess.Popen(
        [*_low_fds(128, 128), sys.executable, "-c", STARVED, str(starved_for)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])},
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        began = time.monotonic()
        flood = _flood(port, 20)
        time.sleep(max(0.0, starved_for - (time.monotonic() - began)))
        try:
            assert _healthz(port, within=5) == 200  # served again, flood still connected
        finally:
            for conn in flood:
                conn.close()
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    output = err.decode()
    assert "out of system resource" not in output
    assert output.count("accept failed; retrying") == 1, output[-3000:]
    assert "Too many open files" in output


def test_a_console_form_must_be_small_and_arrive_in_time(
    tmp_path: Path, start_labd: Any
) -> None:
    """Headers whole, then a sign-in body a byte every few seconds: each such client held a
    side-port connection for as long as it liked, and 300 of them held /healthz and /metrics
    (the header time-out does not cover a body)."""
    daemon: LabdProcess = start_labd(_config(tmp_path))  # its header time-out: 1.5 s

    def post(length: int, body: bytes) -> bytes:
        conn = socket.create_connection(("127.0.0.1", daemon.port), timeout=30)
        head = (
            f"POST /console/login HTTP/1.1\r\nHost: 127.0.0.1:{daemon.port}\r\n"
            f"Origin: http://127.0.0.1:{daemon.port}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {length}\r\n\r\n"
        )
        conn.sendall(head.encode() + body)
        began = time.monotonic()
        answer = conn.recv(4096)
        conn.close()
        assert time.monotonic() - began < 15
        return answer.split(b"\r\n")[0]

    assert post(1_000_000, b"t") == b"HTTP/1.1 413 Request Entity Too Large"
    assert post(100, b"token=") == b"HTTP/1.1 408 Request Timeout"  # 94 bytes never come
