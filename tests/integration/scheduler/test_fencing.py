"""Fencing in the scheduler: a runner whose lease moved on is stopped by the store's refusal,
even before its own heartbeat notices."""

from __future__ import annotations

import asyncio
from pathlib import Path

from labd.model import DeviceState, JobState
from labd.store import Store
from tests.integration.scheduler.test_scheduler import FAST, make_lab


async def test_a_write_under_a_lost_lease_is_refused_and_stops_the_run(
    store: Store, tmp_path: Path
) -> None:
    # A heartbeat slower than the run: only the store's fencing can stop the old runner.
    slow_beat = FAST.model_copy(update={"heartbeat_s": 60, "lease_ttl_s": 120})
    lab = await make_lab(store, tmp_path, ["d1"], settings=slow_beat)
    try:
        await lab.submit("stolen", sleep_s=0.2, spec={"iterations": 20})
        await lab.wait_state("stolen", JobState.RUNNING)
        # Another host's reaper took the job back and another device of it claimed it.
        await lab.store.expire_leases(now=1e12)
        taken = await lab.store.claim_job("elsewhere", list(await lab.store.lanes()), "host-b", 60)
        assert taken is not None and taken.job.attempts == 2
        await asyncio.sleep(1.0)  # several iterations' worth
        first = await lab.store.iterations("stolen", attempt=1)
        assert len(first) <= 2  # at most the one in flight when the lease moved
        job = await lab.store.get_job("stolen")
        assert job is not None and job.lease_owner == "host-b" and job.state is JobState.LEASED
        assert "stolen" not in lab.scheduler.running
        device = lab.pool.devices["d1"]
        assert (device.state, device.consecutive_failures) == (DeviceState.AVAILABLE, 0)
    finally:
        await lab.scheduler.stop(1)
        await lab.pool.stop(1)
