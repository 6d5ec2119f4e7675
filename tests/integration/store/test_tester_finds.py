"""The store's side of an independent tester's finds, on SQLite and on PostgreSQL alike:
a cancel that came before its runner heard of it, a claim a stopped host never started, and
an outbox no bridge delivers."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from labd.events import JobFinished, JobRequeued, deserialise
from labd.model import DeviceSelector, JobState, TestSpec
from labd.store import Store, lane_key

SPEC = TestSpec(
    suite="s",
    test="t",
    scenario="command",
    params={"command": ["true"]},
    device=DeviceSelector(platform="host"),
)
LANE = lane_key(SPEC.device, "command")
DISCARD_WAIT_S = 0.5


async def outbox_events(store: Store, job_id: str) -> list[object]:
    rows = await store.outbox_pending(1000)
    return [deserialise(row.body) for row in rows if row.key == job_id]


async def test_a_cancel_before_the_start_ends_the_job_cancelled_at_mark_running(
    store: Store,
) -> None:
    await store.submit_job("j", SPEC, "ci")
    lease = await store.claim_job("d1", [LANE], "host-a", 30)
    assert lease is not None
    await store.request_cancel("j")  # its runner had not been registered yet
    assert not await store.mark_running("j", lease.token)
    job = await store.get_job("j")
    assert job is not None and job.state is JobState.CANCELLED and job.started_at is None
    assert job.error == "cancelled before it started"
    finished = [e for e in await outbox_events(store, "j") if isinstance(e, JobFinished)]
    assert [(e.state, e.error) for e in finished] == [("cancelled", job.error)]


async def test_a_cancel_the_runner_missed_ends_the_job_cancelled_not_succeeded(
    store: Store,
) -> None:
    await store.submit_job("j", SPEC, "ci")
    lease = await store.claim_job("d1", [LANE], "host-a", 30)
    assert lease is not None and await store.mark_running("j", lease.token)
    await store.request_cancel("j")  # e.g. through another host, before the next heartbeat
    assert await store.finish_job("j", lease.token, JobState.SUCCEEDED)
    job = await store.get_job("j")
    assert job is not None and job.state is JobState.CANCELLED
    assert job.error == "cancelled while running"
    # Without a cancel, a finish is what the runner says; a stale token still moves nothing.
    await store.submit_job("k", SPEC, "ci")
    other = await store.claim_job("d2", [LANE], "host-a", 30)
    assert other is not None and await store.mark_running("k", other.token)
    assert not await store.finish_job("k", "stolen", JobState.SUCCEEDED)
    assert await store.finish_job("k", other.token, JobState.SUCCEEDED)
    assert (await store.get_job("k")).state is JobState.SUCCEEDED  # type: ignore[union-attr]


async def test_a_restarted_host_requeues_a_claim_it_never_started_without_counting_it(
    store: Store,
) -> None:
    """1 of 400 jobs ended `lease held by hosta expired on attempt 1; no attempts left`: a
    stop that landed between the claim and the run left a lease, counted at the restart."""
    await store.submit_job("claimed", SPEC.model_copy(update={"max_attempts": 1}), "ci")
    await store.submit_job("started", SPEC.model_copy(update={"max_attempts": 2}), "ci")
    claimed = await store.claim_job("d1", [LANE], "host-a", 30)
    started = await store.claim_job("d2", [LANE], "host-a", 30)
    assert claimed is not None and started is not None
    assert claimed.job.id == "claimed" and await store.mark_running("started", started.token)
    moved = {job.id: job for job in await store.expire_leases(owner="host-a")}
    assert moved["claimed"].state is JobState.QUEUED and moved["claimed"].attempts == 0
    assert "ended before the job started" in moved["claimed"].error
    assert moved["started"].state is JobState.QUEUED and moved["started"].attempts == 1
    # No lease ran out: the host came back (a scheduling tester's job read "lease ... expired").
    assert moved["started"].error == "host-a restarted while it held the job; requeued"
    requeued = [e for e in await outbox_events(store, "claimed") if isinstance(e, JobRequeued)]
    assert [(e.attempt, e.attempt_counted) for e in requeued] == [(1, False)]
    again = await store.claim_job("d1", [LANE], "host-a", 30)
    assert again is not None and again.job.id == "claimed" and again.job.attempts == 1


async def test_discarding_the_outbox_takes_only_this_hosts_rows(store: Store) -> None:
    """A host with MQTT disabled empties its own outbox; the rows of a host whose bridge
    delivers them stay."""
    store.host = "quiet"
    await store.submit_job("mine", SPEC, "ci")
    store.host = "loud"
    await store.submit_job("theirs", SPEC, "ci")
    store.host = "quiet"
    assert await store.outbox_depth() == 1
    assert await store.discard_outbox() == 1
    assert await store.outbox_depth() == 0
    store.host = "loud"
    assert [row.key for row in await store.outbox_pending(10)] == ["theirs"]
    count = sa.text("SELECT count(*) FROM outbox")
    assert await store.read(lambda conn: conn.execute(count).scalar()) == 1


async def test_a_host_with_mqtt_disabled_keeps_no_outbox(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `mqtt.enabled = false` nothing delivered the outbox: 3,356 rows after 657 jobs,
    and `labd_outbox_backlog` only grew. The daemon's store now empties it (and leaves it
    to the bridge where MQTT is on)."""
    from labd.daemon.app import StoreComponent
    from labd.events import EventBus

    monkeypatch.setattr(Store, "DISCARD_EVERY_S", 0.1)
    url = store.engine.url.render_as_string(hide_password=False)
    for delivers, left in ((True, 1), (False, 0)):
        component = StoreComponent(url, f"host-{delivers}", EventBus(), print, delivers)
        await component.start()
        try:
            await component.store.submit_job(f"j-{delivers}", SPEC, "ci")
            if not delivers:
                await asyncio.sleep(DISCARD_WAIT_S)
            assert await component.store.outbox_depth() == left
        finally:
            await component.stop(1)
