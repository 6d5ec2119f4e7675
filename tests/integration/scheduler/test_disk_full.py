"""A full disk is this host's condition: no device is blamed for it, leasing pauses while the
state directory is short of space and resumes by itself once space is freed."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from labd.config import SchedulerSettings
from labd.events import ComponentDown, ComponentUp, JobRequeued
from labd.model import DeviceState, JobState
from labd.store import Store
from tests.integration.scheduler.test_blame import stop, until
from tests.integration.scheduler.test_scheduler import FAST, make_lab
from tests.unit.store.test_space import sqlite_full_error


@pytest.mark.parametrize(
    ("fault", "reasons"),
    [
        ("disk_full_attempts", ["out of disk space on test-host"]),
        # A read-only remount used to quarantine the device as a "driver bug".
        ("read_only_attempts", ["the jobs' folder on test-host failed", "Read-only file system"]),
    ],
)
async def test_a_job_that_finds_the_disk_full_or_read_only_is_retried_and_its_device_not_blamed(
    store: Store, tmp_path: Path, fault: str, reasons: list[str]
) -> None:
    """The host's storage, not the device: retried, nothing held against the device."""
    # quarantine_after=1: a single infrastructure failure charged to d1 would quarantine it.
    lab = await make_lab(store, tmp_path, ["d1"], quarantine_after=1)
    try:
        await lab.submit("full", **{fault: 1})
        job = await lab.wait_state("full", JobState.SUCCEEDED, JobState.FAILED)
        assert (job.state, job.attempts) == (JobState.SUCCEEDED, 2)
        # The row says succeeded a moment before the pool releases the device (CI's load).
        for _ in range(100):
            if lab.pool.devices["d1"].state is not DeviceState.BUSY:
                break
            await asyncio.sleep(0.05)
        d1 = lab.pool.devices["d1"]
        assert (d1.state, d1.consecutive_failures) == (DeviceState.AVAILABLE, 0)
        requeued = [e for e in lab.events if isinstance(e, JobRequeued)]
        assert requeued and all(reason in requeued[0].reason for reason in reasons)
    finally:
        await stop(lab)


@pytest.fixture
def jobs_mount(tmp_path: Path) -> Iterator[Callable[[str], None]]:
    """The jobs' folder as a bind mount of itself, and a way to remount it `ro` or `rw`."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    if subprocess.run(["mount", "--bind", jobs, jobs], capture_output=True).returncode:
        pytest.skip("this machine does not let the tests mount (needs root and CAP_SYS_ADMIN)")
    try:
        yield lambda mode: subprocess.run(["mount", "-o", f"remount,bind,{mode}", jobs], check=True)
    finally:
        subprocess.run(["umount", jobs], check=False)


async def test_leasing_pauses_while_the_jobs_folder_is_read_only(
    store: Store, tmp_path: Path, jobs_mount: Callable[[str], None]
) -> None:
    """Free space alone does not say the folder can take a job: a read-only remount (real,
    by a bind mount) pauses leasing, says why, and leasing resumes once it is writable."""
    jobs_mount("ro")
    lab = await make_lab(store, tmp_path, ["d1"])  # its jobs' folder: tmp_path / "jobs"
    try:
        await lab.submit("waits")
        await until(lambda: any(isinstance(e, ComponentDown) for e in lab.events))
        (down,) = [e for e in lab.events if isinstance(e, ComponentDown)]
        assert down.component == "storage"
        assert f"cannot write in {tmp_path / 'jobs'}: Read-only file system" in down.error
        job = await lab.store.get_job("waits")
        assert job is not None and job.state is JobState.QUEUED
        jobs_mount("rw")
        await lab.scheduler.space.check()
        assert (await lab.wait_state("waits", JobState.SUCCEEDED)).attempts == 1
    finally:
        await stop(lab)


async def test_leasing_pauses_while_space_is_short_and_resumes_when_freed(
    store: Store, tmp_path: Path
) -> None:
    short = SchedulerSettings(**(FAST.model_dump() | {"min_free_mb": 2**30}))  # 1 PiB: never
    lab = await make_lab(store, tmp_path, ["d1"], settings=short)
    try:
        await lab.submit("waits")
        await until(lambda: any(isinstance(e, ComponentDown) for e in lab.events))
        (down,) = [e for e in lab.events if isinstance(e, ComponentDown)]
        assert down.component == "storage"
        assert f"free at {tmp_path}" in down.error and "min_free_mb is 1073741824" in down.error
        job = await lab.store.get_job("waits")
        assert job is not None and job.state is JobState.QUEUED
        why = await lab.jobs.why_waiting(job)
        assert why.startswith("this host leases no job: only "), why
        assert why.endswith("matching device(s): d1 available")  # not "next dispatch will take it"
        # The operator frees space (here: asks for less); the next check resumes leasing.
        lab.scheduler.space.min_free = 0
        await lab.scheduler.space.check()
        assert (await lab.wait_state("waits", JobState.SUCCEEDED)).attempts == 1
        assert any(isinstance(e, ComponentUp) and e.component == "storage" for e in lab.events)
        assert "leases no job" not in await lab.jobs.why_waiting(job)
    finally:
        await stop(lab)


async def test_an_attempt_the_full_disk_would_not_let_us_settle_says_why_when_it_expires(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the database's disk full too, the attempt's requeue cannot be written either: the
    lease expires once space is back, and the job used to read only "lease held by ...
    expired", nothing an operator would read as "disk"."""
    full = await sqlite_full_error(tmp_path / "full.db")  # what SQLite raises, for real
    requeue = store.requeue_job
    refusing = True

    async def full_while_refusing(*args: Any, **kwargs: Any) -> bool:
        if refusing:
            raise full
        return await requeue(*args, **kwargs)

    monkeypatch.setattr(store, "requeue_job", full_while_refusing)
    lab = await make_lab(store, tmp_path, ["d1"], quarantine_after=1)
    try:
        await lab.submit("unsettled", disk_full_attempts=1)
        await until(lambda: "unsettled" in lab.scheduler._unsettled, within=15)
        refusing = False  # the operator freed space
        job = await lab.wait_state("unsettled", JobState.SUCCEEDED, within=20)
        assert job.attempts == 2
        (requeued,) = [e for e in lab.events if isinstance(e, JobRequeued)]
        assert requeued.reason.startswith("lease held by test-host expired (out of disk space on")
        assert lab.pool.devices["d1"].consecutive_failures == 0
    finally:
        await stop(lab)


async def test_a_devices_own_time_out_is_still_the_devices(store: Store, tmp_path: Path) -> None:
    """Only what the database raised is taken for a database blip: a driver's time-out talking
    to its device still counts against the device (and is not the job's own time-out either:
    it used to end the job `timed_out`, "job exceeded its 3600 s", after a moment)."""
    lab = await make_lab(store, tmp_path, ["d1"])
    try:
        await lab.submit("slow", timeout_attempts=1)
        job = await lab.wait_state("slow", JobState.SUCCEEDED)
        assert job.attempts == 2
        (requeued,) = [e for e in lab.events if isinstance(e, JobRequeued)]
        assert requeued.reason == "driver bug: TimeoutError: the device did not answer"
    finally:
        await stop(lab)


async def test_a_jobs_folder_removed_by_hand_comes_back_private(
    store: Store, tmp_path: Path
) -> None:
    lab = await make_lab(store, tmp_path, ["d1"])
    try:
        assert not (tmp_path / "jobs").exists()  # as after `rm -rf state/jobs`
        await lab.submit("after")
        await lab.wait_state("after", JobState.SUCCEEDED)
        assert (tmp_path / "jobs").stat().st_mode & 0o777 == 0o700
    finally:
        await stop(lab)
