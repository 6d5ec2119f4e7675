"""The scheduler's rules for a failed attempt and a job's last look before it runs, with the
store's side of the lease in memory."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from labd.config import SchedulerSettings
from labd.events import EventBus
from labd.model import Device, Job, JobState, Policy, TestSpec
from labd.scheduler import Scheduler
from labd.scheduler.start_check import start_check
from tests.scripted_driver import ScriptedDriver
from tests.unit.fakes import LeaseMemory

DEVICE = Device(id="d1", driver="scripted", platform="scripted", host="h")


def job_of(attempts: int, **spec: Any) -> Job:
    full = TestSpec.model_validate({"suite": "s", "test": "t", "scenario": "script", **spec})
    return Job(
        id="j", spec=full, state=JobState.RUNNING, attempts=attempts, device_id="d1",
        submitted_at=datetime.now(UTC),
    )  # fmt: skip


def scheduler_on(store: LeaseMemory, tmp_path: Path, **settings: Any) -> Scheduler:
    rules = SchedulerSettings(retry_backoff_s=10, retry_backoff_max_s=35, **settings)
    # Settling an attempt needs the store only: no pool, no job service.
    return Scheduler(store, None, None, EventBus(), rules, "h", tmp_path)  # type: ignore[arg-type]


async def test_a_failed_attempt_is_retried_later_each_time_up_to_the_longest_delay(
    tmp_path: Path,
) -> None:
    store = LeaseMemory()
    scheduler = scheduler_on(store, tmp_path)
    for attempt in (1, 2, 3):
        held = await scheduler._retry_or_fail(job_of(attempt, max_attempts=5), "t", "adb", "d1")
        assert held
    delays = [how["delay"] for _, how in store.moves]
    assert delays == [10, 20, 35]  # doubling, capped at retry_backoff_max_s
    assert all(how["avoid_device"] == "d1" for _, how in store.moves)  # elsewhere first


async def test_the_last_attempt_fails_the_job_saying_so(tmp_path: Path) -> None:
    store = LeaseMemory()
    await scheduler_on(store, tmp_path)._retry_or_fail(job_of(3, max_attempts=3), "t", "adb", "d1")
    assert store.moves == [
        ("finish", {"state": JobState.FAILED, "error": "adb (attempt 3, no retries left)"})
    ]


async def test_a_lease_lost_meanwhile_writes_nothing_and_blames_no_device(tmp_path: Path) -> None:
    store = LeaseMemory(lease_held=False)
    scheduler = scheduler_on(store, tmp_path)
    assert not await scheduler._retry_or_fail(job_of(1, max_attempts=3), "t", "adb", "d1")


async def test_a_spec_the_device_cannot_start_is_refused_with_the_reason() -> None:
    driver = ScriptedDriver(["d1"])
    params, problem = await start_check(job_of(1, scenario="nope"), DEVICE, driver, Policy())
    assert params is None
    assert problem == "device d1 (driver scripted) does not offer scenario 'nope'"
    params, problem = await start_check(
        job_of(1, params={"sleep_s": "long"}), DEVICE, driver, Policy()
    )
    assert params is None and "sleep_s" in problem
    params, problem = await start_check(job_of(1, params={"value": 3}), DEVICE, driver, Policy())
    assert problem == "" and getattr(params, "value", None) == 3
