"""Hosts sharing a PostgreSQL queue keep leases and deadlines by the database's clock, so one
whose clock runs ahead cannot take the others' work early."""

from __future__ import annotations

import asyncio
import time

from structlog.testing import capture_logs

from labd.model import JobState
from labd.store import Store
from tests.integration.store.test_store import LANE, spec

SPEC = spec()


def ahead(seconds: float):  # type: ignore[no-untyped-def]
    return lambda: time.time() + seconds


async def test_a_host_whose_clock_runs_ahead_leaves_other_hosts_leases_alone(
    postgres_url: str,
) -> None:
    a = await Store.open(postgres_url, host="a")
    with capture_logs() as logs:
        fast = await Store.open(postgres_url, host="fast", local_time=ahead(120))
    try:
        assert abs(fast.clock.offset + 120) < 1 and abs(a.clock.offset) < 1
        assert any("clock differs from the database's" in e["event"] for e in logs)
        await fast.submit_job("j", SPEC.model_copy(update={"queue_timeout_s": 60}), "ci")
        lease = await a.claim_job("d1", [LANE], "a", ttl=30)
        assert lease is not None
        # By its own clock the fast host is two minutes past the lease's end; by the lab's it
        # is not, so the lease stands, and the job submitted there is not overdue either.
        assert await fast.expire_leases() == []
        assert await fast.overdue_jobs() == []
        held = await a.get_job("j")
        assert held is not None and held.state is JobState.LEASED and held.lease_owner == "a"
        # A lease that really ends is still taken back by the fast host.
        await a.heartbeat("j", lease.token, ttl=0.2)
        await asyncio.sleep(0.4)
        [requeued] = await fast.expire_leases()
        assert requeued.state is JobState.QUEUED and "lease held by a expired" in requeued.error
    finally:
        await a.close()
        await fast.close()


async def test_a_host_on_time_is_not_warned(postgres_url: str) -> None:
    with capture_logs() as logs:
        store = await Store.open(postgres_url, host="a")
    await store.close()
    assert not [e for e in logs if "clock" in e["event"]]
