"""The database's retention (SQLite and PostgreSQL): an ended job's raw iterations go after
`raw_max_age_days` and what every view showed of it stays; whole jobs go after
`jobs_max_age_days`; jobs not yet that old, or not ended, are never touched."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
import sqlalchemy as sa

from labd.errors import UsageError
from labd.metrics import RetentionCollector
from labd.model import Job
from labd.store import (
    RawValuesRemoved,
    Retention,
    Store,
    history_page,
    measured_values,
    results_page,
)
from labd.store.tables import iterations, jobs
from tests.integration.scheduler.test_admin_and_interruptions import until
from tests.integration.store.test_result_pages import stored_job

DAY = 86400.0


async def ended_days_ago(store: Store, job: Job, days: float) -> None:
    finished = store.clock.now() - days * DAY
    update = jobs.update().where(jobs.c.id == job.id).values(finished_at=finished)
    await store.write(lambda conn: conn.execute(update))


async def raw_count(store: Store, job_id: str) -> int:
    query = sa.select(sa.func.count()).where(iterations.c.job_id == job_id)
    return int(await store.read(lambda conn: conn.scalar(query)) or 0)


async def fresh(store: Store, job_id: str) -> Job:
    job = await store.get_job(job_id)
    assert job is not None
    return job


async def test_old_raw_values_go_and_the_summary_and_history_stay(store: Store) -> None:
    old = await stored_job(store, "old", 9, revision="r1")
    recent = await stored_job(store, "recent", 9, revision="r2")
    running = await stored_job(store, "running", 9, state="running")
    await ended_days_ago(store, old, 400)
    await ended_days_ago(store, recent, 300)
    await ended_days_ago(store, running, 400)  # a finish time it cannot have: still untouched
    before = await results_page(store, old)
    history_before = await history_page(store, "pages", "t")

    pruned = await Retention(store, 365, 0).apply()

    assert (pruned.raw_jobs, pruned.iterations, pruned.jobs) == (1, 10, 0)
    assert await raw_count(store, "old") == 0
    assert await raw_count(store, "recent") == 10 and await raw_count(store, "running") == 10
    after = await results_page(store, await fresh(store, "old"))
    assert after["summary"] == before["summary"] and after["set_aside"] == before["set_aside"]
    assert after["iterations"] == [] and after["total"] == 0
    assert after["raw_values_removed"]["iterations"] == 10
    removed_at = datetime.fromisoformat(after["raw_values_removed"]["at"]).timestamp()
    assert abs(removed_at - store.clock.now()) < 60
    assert await history_page(store, "pages", "t") == history_before
    with pytest.raises(
        RawValuesRemoved, match=r"job 'old': its raw values were removed on .*raw_max_age_days"
    ):
        await measured_values(store, await fresh(store, "old"))
    assert isinstance(RawValuesRemoved("x", {"at": "now"}), UsageError)  # the CLI's exit 2
    # A second pass finds nothing left to do.
    assert (await Retention(store, 365, 0).apply()).raw_jobs == 0


async def test_whole_jobs_go_after_their_own_limit(store: Store) -> None:
    gone = await stored_job(store, "gone", 3, revision="r1")
    kept = await stored_job(store, "kept", 3, revision="r2")
    queued = await stored_job(store, "queued", 3, state="queued")
    await ended_days_ago(store, gone, 40)
    await ended_days_ago(store, kept, 20)
    await ended_days_ago(store, queued, 40)

    pruned = await Retention(store, 0, 30).apply()

    assert (pruned.jobs, pruned.raw_jobs) == (1, 0)
    assert await store.get_job("gone") is None and await raw_count(store, "gone") == 0
    assert await store.get_job("kept") is not None and await store.get_job("queued") is not None
    series = (await history_page(store, "pages", "t"))["series"]
    assert [s["builds"] for s in series.values()] == [["r2"]]


async def test_hosts_pruning_at_once_keep_one_digest(store: Store) -> None:
    for n in range(12):
        job = await stored_job(store, f"j{n}", 5, revision=f"r{n}")
        await ended_days_ago(store, job, 500)
    history_before = await history_page(store, "pages", "t")
    passes = await asyncio.gather(*(Retention(store, 365, 0).apply() for _ in range(3)))
    assert sum(p.raw_jobs for p in passes) == 12  # each job's digest written once
    assert sum(p.iterations for p in passes) == 12 * 6
    assert await history_page(store, "pages", "t") == history_before


async def test_a_job_that_cannot_be_summarised_keeps_its_raw_values(store: Store) -> None:
    bad = await stored_job(store, "bad", 3)
    good = await stored_job(store, "good", 3)
    for job in (bad, good):
        await ended_days_ago(store, job, 400)
    broken = (
        iterations.update()
        .where(iterations.c.job_id == "bad", iterations.c.idx == 2)
        .values(record={"not": "an iteration"})
    )
    await store.write(lambda conn: conn.execute(broken))
    retention = Retention(store, 365, 0)
    pruned = await retention.apply()
    assert pruned.raw_jobs == 1 and await raw_count(store, "good") == 0
    assert await raw_count(store, "bad") == 4 and retention.failed == {"bad"}
    assert (await retention.apply()).raw_jobs == 0  # skipped, not retried every pass


async def test_a_pass_ends_when_only_failing_jobs_are_left(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past FAILED_KEPT, failing jobs are no longer skipped: a full chunk of them came back
    the same every time, and the pass never ended."""
    import labd.store.retention

    monkeypatch.setattr(labd.store.retention, "FAILED_KEPT", 0)
    monkeypatch.setattr(labd.store.retention, "CHUNK", 1)
    bad = await stored_job(store, "bad", 3)
    await ended_days_ago(store, bad, 400)
    broken = iterations.update().where(iterations.c.job_id == "bad").values(record={"not": 1})
    await store.write(lambda conn: conn.execute(broken))
    pruned = await asyncio.wait_for(Retention(store, 365, 0).apply(), 30)
    assert pruned.raw_jobs == 0 and await raw_count(store, "bad") == 4


async def test_metrics_count_what_went_and_passes_that_keep_failing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an operator's dashboard and the LabdDatabaseRetentionFailing alert read."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    def scrape() -> dict[str, float]:
        text = generate_latest(registry).decode()
        return {
            sample.name + "".join(f",{k}={v}" for k, v in sorted(sample.labels.items())):
                sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }  # fmt: skip

    for job_id in ("a", "b", "bad"):
        await ended_days_ago(store, await stored_job(store, job_id, 3), 400)
    broken = iterations.update().where(iterations.c.job_id == "bad").values(record={"not": 1})
    await store.write(lambda conn: conn.execute(broken))
    retention = Retention(store, 365, 0)
    registry = CollectorRegistry()
    registry.register(RetentionCollector(lambda: retention.tally))
    assert scrape()["labd_db_retention_last_success_timestamp_seconds"] == 0

    task = asyncio.create_task(retention.for_ever(0.05))
    try:
        await until(lambda: retention.tally.passes_ok >= 2)
        seen = scrape()
        assert seen["labd_db_retention_jobs_total,action=digested"] == 2
        assert seen["labd_db_retention_jobs_total,action=skipped"] == 1  # said once, not per pass
        assert seen["labd_db_retention_iterations_removed_total"] == 2 * 4
        assert seen["labd_db_retention_last_success_timestamp_seconds"] > 0
        assert seen["labd_db_retention_failing_passes"] == 0

        async def unreachable(*args: object) -> list[Job]:
            raise ConnectionError("the database is away")

        monkeypatch.setattr(store, "ended_with_raw_values", unreachable)
        failed_before = retention.tally.passes_failed
        await until(lambda: retention.tally.passes_failed >= failed_before + 3)
        seen = scrape()
        assert seen["labd_db_retention_failing_passes"] >= 3
        assert seen["labd_db_retention_passes_total,result=failed"] >= 3
        monkeypatch.undo()
        await until(lambda: not retention.tally.failing)
        assert scrape()["labd_db_retention_failing_passes"] == 0
    finally:
        task.cancel()
