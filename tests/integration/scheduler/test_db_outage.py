"""A host cut off from PostgreSQL mid-job (through a proxy the test cuts): it stops the run by
itself once its lease would have expired, keeps its device's state, and saves it when the
database is back."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from benchmarks.chaos.proxy import Proxy
from labd.model import DeviceState, JobState
from labd.store import Store
from tests.integration.scheduler.test_blame import until
from tests.integration.scheduler.test_scheduler import FAST, make_lab

pytestmark = pytest.mark.parametrize("store", ["postgres"], indirect=True)


async def test_a_host_cut_off_from_the_database_fences_itself_and_recovers(
    store: Store, postgres_url: str, tmp_path: Path
) -> None:
    port = int(postgres_url.rsplit(":", 1)[1].split("/")[0])
    proxy = Proxy("pg", port)
    await proxy.start()
    behind = await Store.open(postgres_url.replace(f":{port}/", f":{proxy.port}/"))
    lab = await make_lab(
        behind, tmp_path, ["d1"], settings=FAST.model_copy(update={"lease_ttl_s": 1.5})
    )
    try:
        # One attempt only: after the outage nothing else touches the device, so what the
        # store says of it is what the host saved.
        await lab.submit("cut", sleep_s=0.2, spec={"iterations": 30, "max_attempts": 1})
        await lab.wait_state("cut", JobState.RUNNING)
        proxy.cut()
        # The host's heartbeats fail; after the lease TTL it stops measuring by itself.
        await until(lambda: "cut" not in lab.scheduler.running, within=15)
        assert lab.pool.devices["d1"].state is DeviceState.AVAILABLE
        stopped = await store.iterations("cut", attempt=1)  # read directly, not through the cut
        proxy.heal()
        job = await lab.wait_state("cut", JobState.FAILED, within=30)
        assert "expired on attempt 1; no attempts left" in job.error
        assert await store.iterations("cut", attempt=1) == stopped  # nothing written late

        async def saved() -> DeviceState:
            return next(d.state for d in await store.list_devices() if d.id == "d1")

        async with asyncio.timeout(10):  # the next discovery pass saves it
            while True:
                if await saved() is DeviceState.AVAILABLE:
                    break
                await asyncio.sleep(0.1)
    finally:
        proxy.heal()
        await lab.scheduler.stop(1)
        await lab.pool.stop(1)
        await behind.close()
        await proxy.stop()
