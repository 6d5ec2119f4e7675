"""An independent tester's finds in the scheduler and the pool, in-process on the real store
(SQLite and PostgreSQL): an administrator's change made through another host, a stop or a
cancel that lands between a claim and its run, and maintenance that takes a device out at
once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labd.config import PoolSettings
from labd.events import EventBus
from labd.model import AdminState, DeviceState, JobState
from labd.pool import Pool
from labd.store import Store
from tests.integration.scheduler.test_scheduler import FAST, Lab, make_lab
from tests.scripted_driver import ScriptedDriver

# A heartbeat slower than the jobs: only what the fixes do can stop them.
SLOW_BEAT = FAST.model_copy(update={"heartbeat_s": 60, "lease_ttl_s": 120})


async def until(condition: Callable[[], bool], within: float = 10) -> None:
    async with asyncio.timeout(within):
        while True:
            if condition():
                return
            await asyncio.sleep(0.02)


async def stop(lab: Lab) -> None:
    await lab.scheduler.stop(1)
    await lab.pool.stop(1)
    lab._recorder.cancel()  # type: ignore[attr-defined]


async def other_host(store: Store) -> Pool:
    """The pool of a second host of the lab on the same database (its own device e1)."""
    driver = ScriptedDriver(["e1"], host="other-host")
    settings = PoolSettings(discovery_interval_s=60, health_interval_s=60)
    pool = Pool({"scripted": driver}, {}, store, EventBus(), settings, "other-host")
    await pool.start()
    return pool


async def test_drain_maintenance_and_enable_through_another_host_reach_the_owner(
    store: Store, tmp_path: Path
) -> None:
    """`labd --config p1.toml devices drain sim-p2-0` changed only the database: p2 kept
    giving the device jobs, and it never reached maintenance."""
    lab = await make_lab(store, tmp_path, ["d1"], settings=SLOW_BEAT)
    other = await other_host(store)
    try:
        await lab.submit("long", sleep_s=0.3, spec={"iterations": 3})
        await lab.wait_state("long", JobState.RUNNING)
        stored = await other.set_admin("d1", AdminState.DRAINING)
        assert stored is not None and stored.admin is AdminState.DRAINING
        await until(lambda: lab.pool.devices["d1"].admin is AdminState.DRAINING)
        await lab.submit("parked")
        assert (await lab.wait_state("long", JobState.SUCCEEDED)).attempts == 1  # drain: after
        await until(lambda: lab.pool.devices["d1"].state is DeviceState.MAINTENANCE)
        await asyncio.sleep(0.3)
        assert (await store.get_job("parked")).state is JobState.QUEUED  # type: ignore[union-attr]
        await other.set_admin("d1", AdminState.MAINTENANCE)
        await until(lambda: lab.pool.devices["d1"].admin is AdminState.MAINTENANCE)
        assert (await store.get_device("d1")).state is DeviceState.MAINTENANCE  # type: ignore[union-attr]
        await other.set_admin("d1", AdminState.ENABLED)
        await lab.wait_state("parked", JobState.SUCCEEDED)
        assert lab.pool.devices["d1"].admin is AdminState.ENABLED
    finally:
        await other.stop(1)
        await stop(lab)


async def test_enable_through_another_host_lifts_a_quarantine(store: Store, tmp_path: Path) -> None:
    lab = await make_lab(store, tmp_path, ["d1"], quarantine_after=1)
    other = await other_host(store)
    try:
        await lab.submit("breaks", infra_failures=9, spec={"max_attempts": 1})
        await lab.wait_state("breaks", JobState.FAILED)
        await until(lambda: lab.pool.devices["d1"].state is DeviceState.QUARANTINED)
        await other.set_admin("d1", AdminState.ENABLED)
        await until(lambda: lab.pool.devices["d1"].state is DeviceState.AVAILABLE)
        assert lab.pool.devices["d1"].consecutive_failures == 0
        await lab.submit("after")
        await lab.wait_state("after", JobState.SUCCEEDED)
    finally:
        await other.stop(1)
        await stop(lab)


def slow_claims(store: Store, after_claim: Callable[[str], Any]) -> None:
    """Make each claim do `after_claim(job_id)` once it committed, before it returns."""
    claim = store.claim_job

    async def claim_then(*args: Any, **kwargs: Any) -> Any:
        lease = await claim(*args, **kwargs)
        if lease is not None:
            await after_claim(lease.job.id)
        return lease

    store.claim_job = claim_then  # type: ignore[method-assign]


async def test_a_stop_that_lands_mid_claim_requeues_the_job_uncounted(
    store: Store, tmp_path: Path
) -> None:
    """1 of 400 jobs ended `lease held by hosta expired on attempt 1; no attempts left` with
    no iteration: the stop cancelled the dispatch between the claim's commit and the run."""
    claimed = asyncio.Event()

    async def linger(job_id: str) -> None:
        claimed.set()
        await asyncio.sleep(0.5)  # the stop lands here

    lab = await make_lab(store, tmp_path, ["d1"])
    slow_claims(store, linger)
    try:
        await lab.submit("caught", sleep_s=1, spec={"max_attempts": 1})
        await asyncio.wait_for(claimed.wait(), 10)
        await lab.scheduler.stop(grace=0.1)
        job = await store.get_job("caught")
        assert job is not None and (job.state, job.attempts) == (JobState.QUEUED, 0), job
    finally:
        await lab.pool.stop(1)
        lab._recorder.cancel()  # type: ignore[attr-defined]


async def test_a_cancel_while_the_claim_commits_ends_the_job_cancelled(
    store: Store, tmp_path: Path
) -> None:
    """A cancel 0-20 ms after submit answered `leased, cancel_requested` and the job then
    ran to `succeeded`: its runner was not registered yet, and nothing read the flag."""

    async def cancel_now(job_id: str) -> None:
        await lab.scheduler.cancel(job_id)

    lab = await make_lab(store, tmp_path, ["d1"], settings=SLOW_BEAT)
    slow_claims(store, cancel_now)
    try:
        await lab.submit("early", sleep_s=0.1)
        job = await lab.wait_state("early", *[s for s in JobState if s.terminal])
        assert (job.state, job.error) == (JobState.CANCELLED, "cancelled before it started")
        assert await store.iterations("early") == []
        await until(lambda: lab.pool.devices["d1"].state is DeviceState.AVAILABLE)
        assert lab.pool.devices["d1"].consecutive_failures == 0
    finally:
        await stop(lab)


async def test_a_cancel_while_the_device_is_being_acquired_ends_the_job_cancelled(
    store: Store, tmp_path: Path
) -> None:
    lab = await make_lab(store, tmp_path, ["d1"], settings=SLOW_BEAT)
    acquire = lab.pool.acquire
    acquiring = asyncio.Event()

    async def slow_acquire(device_id: str, job_id: str) -> None:
        acquiring.set()
        await asyncio.sleep(0.3)  # the cancel lands here
        await acquire(device_id, job_id)

    lab.pool.acquire = slow_acquire  # type: ignore[method-assign]
    try:
        await lab.submit("early", sleep_s=0.1)
        await asyncio.wait_for(acquiring.wait(), 10)
        answer = await lab.scheduler.cancel("early")
        assert answer is not None and answer.cancel_requested
        job = await lab.wait_state("early", *[s for s in JobState if s.terminal])
        assert job.state is JobState.CANCELLED, job
        assert await store.iterations("early") == []
    finally:
        await stop(lab)


async def test_maintenance_takes_the_device_out_at_once_and_blames_nothing(
    store: Store, tmp_path: Path
) -> None:
    lab = await make_lab(store, tmp_path, ["d1"], settings=SLOW_BEAT)
    try:
        await lab.submit("interrupted", sleep_s=0.3, spec={"iterations": 30, "max_attempts": 1})
        await lab.wait_state("interrupted", JobState.RUNNING)
        await lab.pool.set_admin("d1", AdminState.MAINTENANCE)
        job = await lab.wait_state("interrupted", JobState.QUEUED, within=5)
        assert job.attempts == 0 and "taken into maintenance" in job.error
        await until(lambda: lab.pool.devices["d1"].state is DeviceState.MAINTENANCE)
        assert lab.pool.devices["d1"].consecutive_failures == 0
        assert await store.iterations("interrupted") == []  # a half-run is no result
        await asyncio.sleep(0.3)
        assert (await store.get_job("interrupted")).state is JobState.QUEUED  # type: ignore[union-attr]
    finally:
        await stop(lab)
