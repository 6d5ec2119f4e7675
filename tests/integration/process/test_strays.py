"""Nothing a measured program starts outlives its iteration: a grandchild that detached (setsid,
double fork) is ended by the launcher, counted on the iteration, and none of its work shows in
the program's own figures."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import statistics
import sys
import time
from pathlib import Path

import pytest

from labd.model import Device
from labd.sdk import RunContext
from labd_host.command import STRAYS, CommandParams, CommandScenario
from tests.conftest import policy_for_tests
from tests.integration.process.conftest import gnu_time

DEVICE = Device(id="host-x", driver="host", platform="host")
RUNS = 5

# Holds 60 MiB and burns about 0.2 s of CPU; unless "plain", leaves a stray running in a
# session of its own (setsid between two forks: the classic daemon), deaf to SIGTERM (so the
# launcher needs its SIGKILL) and burning CPU all through its grace; then exits. The stray's
# pid and session go to the file named by argv[1] before the program exits: a test that looked
# for it by command line could miss it in the middle of its exec.
PROGRAM = """
import os, signal, sys
held = bytearray(60 << 20)
sum(range(4_000_000))
if sys.argv[1] != "plain":
    if os.fork() == 0:
        os.setsid()
        stray = os.fork()
        if stray == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            null = os.open(os.devnull, os.O_RDWR)  # as a daemon does: off the caller's pipes
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.execvp("sh", ["sh", "-c", "while :; do :; done"])
        with open(sys.argv[1], "a") as record:
            record.write(f"{stray} {os.getpid()}\\n")
        os._exit(0)
    os.wait()
"""


def _strays(record: Path) -> list[int]:
    """The recorded strays still running: not zombies, and still in the session they were
    started in (a pid reused meanwhile is not one of them)."""
    alive = []
    for line in record.read_text().splitlines() if record.exists() else []:
        pid, session = (int(field) for field in line.split())
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue  # gone
        if stat[0] not in ("Z", "X") and int(stat[3]) == session:
            alive.append(pid)
    return alive


def _end(record: Path) -> None:
    """Ends the recorded strays (GNU time leaves its own), and waits until they are gone: a
    busy process on a loaded machine takes a while to die, and must not be read as one the
    launcher left."""
    deadline = time.monotonic() + 10
    while stray := _strays(record):
        assert time.monotonic() < deadline, f"strays {stray} outlived SIGKILL by 10 s"
        for pid in stray:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    record.unlink(missing_ok=True)


@pytest.mark.skipif(not Path("/usr/bin/time").exists(), reason="GNU time is not installed")
async def test_a_detached_grandchild_is_ended_counted_and_not_measured(
    tmp_path: Path, launcher_kind: str
) -> None:
    script = tmp_path / "detach.py"
    script.write_text(PROGRAM)
    record = tmp_path / "strays"
    detaching = [sys.executable, str(script), str(record)]
    ctx = RunContext("job", 1, DEVICE, tmp_path / "work", policy=policy_for_tests())
    s = CommandScenario(CommandParams(command=detaching), ctx)
    await s.setup()
    ours: list[dict[str, float]] = []
    rss: list[int] = []
    cpu_ms: list[float] = []
    try:
        for _ in range(RUNS):  # interleaved, so drift on this shared machine hits both alike
            started = time.monotonic()
            ours.append(await s.run_iteration(0))
            # The launcher gave the stray its grace before the SIGKILL, after the program's
            # clock stopped: the grace is not the program's time.
            assert (time.monotonic() - started) * 1000 - ours[-1]["wall_time_ms"] >= 900
            assert _strays(record) == []  # gone when the iteration returns, not later
            record.unlink()  # it was recorded: the program did leave one
            assert ctx.fingerprint[STRAYS] == 1
            # The same program under GNU time, which leaves its stray (ended here): like for
            # like, so what the launcher's ending of it would add is all that can differ.
            rss_kib, cpu_s = await asyncio.to_thread(gnu_time, detaching)
            _end(record)
            rss.append(rss_kib)
            cpu_ms.append(cpu_s * 1000)
    finally:
        _end(record)  # a failed assertion must not leave a CPU burner behind
        await s.teardown()
    assert statistics.median(v["max_rss_kib"] for v in ours) == pytest.approx(
        statistics.median(rss), rel=0.10
    )
    # The stray burned about a second of CPU in its grace: none of it may show. The same
    # program's CPU time on this kind of machine is bimodal (160 or 250 ms, in streaks, under
    # either measure), so five runs are compared loosely; the launcher's accuracy itself is
    # test_launcher's, over twenty runs.
    assert statistics.median(v["cpu_time_ms"] for v in ours) == pytest.approx(
        statistics.median(cpu_ms), rel=0.6
    )


async def test_a_program_that_leaves_nothing_records_zero(tmp_path: Path) -> None:
    ctx = RunContext("job", 1, DEVICE, tmp_path / "work", policy=policy_for_tests("sh"))
    s = CommandScenario(CommandParams(command=["sh", "-c", "sleep 0.01 & wait"]), ctx)
    await s.setup()
    await s.run_iteration(0)
    await s.teardown()
    assert ctx.fingerprint[STRAYS] == 0


async def test_a_time_out_during_the_strays_grace_is_not_the_programs(
    tmp_path: Path, launcher_kind: str
) -> None:
    """The program exits in time; its SIGTERM-deaf stray keeps the launcher busy past the
    iteration's time-out: the run is not flagged as timed out."""
    script = tmp_path / "detach.py"
    quick = PROGRAM.replace("held = bytearray(60 << 20)", "").replace("sum(range(4_000_000))", "")
    script.write_text(quick)
    record = tmp_path / "strays"
    params = CommandParams(
        command=[sys.executable, str(script), str(record)], iteration_timeout_s=0.8
    )
    ctx = RunContext("job", 1, DEVICE, tmp_path / "work", policy=policy_for_tests())
    s = CommandScenario(params, ctx)
    await s.setup()
    try:
        values = await s.run_iteration(0)
        assert values["wall_time_ms"] < 800  # it did exit in time
        assert ctx.flags == [] and ctx.fingerprint[STRAYS] == 1
        assert _strays(record) == [] and record.exists()
    finally:
        _end(record)
        await s.teardown()
