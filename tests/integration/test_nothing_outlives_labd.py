"""A labd killed outright (SIGKILL, the OOM killer) leaves none of the servers it started
behind: its virtual displays and a job's replay server die with it, so a lab restarted by hand
after a crash does not collect orphans holding memory, display numbers and ports."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LabdProcess, process_alive

ROOT = Path(__file__).resolve().parents[2]


def _children(pid: int, name: str) -> list[int]:
    """Live children of pid whose command is `name`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        comm = text[text.index("(") + 1 : text.rindex(")")]
        state, ppid = text[text.rindex(")") + 2 :].split()[:2]
        if int(ppid) == pid and comm == name and state not in ("Z", "X"):
            found.append(int(stat.parent.name))
    return found


def _until(check: Any, seconds: float) -> Any:
    deadline = time.monotonic() + seconds
    while not (found := check()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


@pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb is not installed")
def test_a_killed_labds_virtual_display_dies_with_it(start_labd: Any, labd_config: Path) -> None:
    labd_config.write_text(labd_config.read_text() + '[drivers.x11]\nxvfb = ["640x480"]\n')
    daemon: LabdProcess = start_labd()
    (display,) = _until(lambda: _children(daemon.proc.pid, "Xvfb"), 30)
    daemon.kill()
    gone = _until(lambda: not process_alive(display), 10)
    assert gone, f"Xvfb {display} outlived the killed labd"


# Starts a job's replay server as the runner does, says its pid, and waits to be killed.
STARTS_A_REPLAY_SERVER = """
import asyncio, sys, time
from pathlib import Path
from labd.replay import PROFILES, ReplayProcess

async def main():
    server = ReplayProcess(Path(sys.argv[1]), PROFILES["none"])
    await server.start()
    print(server.process.pid, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def test_a_killed_labds_replay_server_dies_with_it() -> None:
    archive = ROOT / "examples/page/site.har"
    owner = subprocess.Popen(
        [sys.executable, "-c", STARTS_A_REPLAY_SERVER, str(archive)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        server = int(owner.stdout.readline())
        assert process_alive(server)
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        gone = _until(lambda: not process_alive(server), 10)
        assert gone, f"replay server {server} outlived its labd"
    finally:
        owner.kill()
        owner.wait(10)
