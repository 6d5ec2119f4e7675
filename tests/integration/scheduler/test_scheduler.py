"""Scheduler, pool and runner together, in-process, on the real store (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog

from labd.config import PoolSettings, SchedulerSettings
from labd.errors import InvalidSpec
from labd.events import Event, EventBus, deserialise
from labd.model import AdminState, DeviceSelector, DeviceState, JobState
from labd.pool import Pool
from labd.scheduler import JobService, Scheduler
from labd.sdk import Driver
from labd.store import Store, lane_key
from tests.scripted_driver import RecordingPower, ScriptedDriver

FAST = SchedulerSettings(
    lease_ttl_s=2,
    heartbeat_s=0.2,
    retry_backoff_s=0.05,
    retry_backoff_max_s=0.2,
    reap_interval_s=0.2,
)


@dataclass
class Lab:
    store: Store
    bus: EventBus
    driver: ScriptedDriver
    pool: Pool
    jobs: JobService
    scheduler: Scheduler
    events: list[Event]

    async def submit(self, job_id: str, **params: Any) -> None:
        spec = {
            "suite": "s",
            "test": "t",
            "scenario": "script",
            "iterations": 3,
            "warmup": 1,
            "params": params,
            "device": {"platform": "scripted"},
        }
        spec.update(params.pop("spec", {}))
        spec["params"] = params
        await self.jobs.submit(spec, "test.toml", job_id=job_id, submitter="tests")

    async def wait_state(self, job_id: str, *states: JobState, within: float = 10) -> Any:
        async with asyncio.timeout(within):
            while True:
                job = await self.store.get_job(job_id)
                if job is not None and job.state in states:
                    return job
                await asyncio.sleep(0.02)


async def make_lab(
    store: Store,
    tmp_path: Path,
    ids: list[str],
    others: Sequence[Driver] = (),
    settings: SchedulerSettings = FAST,
    **pool: Any,
) -> Lab:
    """A lab of the scripted driver's devices `ids`; `others` are drivers listed before it."""
    bus = EventBus()
    store.bus = bus  # the store publishes the events of what it commits
    driver = ScriptedDriver(ids)
    power = pool.pop("power", {})
    drivers = {d.name: d for d in others} | {"scripted": driver}
    pool_settings = PoolSettings(discovery_interval_s=0.1, health_interval_s=0.1, **pool)
    the_pool = Pool(drivers, power, store, bus, pool_settings, "test-host")
    jobs = JobService(store, drivers, bus)
    scheduler = Scheduler(store, the_pool, jobs, bus, settings, "test-host", tmp_path / "jobs")
    sub = bus.subscribe("recorder")
    events: list[Event] = []

    async def record() -> None:
        async for event in sub:
            events.append(event)

    lab = Lab(store, bus, driver, the_pool, jobs, scheduler, events)
    lab._recorder = asyncio.get_running_loop().create_task(record())  # type: ignore[attr-defined]
    await the_pool.start()
    await scheduler.start()
    return lab


@pytest.fixture
async def lab(store: Store, tmp_path: Path) -> AsyncIterator[Lab]:
    the_lab = await make_lab(store, tmp_path, ["d1"])
    yield the_lab
    await the_lab.scheduler.stop(1)
    await the_lab.pool.stop(1)
    the_lab._recorder.cancel()  # type: ignore[attr-defined]


async def test_job_runs_and_keeps_every_raw_value_with_events_in_order(lab: Lab) -> None:
    await lab.submit("j1", value=10)
    job = await lab.wait_state("j1", JobState.SUCCEEDED)
    iterations = await lab.store.iterations("j1")
    assert [(i.index, i.warmup, i.values["value"]) for i in iterations] == [
        (0, True, 10),
        (1, False, 11),
        (2, False, 12),
        (3, False, 13),
    ]
    assert iterations[0].fingerprint["device"] == "d1"
    assert iterations[0].fingerprint["stabilisation"] == {"scripted": True}
    assert job.device_id == "d1" and job.attempts == 1
    await asyncio.sleep(0.05)
    kinds = [e.kind for e in lab.events if getattr(e, "job_id", None) == "j1"]
    assert kinds == ["job_queued", "job_leased", "job_running", "job_started"] + [
        "iteration_done"
    ] * 4 + ["job_finished"]


async def test_infrastructure_failure_is_retried_then_succeeds(lab: Lab) -> None:
    await lab.submit("flaky", infra_failures=1)
    job = await lab.wait_state("flaky", JobState.SUCCEEDED)
    assert job.attempts == 2
    assert any(e.kind == "job_requeued" for e in lab.events)


async def test_test_failure_is_recorded_and_not_retried(lab: Lab) -> None:
    await lab.submit("broken", fail_iteration=2)
    job = await lab.wait_state("broken", JobState.FAILED)
    assert job.attempts == 1
    assert job.error == "1 of 3 measured iterations failed; first: scripted failure"
    errors = [i.error for i in await lab.store.iterations("broken")]
    assert errors == ["", "", "scripted failure", ""]


async def test_a_job_that_fails_after_its_device_went_offline_is_retried_elsewhere(
    store: Store, tmp_path: Path
) -> None:
    """A driver tester's: a phone left adb's listing mid-job while its connections stayed
    open, and the job's failure was taken for the test's (not retried, nothing held against
    the device)."""
    lab = await make_lab(store, tmp_path, ["d1", "d2"])
    try:
        await lab.submit("orphaned", sleep_s=0.3, fail_iteration=3)
        first = await lab.wait_state("orphaned", JobState.RUNNING)
        lab.driver.ids.remove(first.device_id)
        await lab.pool.discover()
        job = await lab.wait_state("orphaned", JobState.FAILED, within=20)
        assert job.attempts == 2 and job.device_id != first.device_id
        assert job.error == "1 of 3 measured iterations failed; first: scripted failure"
        requeued = [e for e in lab.events if e.kind == "job_requeued"]
        assert [e.reason for e in requeued] == [  # type: ignore[attr-defined]
            f"infrastructure failure: device {first.device_id} went offline during the job "
            "(vanished); the job then failed: 1 of 3 measured iterations failed; first: "
            "scripted failure"
        ]
    finally:
        await lab.scheduler.stop(1)
        await lab.pool.stop(1)


async def test_out_of_attempts_fails_and_repeated_failures_quarantine_the_device(
    store: Store, tmp_path: Path
) -> None:
    lab = await make_lab(store, tmp_path, ["d1"], quarantine_after=3)
    try:
        await lab.submit("doomed", infra_failures=99, spec={"max_attempts": 3})
        job = await lab.wait_state("doomed", JobState.FAILED)
        assert job.attempts == 3 and "no retries left" in job.error
        device = lab.pool.devices["d1"]
        assert device.state is DeviceState.QUARANTINED
        assert "3 infrastructure failures in a row" in device.reason
        await lab.pool.set_admin("d1", AdminState.ENABLED)
        assert lab.pool.devices["d1"].state is DeviceState.AVAILABLE
    finally:
        await lab.scheduler.stop(1)
        await lab.pool.stop(1)


async def test_job_timeout_gives_timed_out(lab: Lab) -> None:
    await lab.submit("slow", sleep_s=5, spec={"timeout_s": 0.3})
    job = await lab.wait_state("slow", JobState.TIMED_OUT)
    # Where it hung (a plugin tester could not tell which scenario): none of its iterations.
    assert job.error == (
        "job exceeded its 0.3 s (timeout_s); scenario 'script' on d1 had recorded 0 iteration(s)"
    )
    # The device is handed back just after the job's state is written: wait for it.
    async with asyncio.timeout(5):
        while True:
            if lab.pool.devices["d1"].state is DeviceState.AVAILABLE:
                break
            await asyncio.sleep(0.02)


async def test_cancel_a_running_and_a_queued_job(lab: Lab) -> None:
    await lab.submit("long", sleep_s=1)
    await lab.submit("next", sleep_s=1)
    await lab.wait_state("long", JobState.RUNNING)
    waiting = await lab.store.get_job("next")
    assert waiting is not None
    assert "d1 busy (job long)" in await lab.jobs.why_waiting(waiting)
    with structlog.testing.capture_logs() as logs:
        await lab.scheduler.cancel("next")
        await lab.scheduler.cancel("next")  # again: nothing more happened to it
        await lab.scheduler.cancel("long")
        assert (await lab.wait_state("long", JobState.CANCELLED)).error == "cancelled while running"
        assert (await lab.wait_state("next", JobState.CANCELLED)).error == "cancelled while queued"
    # Followed by its id, every job's log ends with its line, a queued one's too.
    ended = [(x["job_id"], x["state"]) for x in logs if x["event"] == "job finished"]
    assert sorted(ended) == [("long", "cancelled"), ("next", "cancelled")]


async def test_a_runner_that_loses_its_lease_stops(lab: Lab) -> None:
    await lab.submit("stolen", sleep_s=0.3, spec={"iterations": 20})
    await lab.wait_state("stolen", JobState.RUNNING)
    # Another host's reaper decided the lease expired and took the job back.
    await lab.store.expire_leases(now=1e12)
    await asyncio.sleep(0.6)  # two heartbeats: the first runner must have noticed by now
    stopped_at = len(await lab.store.iterations("stolen", attempt=1))
    await asyncio.sleep(0.6)
    assert len(await lab.store.iterations("stolen", attempt=1)) == stopped_at < 21
    job = await lab.store.get_job("stolen")
    assert job is not None and job.attempts == 2  # queued again and leased anew


async def test_shutdown_requeues_unfinished_work_without_counting_the_attempt(lab: Lab) -> None:
    await lab.submit("interrupted", sleep_s=5)
    await lab.wait_state("interrupted", JobState.RUNNING)
    await lab.scheduler.stop(grace=0.1)
    job = await lab.store.get_job("interrupted")
    assert job is not None and job.state is JobState.QUEUED and job.attempts == 0


async def test_a_job_interrupted_by_a_shutdown_runs_again_after_it_and_succeeds(
    store: Store, tmp_path: Path
) -> None:
    """An independent tester's find: the attempt forgiven at shutdown ran again under the
    same number, its first iteration collided with the one stored before, and the job failed
    ("driver bug: UNIQUE constraint failed"), its device blamed."""
    first = await make_lab(store, tmp_path, ["d1"])
    await first.submit("restarted", sleep_s=0.15)
    async with asyncio.timeout(10):
        while True:  # two iterations stored: the shutdown interrupts a run under way
            if len(await store.iterations("restarted", attempt=1)) >= 2:
                break
            await asyncio.sleep(0.02)
    await first.scheduler.stop(grace=0.05)
    await first.pool.stop(1)
    first._recorder.cancel()  # type: ignore[attr-defined]
    assert (await store.get_job("restarted")).state is JobState.QUEUED  # type: ignore[union-attr]
    assert await store.iterations("restarted") == []  # the half-run is not a result
    second = await make_lab(store, tmp_path, ["d1"])
    try:
        job = await second.wait_state("restarted", JobState.SUCCEEDED, JobState.FAILED)
        assert job.state is JobState.SUCCEEDED, job.error
        assert job.attempts == 1
        iterations = await store.iterations("restarted")
        assert [i.index for i in iterations] == [0, 1, 2, 3]
        assert (await store.get_device("d1")).consecutive_failures == 0  # type: ignore[union-attr]
    finally:
        await second.scheduler.stop(1)
        await second.pool.stop(1)
        second._recorder.cancel()  # type: ignore[attr-defined]


async def test_submit_refuses_what_no_device_could_ever_run(lab: Lab) -> None:
    bad = {"suite": "s", "test": "t", "scenario": "script", "device": {"platform": "android"}}
    with pytest.raises(InvalidSpec) as caught:
        await lab.jobs.submit(bad, "m.toml")
    assert caught.value.problems == [
        "m.toml: device: no device in the lab matches platform=android and runs scenario 'script'"
    ]
    with pytest.raises(InvalidSpec) as caught:
        await lab.jobs.submit({**bad, "scenario": "scirpt"}, "m.toml")
    assert caught.value.problems == [
        "m.toml: scenario: unknown scenario 'scirpt' (did you mean 'script'?)"
    ]
    with pytest.raises(InvalidSpec) as caught:
        await lab.jobs.submit({**bad, "params": {"sleep": 1}, "iterations": 0}, "m.toml")
    assert caught.value.problems == [
        "m.toml: iterations: input should be greater than or equal to 1, got 0"
    ]
    await asyncio.sleep(0.05)  # let the recorder drain the bus
    assert [e.kind for e in lab.events].count("job_rejected") == 3


async def test_drained_device_takes_no_new_job(lab: Lab) -> None:
    await lab.pool.set_admin("d1", AdminState.DRAINING)
    await lab.submit("parked")
    await asyncio.sleep(0.3)
    parked = await lab.store.get_job("parked")
    assert parked is not None and parked.state is JobState.QUEUED
    # Said as the administrator left it (a device drained through another host was still
    # "available (next dispatch will take it)").
    assert await lab.jobs.why_waiting(parked) == (
        "waiting for one of 1 matching device(s): d1 maintenance (admin: draining)"
    )
    await lab.pool.set_admin("d1", AdminState.ENABLED)
    await lab.wait_state("parked", JobState.SUCCEEDED)


async def test_hot_plug_devices_appear_and_vanish(lab: Lab) -> None:
    lab.driver.ids.append("d2")
    await lab.pool.discover()
    assert lab.pool.devices["d2"].state is DeviceState.AVAILABLE
    lab.driver.ids.remove("d2")
    await lab.pool.discover()
    assert lab.pool.devices["d2"].state is DeviceState.OFFLINE
    assert lab.pool.devices["d2"].reason == "vanished"


async def test_failing_health_checks_power_cycle_then_quarantine(
    store: Store, tmp_path: Path
) -> None:
    power = RecordingPower()
    lab = await make_lab(
        store, tmp_path, ["d1"], power={"d1": power}, power_cycle_after=2, power_off_s=0
    )
    try:
        lab.driver.unhealthy["d1"] = "adb: device offline"
        for _ in range(3):
            await lab.pool.check_health()
        assert power.calls == ["off", "on"]
        device = lab.pool.devices["d1"]
        assert device.state is DeviceState.QUARANTINED
        assert "power cycle did not help" in device.reason
        assert any(e.kind == "device_power_cycled" for e in lab.events)
    finally:
        await lab.scheduler.stop(1)
        await lab.pool.stop(1)


async def test_a_power_cycle_that_cures_brings_the_device_back(
    store: Store, tmp_path: Path
) -> None:
    lab: Lab
    power = RecordingPower(on_cycle=lambda: lab.driver.unhealthy.clear())
    lab = await make_lab(
        store, tmp_path, ["d1"], power={"d1": power}, power_cycle_after=1, power_off_s=0
    )
    try:
        lab.driver.unhealthy["d1"] = "hung"
        await lab.pool.check_health()
        await lab.pool.check_health()
        assert lab.pool.devices["d1"].state is DeviceState.AVAILABLE
    finally:
        await lab.scheduler.stop(1)
        await lab.pool.stop(1)


async def test_stop_when_stable_ends_a_steady_measurement_early(lab: Lab) -> None:
    await lab.submit("steady", value=100, step=0, spec={"iterations": 50, "stop_when_stable": True})
    await lab.submit(
        "drifting", value=100, step=5, spec={"iterations": 20, "stop_when_stable": True}
    )
    await lab.wait_state("steady", JobState.SUCCEEDED)
    await lab.wait_state("drifting", JobState.SUCCEEDED)
    steady = await lab.store.iterations("steady")
    assert len([i for i in steady if not i.warmup]) == 15  # the minimum: nothing varies
    drifting = await lab.store.iterations("drifting")
    assert len([i for i in drifting if not i.warmup]) == 20  # never stable: runs to the maximum


async def test_a_job_slower_than_its_baseline_raises_an_alert(store: Store, tmp_path: Path) -> None:
    from labd.scheduler import BaselineAnalyst

    lab = await make_lab(store, tmp_path, ["d1"])
    analyst = BaselineAnalyst(store, lab.bus)
    await analyst.start()
    try:
        await lab.submit("base", value=100, step=0)
        await lab.wait_state("base", JobState.SUCCEEDED)
        await lab.submit("slower", value=110, step=0, spec={"baseline": "base"})
        await lab.submit("same", value=100, step=0, spec={"baseline": "base"})
        await lab.wait_state("slower", JobState.SUCCEEDED)
        await lab.wait_state("same", JobState.SUCCEEDED)
        async with asyncio.timeout(10):
            while True:
                if any(e.kind == "change_found" for e in lab.events):
                    break
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        (change,) = [e for e in lab.events if e.kind == "change_found"]
        assert (change.job_id, change.metric, change.verdict) == ("slower", "value", "regression")  # type: ignore[attr-defined]
        assert change.ratio == pytest.approx(1.1)  # type: ignore[attr-defined]
        alerts = [r for r in await store.outbox_pending(1000) if r.stream == "alert"]
        assert [deserialise(a.body) for a in alerts] == [change]
    finally:
        await analyst.stop(1)
        await lab.scheduler.stop(1)
        await lab.pool.stop(1)


async def test_a_job_for_a_device_that_left_times_out_in_the_queue_saying_why(lab: Lab) -> None:
    """A job whose only device vanished waited in the queue for ever (its timeout_s counts
    from its start): it now times out at its queue deadline, naming what it waited for."""
    await lab.pool.set_admin("d1", AdminState.DRAINING)  # leases nothing until it leaves
    await lab.submit("stranded", spec={"queue_timeout_s": 0.5})
    await lab.submit("patient")  # the lab's queue_timeout_s: a day
    lab.driver.ids.remove("d1")
    await lab.pool.discover()
    job = await lab.wait_state("stranded", JobState.TIMED_OUT, within=10)
    assert job.error == (
        "not started within its queue_timeout_s (0.5 s): waiting for one of 1 matching "
        "device(s): d1 offline: vanished (admin: draining)"
    )
    assert job.finished_at is not None and job.started_at is None
    patient = await lab.store.get_job("patient")
    assert patient is not None and patient.state is JobState.QUEUED
    assert (patient.queue_deadline - patient.submitted_at).total_seconds() == 86400  # type: ignore[operator]
    await asyncio.sleep(0.05)
    finished = [e for e in lab.events if e.kind == "job_finished"]
    assert [(e.job_id, e.state) for e in finished] == [("stranded", "timed_out")]  # type: ignore[attr-defined]


async def test_a_job_started_before_its_queue_deadline_is_not_timed_out(lab: Lab) -> None:
    await lab.submit("prompt", spec={"queue_timeout_s": 1}, sleep_s=0.4)  # 1.6 s in all
    await lab.wait_state("prompt", JobState.RUNNING)
    await asyncio.sleep(1.2)  # past the deadline while running; reaped every 0.2 s
    job = await lab.wait_state("prompt", JobState.SUCCEEDED)
    # And the store's guard: a deadline passed while leased is not a queue time-out.
    assert await lab.store.time_out_queued({"prompt": "late"}) == []
    assert job.error == ""


async def test_a_job_requeued_after_it_started_gets_its_queue_time_again(lab: Lab) -> None:
    """The deadline had stayed the submission's: a job taken out by maintenance a day after it
    was submitted timed out at once as "not started" (a retry and a restart alike)."""
    await lab.submit("started", spec={"queue_timeout_s": 1.5}, sleep_s=0.5)  # 2 s of running
    await lab.wait_state("started", JobState.RUNNING)
    await asyncio.sleep(1.6)  # past the submission's deadline, still running
    await lab.pool.set_admin("d1", AdminState.MAINTENANCE)
    await lab.wait_state("started", JobState.QUEUED)
    await asyncio.sleep(0.8)  # the reaper runs every 0.2 s
    job = await lab.store.get_job("started")
    assert job is not None and job.state is JobState.QUEUED, job
    await lab.pool.set_admin("d1", AdminState.ENABLED)
    await lab.wait_state("started", JobState.SUCCEEDED)
    await lab.pool.set_admin("d1", AdminState.MAINTENANCE)
    await lab.submit("waits", spec={"queue_timeout_s": 0.5})  # and a deadline still holds
    await lab.wait_state("waits", JobState.TIMED_OUT)


async def test_a_job_ended_by_its_hosts_restart_says_so_and_has_its_last_line(
    store: Store, tmp_path: Path
) -> None:
    """A scheduling tester's job, out of attempts when its host came back after a SIGKILL,
    ended `lease held by hA expired on attempt 1` (no lease had run out) and no host logged
    its `job finished`."""
    spec = {
        "suite": "s",
        "test": "t",
        "scenario": "script",
        "iterations": 3,
        "warmup": 0,
        "max_attempts": 1,
        "device": {"platform": "scripted"},
    }
    before = await make_lab(store, tmp_path, ["d1"])  # the host as it was: d1 is the lab's
    await before.scheduler.stop(1)
    await before.pool.stop(1)
    before._recorder.cancel()  # type: ignore[attr-defined]
    await before.jobs.submit(spec, "test.toml", job_id="killed", submitter="tests")
    lane = lane_key(DeviceSelector(platform="scripted"), "script")
    lease = await store.claim_job("d1", [lane], "test-host", ttl=60)  # the host that died
    assert lease is not None and await store.mark_running("killed", lease.token)
    with structlog.testing.capture_logs() as logs:
        lab = await make_lab(store, tmp_path, ["d1"])  # the same host, started again
    try:
        job = await store.get_job("killed")
        assert job is not None and job.state is JobState.FAILED
        said = "test-host restarted while it held the job on attempt 1; no attempts left"
        assert job.error == said
        [last] = [x for x in logs if x["event"] == "job finished" and x["job_id"] == "killed"]
        assert (last["state"], last["error"]) == ("failed", job.error)
    finally:
        await lab.scheduler.stop(1)
        await lab.pool.stop(1)
        lab._recorder.cancel()  # type: ignore[attr-defined]
