"""The host driver's `command` scenario, running real programs."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import sys
import uuid
from pathlib import Path

import pytest

from labd.errors import TestFailure
from labd.sdk import Device, RunContext
from labd_host import HostDriver
from labd_host.command import CommandParams, CommandScenario
from labd_host.driver import HostOptions
from tests.conftest import policy_for_tests

DEVICE = Device(id="host-x", driver="host", platform="host")


async def scenario(tmp_path: Path, **params: object) -> CommandScenario:
    ctx = RunContext("job", 1, DEVICE, tmp_path / "work", policy=policy_for_tests("sh"))
    s = CommandScenario(CommandParams.model_validate(params), ctx)
    await s.setup()
    return s


async def test_measures_wall_time_cpu_time_and_peak_memory(tmp_path: Path) -> None:
    burn = "x = bytearray(50 * 2**20); sum(range(3_000_000))"
    s = await scenario(tmp_path, command=[sys.executable, "-c", burn])
    values = await s.run_iteration(0)
    assert values["wall_time_ms"] >= values["cpu_time_ms"] * 0.5 > 0
    assert values["max_rss_kib"] > 50 * 1024  # the 50 MiB buffer shows up
    await s.teardown()


async def test_stabilisation_is_applied_to_the_child_and_recorded(tmp_path: Path) -> None:
    cpu = max(os.sched_getaffinity(0))
    probe = (
        "import os; open('seen', 'w').write("
        "f\"{sorted(os.sched_getaffinity(0))} {open('/proc/self/personality').read().strip()} "
        '{os.getcwd()}")'
    )
    s = await scenario(
        tmp_path, command=[sys.executable, "-c", probe], cpu=cpu, disable_aslr=True, tmpfs=True
    )
    await s.run_iteration(0)
    seen = await asyncio.to_thread((s.workdir / "seen").read_text)
    affinity, personality, cwd = seen.rsplit(" ", 2)
    assert affinity == f"[{cpu}]"
    assert int(personality, 16) & 0x0040000  # ADDR_NO_RANDOMIZE
    assert cwd.startswith("/dev/shm/labd-")
    stabilisation = s.ctx.fingerprint["stabilisation"]
    expected = {"cpu_affinity": [cpu], "aslr": "disabled", "workdir": f"tmpfs:{cwd}"}
    assert stabilisation.items() >= expected.items()
    assert {"cpu_governor", "turbo"} <= stabilisation.keys()  # applied, or why not
    await s.teardown()
    assert not Path(cwd).exists()


async def test_the_fingerprint_names_the_program_run_by_its_file_and_digest(
    tmp_path: Path,
) -> None:
    """`python3` is a link whose target changes with an upgrade: the results named only the
    name typed, so a job before and after an upgrade looked measured with one program."""
    s = await scenario(tmp_path, command=[sys.executable, "-c", "pass"])
    program = s.ctx.fingerprint["program"]
    real = os.path.realpath(sys.executable)
    assert program["path"] == sys.executable and program["real_path"] == real
    assert program["bytes"] == Path(real).stat().st_size
    assert program["sha256"] == hashlib.sha256(Path(real).read_bytes()).hexdigest()
    await s.teardown()


async def test_arguments_reach_the_program_exactly_with_no_shell(tmp_path: Path) -> None:
    nasty = "; rm -rf / `id` $(id) 'q' \"d\" \n ünïcødé"
    s = await scenario(
        tmp_path,
        command=[sys.executable, "-c", "import sys; open('arg', 'w').write(sys.argv[1])", nasty],
    )
    await s.run_iteration(0)
    assert (s.workdir / "arg").read_text() == nasty


async def test_bad_exit_status_is_a_test_failure_with_stderr(tmp_path: Path) -> None:
    s = await scenario(tmp_path, command=[sys.executable, "-c", "import sys; sys.exit('kaput')"])
    with pytest.raises(TestFailure, match="exit status 1: kaput"):
        await s.run_iteration(0)


async def test_iteration_timeout_kills_the_program_and_flags_its_values(tmp_path: Path) -> None:
    first, second = unique_sleep(), unique_sleep()
    s = await scenario(
        tmp_path, command=["sh", "-c", f"sleep {first} & sleep {second}"], iteration_timeout_s=0.3
    )
    values = await asyncio.wait_for(s.run_iteration(0), 5)
    assert s.ctx.flags == ["timed out after 0.3 s (the run was killed)"]
    assert 300 <= values["wall_time_ms"] < 2000
    assert await sleeping(first) == await sleeping(second) == b""  # what it started is gone too


async def test_cancelling_an_iteration_kills_the_program(tmp_path: Path) -> None:
    duration = unique_sleep()
    s = await scenario(tmp_path, command=["sleep", duration])
    task = asyncio.get_running_loop().create_task(s.run_iteration(0))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.2)
    assert await sleeping(duration) == b""


def unique_sleep() -> str:
    """A sleep of about 30 s that only this test starts: a `sleep 30` elsewhere on the machine
    (another suite, a user) once failed these tests."""
    return f"30.{uuid.uuid4().int % 10**9:09d}"


async def sleeping(duration: str) -> bytes:
    """The pids of `sleep duration` processes still running."""
    out = await asyncio.create_subprocess_exec(
        "pgrep", "-f", f"^sleep {re.escape(duration)}$", stdout=-1
    )
    return (await out.communicate())[0]


def test_submit_time_checks_name_what_is_wrong() -> None:
    params = CommandParams(command=["no-such-program-xyz"], cpu=999, tmpfs=True, cwd="nope")
    assert CommandScenario.check(params) == [
        "params.command: program 'no-such-program-xyz' not found on this host",
        f"params.cpu: CPU 999 is not one of {sorted(os.sched_getaffinity(0))}",
        "params.tmpfs: cannot be combined with params.cwd",
        "params.cwd: 'nope' is not an absolute path",
    ]
    # Run as labd's own account, a missing directory is the job's to know at submit.
    missing = CommandParams(command=["python3"], cwd="/nope")
    assert CommandScenario.policy_problems(missing, policy_for_tests()) == [
        "params.cwd: '/nope' is not a directory"
    ]


async def test_host_driver_offers_this_machine_in_slots() -> None:
    driver = HostDriver(HostOptions(id="bench", slots=2, tags=["quiet"]), "h1")
    devices = await driver.discover()
    assert [d.id for d in devices] == ["bench-0", "bench-1"]
    assert devices[0].tags == ["quiet"] and devices[0].host == "h1"
    assert await driver.health(devices[0]) is None
