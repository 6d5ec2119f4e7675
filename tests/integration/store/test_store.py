"""The store's behaviour, on SQLite and on PostgreSQL alike."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from labd.events import (
    IterationDone,
    JobFinished,
    JobLeased,
    JobQueued,
    JobRunning,
    deserialise,
)
from labd.model import Device, DeviceSelector, Iteration, JobState, TestSpec
from labd.model.device import AdminState
from labd.store import JobConflict, Store, StoreError, lane_key
from labd.store.migrations import MIGRATIONS


def spec(priority: int = 0, platform: str = "host", test: str = "t", **kw: object) -> TestSpec:
    return TestSpec(
        suite="s",
        test=test,
        scenario="command",
        params={"command": ["true"]},
        priority=priority,
        device=DeviceSelector(platform=platform),
        **kw,  # type: ignore[arg-type]
    )


LANE = lane_key(DeviceSelector(platform="host"), "command")


async def claim(store: Store, device: str = "d1", ttl: float = 30):  # type: ignore[no-untyped-def]
    return await store.claim_job(device, [LANE], "host-a", ttl)


async def test_submit_is_idempotent_by_client_id(store: Store) -> None:
    job, created = await store.submit_job("j1", spec(), "ci")
    assert created and job.state is JobState.QUEUED and job.attempts == 0
    again, created = await store.submit_job("j1", spec(), "ci")
    assert not created and again.id == "j1"
    with pytest.raises(JobConflict, match="different spec"):
        await store.submit_job("j1", spec(priority=5), "ci")


async def test_claims_follow_priority_then_fifo(store: Store) -> None:
    for job_id, prio in [("low", 0), ("high", 10), ("low2", 0), ("mid", 5)]:
        await store.submit_job(job_id, spec(prio), "ci")
    order = []
    for n in range(4):
        lease = await claim(store, f"d{n}")
        assert lease is not None
        order.append(lease.job.id)
    assert order == ["high", "mid", "low", "low2"]
    assert await claim(store, "d9") is None


async def test_a_small_submitter_is_not_starved_by_a_big_batch(store: Store) -> None:
    for n in range(6):
        await store.submit_job(f"big{n}", spec(), "batch")
    await store.submit_job("small0", spec(), "alice")
    await store.submit_job("small1", spec(), "alice")
    order = []
    for n in range(4):
        lease = await claim(store, f"d{n}")
        assert lease is not None
        order.append(lease.job.id)
    assert order == ["big0", "small0", "big1", "small1"]


async def test_the_queue_is_listed_in_the_order_leases_take_it(store: Store) -> None:
    """The console's Queue page answers "what runs next": it listed by submission, and a
    priority-100 job submitted last was not on the page at all."""
    for n in range(6):
        await store.submit_job(f"big{n}", spec(n % 3), "batch")
    await store.submit_job("small", spec(1), "alice")
    await store.submit_job("urgent", spec(100), "alice")
    listed, queued = await store.queued_in_run_order(3)
    assert queued == 8 and len(listed) == 3
    listed, _ = await store.queued_in_run_order(100)
    taken = []
    while lease := await claim(store, f"d{len(taken)}"):
        taken.append(lease.job.id)
    assert [job.id for job in listed] == taken
    # small's turn comes before batch's second job of the same priority
    assert taken[:6] == ["urgent", "big2", "big5", "big1", "small", "big4"]


async def test_only_matching_lanes_are_claimed(store: Store) -> None:
    await store.submit_job("android", spec(platform="android"), "ci")
    assert await claim(store) is None
    lanes = await store.lanes()
    assert {lane.selector.platform for lane in lanes.values()} == {"android"}


async def test_one_active_job_per_device_is_enforced_by_the_database(store: Store) -> None:
    await store.submit_job("a", spec(), "ci")
    await store.submit_job("b", spec(), "ci")
    assert await claim(store, "d1") is not None
    with pytest.raises(Exception, match=r"(?i)unique|constraint"):
        await claim(store, "d1")


async def test_lease_lifecycle_and_lost_lease(store: Store) -> None:
    await store.submit_job("j", spec(), "ci")
    lease = await claim(store)
    assert lease is not None and lease.job.attempts == 1
    assert await store.mark_running("j", lease.token)
    assert await store.heartbeat("j", lease.token, 30) == (True, False)
    assert not await store.finish_job("j", "stolen-token", JobState.SUCCEEDED)
    assert await store.finish_job("j", lease.token, JobState.SUCCEEDED)
    job = await store.get_job("j")
    assert job is not None and job.state is JobState.SUCCEEDED and job.device_id == "d1"
    assert await store.heartbeat("j", lease.token, 30) == (False, False)


async def test_expired_lease_is_requeued_then_failed_when_attempts_run_out(store: Store) -> None:
    await store.submit_job("j", spec(max_attempts=2), "ci")
    for attempt in (1, 2):
        lease = await claim(store, ttl=0.01)
        assert lease is not None and lease.job.attempts == attempt
        await asyncio.sleep(0.05)
        (moved,) = await store.expire_leases()
        assert moved.state is (JobState.QUEUED if attempt == 1 else JobState.FAILED)
    job = await store.get_job("j")
    assert job is not None and "no attempts left" in job.error


async def test_cancel_queued_at_once_and_active_by_flag(store: Store) -> None:
    await store.submit_job("q", spec(), "ci")
    await store.submit_job("r", spec(priority=1), "ci")
    lease = await claim(store)
    assert lease is not None and lease.job.id == "r"
    queued = await store.request_cancel("q")
    assert queued is not None and queued.state is JobState.CANCELLED
    active = await store.request_cancel("r")
    assert active is not None and active.state is JobState.LEASED and active.cancel_requested
    assert await store.heartbeat("r", lease.token, 30) == (True, True)
    assert await store.request_cancel("nope") is None


async def test_retry_backoff_delays_the_next_claim(store: Store) -> None:
    await store.submit_job("j", spec(), "ci")
    lease = await claim(store)
    assert lease is not None
    assert await store.requeue_job("j", lease.token, "device lost", delay=0.3)
    assert await claim(store) is None
    await asyncio.sleep(0.35)
    again = await claim(store)
    assert again is not None and again.job.attempts == 2 and again.job.error == "device lost"
    # Once the next attempt runs, the last one's error no longer says where the job stands.
    assert await store.mark_running("j", again.token)
    running = await store.get_job("j")
    assert running is not None and running.state is JobState.RUNNING and running.error == ""


async def test_iterations_are_kept_raw_per_attempt(store: Store) -> None:
    await store.submit_job("j", spec(), "ci")
    now = datetime.now(UTC)
    for attempt, idx in [(1, 0), (2, 0), (2, 1)]:
        await store.add_iteration(
            Iteration(
                job_id="j",
                attempt=attempt,
                index=idx,
                warmup=idx == 0,
                values={"wall_time_ms": 10.0 + idx},
                started_at=now,
                finished_at=now,
                device_id="d1",
                fingerprint={"cpu": 1},
            ),
            None,
        )
    assert [i.values["wall_time_ms"] for i in await store.iterations("j", attempt=2)] == [10, 11]
    assert len(await store.iterations("j")) == 3


async def test_device_admin_state_survives_rediscovery(store: Store) -> None:
    device = Device(id="pixel-1", driver="android", platform="android", host="h")
    await store.upsert_device(device)
    await store.set_admin("pixel-1", AdminState.MAINTENANCE)
    seen_again = await store.upsert_device(device)
    assert seen_again.admin is AdminState.MAINTENANCE
    assert [d.id for d in await store.list_devices(host="h")] == ["pixel-1"]


async def test_ping_reports_a_dead_database(tmp_path: object) -> None:
    store = await Store.open("sqlite+aiosqlite:///:memory:")
    assert await store.ping() is None
    await store.close()
    assert time.time() > 0


async def test_migration_v2_adds_history_columns_to_a_v1_database(store: Store) -> None:
    """A store made before v2 gains jobs.suite/test, backfilled from the stored specs."""
    import sqlalchemy as sa

    await store.submit_job("old", spec(test="legacy"), "ci")
    async with store.engine.begin() as conn:  # turn the database back into a v1 one
        await conn.execute(sa.text("DROP INDEX ix_jobs_history"))
        for column in ("suite", "test"):
            await conn.execute(sa.text(f"ALTER TABLE jobs DROP COLUMN {column}"))
        await conn.execute(sa.text("DELETE FROM schema_migrations WHERE version = 2"))
    url = store.engine.url.render_as_string(hide_password=False)
    reopened = await Store.open(url)
    try:
        lease = await reopened.claim_job("d1", [LANE], "h", 30)
        assert lease is not None
        await reopened.mark_running("old", lease.token)
        await reopened.finish_job("old", lease.token, JobState.SUCCEEDED)
        assert [j.id for j in await reopened.finished_jobs("s", "legacy")] == ["old"]
    finally:
        await reopened.close()


async def test_migration_v7_gives_new_jobs_a_queue_deadline_and_old_ones_none(
    store: Store,
) -> None:
    """Jobs queued before v7 were promised no queue deadline: they keep none."""
    import sqlalchemy as sa

    await store.submit_job("old", spec(), "ci", now=1000.0)
    async with store.engine.begin() as conn:  # turn the database back into a v6 one
        await conn.execute(sa.text("DROP INDEX ix_jobs_queue_deadline"))
        await conn.execute(sa.text("ALTER TABLE jobs DROP COLUMN queue_deadline"))
        await conn.execute(sa.text("DELETE FROM schema_migrations WHERE version = 7"))
    reopened = await Store.open(store.engine.url.render_as_string(hide_password=False))
    try:
        await reopened.submit_job("new", spec(), "ci", now=1000.0, queue_timeout_s=60)
        assert [j.id for j in await reopened.overdue_jobs(now=1061.0)] == ["new"]
        old = await reopened.get_job("old")
        assert old is not None and old.queue_deadline is None
    finally:
        await reopened.close()


async def test_a_database_a_newer_labd_migrated_is_refused_naming_both_versions(
    store: Store,
) -> None:
    """A rollback ran on a newer schema without a word (an operations tester)."""
    import sqlalchemy as sa

    async with store.engine.begin() as conn:
        await conn.execute(
            sa.text("INSERT INTO schema_migrations (version, applied_at) VALUES (99, 0)")
        )
    with pytest.raises(StoreError) as caught:
        await Store.open(store.engine.url.render_as_string(hide_password=False))
    known = max(version for version, _, _ in MIGRATIONS)
    assert str(caught.value).endswith(
        f"its schema has version 99, newer than this labd knows (up to {known}): run the labd "
        "that migrated it (or newer; `labd version` says the schema each knows), or put back "
        "the copy taken before the upgrade (SQLite: the one labd made beside the database, "
        f"ending .schema-{known}.bak)"
    )


async def test_a_version_no_labd_made_is_not_called_newer(store: Store) -> None:
    import sqlalchemy as sa

    async with store.engine.begin() as conn:
        await conn.execute(
            sa.text("INSERT INTO schema_migrations (version, applied_at) VALUES (-5, 0)")
        )
    with pytest.raises(StoreError, match="holds version -5, which no labd made"):
        await Store.open(store.engine.url.render_as_string(hide_password=False))


async def test_every_job_change_queues_one_numbered_event_in_its_transaction(
    store: Store,
) -> None:
    store.host = "host-a"
    await store.submit_job("j", spec(), "ci")
    lease = await claim(store)
    assert lease is not None
    await store.mark_running("j", lease.token)
    now = datetime.now(UTC)
    await store.add_iteration(
        Iteration(
            job_id="j",
            attempt=1,
            index=0,
            warmup=False,
            values={"v": 1.0},
            started_at=now,
            finished_at=now,
            device_id="d1",
            flags=["timed out after 1 s (the run was killed)"],
            set_aside=True,
        ),
        lease.token,
    )
    assert not await store.finish_job("j", "wrong-token", JobState.SUCCEEDED)  # no event
    await store.finish_job("j", lease.token, JobState.SUCCEEDED)
    rows = await store.outbox_pending()
    events = [deserialise(r.body) for r in rows]
    assert [(r.seq, type(e)) for r, e in zip(rows, events, strict=True)] == [
        (1, JobQueued),
        (2, JobLeased),
        (3, JobRunning),
        (4, IterationDone),
        (5, JobFinished),
    ]
    assert isinstance(events[4], JobFinished) and events[4].state == "succeeded"
    assert len({e.event_id for e in events}) == 5
    assert isinstance(events[3], IterationDone) and events[3].values == {"v": 1.0}
    assert events[3].set_aside  # counted apart in labd_iterations_total (it was "ok")
    assert await store.outbox_newest() == {"j": 5}  # a backlog's retained state comes from it
    store.host = "host-b"
    assert await store.outbox_pending() == []  # each host delivers its own rows
    assert await store.outbox_newest() == {}
    store.host = "host-a"
    await store.outbox_done([r.id for r in rows[:2]])
    assert [r.seq for r in await store.outbox_pending()] == [3, 4, 5]
    assert await store.outbox_depth() == 3
    # Rows delivered but not yet forgotten are skipped by the drain.
    assert [r.seq for r in await store.outbox_pending(skip={rows[3].id})] == [3, 5]


async def test_reads_do_not_wait_for_a_writer(store: Store) -> None:
    """A long write transaction (a lease sweep, a big result) must not hold up the queries
    that answer CI and the scheduler: on SQLite reads begin without the write lock."""
    await store.submit_job("held", spec(), "ci")
    async with store.engine.begin() as conn:  # a writer holds its transaction open
        await conn.execute(sa.text("UPDATE jobs SET priority = priority WHERE id = 'held'"))
        async with asyncio.timeout(2):  # SQLite's busy timeout would be 30 s
            job = await store.get_job("held")
            queued = await store.list_jobs([JobState.QUEUED])
    assert job is not None and [j.id for j in queued] == ["held"]


async def test_an_older_database_moves_waiting_jobs_to_their_scenario_lane(
    store: Store,
) -> None:
    """A job queued before lanes knew scenarios is dispatched in its scenario's lane."""

    from labd.store.tables import jobs, lanes, schema_migrations

    await store.submit_job("old", spec(), "ci")
    old_lane = "0" * 32  # as a version-4 database had it: the selector alone

    def downgrade(conn: sa.Connection) -> None:
        conn.execute(lanes.insert().values(key=old_lane, selector={}, scenario=""))
        conn.execute(jobs.update().values(lane=old_lane))
        conn.execute(schema_migrations.delete().where(schema_migrations.c.version == 5))

    await store.write(downgrade)
    from labd.store.migrations import migrate

    assert await store.write(migrate) == [5]
    lease = await claim(store, "d1")
    assert lease is not None and lease.job.id == "old"


async def test_an_iteration_written_under_a_lease_that_moved_on_is_refused(
    store: Store,
) -> None:
    """Fencing: the late host's values never reach the results, nor its events the outbox."""
    from labd.store import LeaseLost

    await store.submit_job("j", spec(), "ci")
    first = await claim(store, "d1")
    assert first is not None
    await store.mark_running("j", first.token)
    await store.expire_leases(now=1e12)  # the host froze; its lease ran out and was reaped
    second = await claim(store, "d2")
    assert second is not None and second.token != first.token

    def iteration(attempt: int) -> Iteration:
        now = datetime.now(UTC)
        return Iteration(
            job_id="j", attempt=attempt, index=0, warmup=False, values={"v": 1.0},
            started_at=now, finished_at=now, device_id="d1",
        )  # fmt: skip

    with pytest.raises(LeaseLost, match="moved on"):
        await store.add_iteration(iteration(1), first.token)
    await store.add_iteration(iteration(2), second.token)
    assert [i.attempt for i in await store.iterations("j")] == [2]
    kinds = [r.body["event"] for r in await store.outbox_pending()]
    assert kinds.count("iteration_done") == 1
    held, _ = await store.heartbeat("j", first.token, 30)
    assert not held
