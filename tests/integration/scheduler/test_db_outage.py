"""A host cut off from PostgreSQL mid-job (through a proxy the test cuts): it stops the run by
itself once its lease would have expired, keeps its device's state, and saves it when the
database is back."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
import structlog

from benchmarks.chaos.proxy import Proxy
from labd.model import DeviceState, JobState
from labd.store import Store
from tests.integration.scheduler.test_blame import until
from tests.integration.scheduler.test_scheduler import FAST, make_lab

pytestmark = pytest.mark.parametrize("store", ["postgres"], indirect=True)


@contextlib.asynccontextmanager
async def behind_a_proxy(postgres_url: str, tmp_path: Path, lease_ttl_s: float) -> Any:
    """A lab of one device whose store reaches PostgreSQL through a proxy the test can cut."""
    port = int(postgres_url.rsplit(":", 1)[1].split("/")[0])
    proxy = Proxy("pg", port)
    await proxy.start()
    behind = await Store.open(postgres_url.replace(f":{port}/", f":{proxy.port}/"))
    settings = FAST.model_copy(update={"lease_ttl_s": lease_ttl_s})
    lab = await make_lab(behind, tmp_path, ["d1"], settings=settings)
    try:
        yield lab, proxy
    finally:
        proxy.heal()
        await lab.scheduler.stop(1)
        await lab.pool.stop(1)
        await behind.close()
        await proxy.stop()


async def test_a_host_cut_off_from_the_database_fences_itself_and_recovers(
    store: Store, postgres_url: str, tmp_path: Path
) -> None:
    async with behind_a_proxy(postgres_url, tmp_path, 1.5) as (lab, proxy):
        # One attempt only: after the outage nothing else touches the device, so what the
        # store says of it is what the host saved.
        await lab.submit("cut", sleep_s=0.2, spec={"iterations": 30, "max_attempts": 1})
        await lab.wait_state("cut", JobState.RUNNING)
        with structlog.testing.capture_logs() as logs:
            proxy.cut()
            # The host's heartbeats fail; after the lease TTL it stops measuring by itself.
            await until(lambda: "cut" not in lab.scheduler.running, within=15)
        # Said as it is: no other host took the job (it used to say one had).
        said = " ".join(e["event"] for e in logs)
        assert "the database did not answer for the lease's whole TTL" in said
        assert "another host owns the job now" not in said
        assert lab.pool.devices["d1"].state is DeviceState.AVAILABLE
        stopped = await store.iterations("cut", attempt=1)  # read directly, not through the cut
        proxy.heal()
        job = await lab.wait_state("cut", JobState.FAILED, within=30)
        assert job.error.startswith("lease held by test-host expired (database unreachable on")
        assert job.error.endswith("on attempt 1; no attempts left")
        assert await store.iterations("cut", attempt=1) == stopped  # nothing written late

        async def saved() -> DeviceState:
            return next(d.state for d in await store.list_devices() if d.id == "d1")

        async with asyncio.timeout(10):  # the next discovery pass saves it
            while True:
                if await saved() is DeviceState.AVAILABLE:
                    break
                await asyncio.sleep(0.1)


async def test_a_database_blip_shorter_than_the_lease_costs_the_job_nothing(
    store: Store, postgres_url: str, tmp_path: Path
) -> None:
    """A tester restarted PostgreSQL for a second mid-job: the iteration being stored failed
    the attempt ("driver bug: Connect call failed"), and three such restarts failed the job.
    The run now waits for the database, within its lease."""
    async with behind_a_proxy(postgres_url, tmp_path, 6) as (lab, proxy):
        await lab.submit("blip", sleep_s=0.1, spec={"iterations": 30, "max_attempts": 1})
        await lab.wait_state("blip", JobState.RUNNING)
        await until(lambda: any(type(e).__name__ == "IterationDone" for e in lab.events))
        for _ in range(2):  # two blips of 1.5 s, each across several iterations
            proxy.cut()
            await asyncio.sleep(1.5)
            proxy.heal()
            await asyncio.sleep(1.0)
        job = await lab.wait_state("blip", JobState.SUCCEEDED, JobState.FAILED, within=60)
        assert (job.state, job.attempts, job.error) == (JobState.SUCCEEDED, 1, "")
        stored = await store.iterations("blip", attempt=1)
        assert [it.index for it in stored] == list(range(31))  # the warm-up and 30, each once
        assert lab.pool.devices["d1"].consecutive_failures == 0
