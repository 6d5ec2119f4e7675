"""Results and histories in pages (SQLite and PostgreSQL): what the API and MQTT answer for a
job of thousands of iterations or a test of thousands of builds, a page at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

import labd.store.results
from labd.daemon.heavy import Busy, HeavyQueries
from labd.model import BuildInfo, Iteration, Job, TestSpec
from labd.redact import MASK
from labd.store import Store, history_page, results_page, results_view, summary_of
from labd.store.tables import jobs

NOW = datetime(2026, 1, 1, tzinfo=UTC)


async def stored_job(
    store: Store,
    job_id: str,
    count: int,
    revision: str = "",
    state: str = "succeeded",
    declared: dict[str, Any] | None = None,
) -> Job:
    spec = TestSpec(
        suite="pages",
        test="t",
        scenario="command",
        params={"command": ["true"], "env": {"TOKEN": "hush"}},
        iterations=count,
        warmup=1,
        build=BuildInfo(revision=revision),
    )
    await store.submit_job(job_id, spec, "ci")
    for index in range(count + 1):
        await store.add_iteration(
            Iteration(
                job_id=job_id,
                attempt=1,
                index=index,
                warmup=index == 0,
                values={"ms": float(index)},
                started_at=NOW,
                finished_at=NOW,
                device_id="d1",
                # What the runner records of the scenario's metrics (labd.metric_specs).
                fingerprint={"model": "m1"} | ({"metrics": declared} if declared else {}),
            ),
            token=None,  # written outside the scheduler: no lease to fence
        )
    update = jobs.update().where(jobs.c.id == job_id).values(attempts=1, state=state)
    await store.write(lambda conn: conn.execute(update))
    job = await store.get_job(job_id)
    assert job is not None
    return job


async def test_results_come_in_pages_with_the_summary_first(store: Store) -> None:
    job = await stored_job(store, "big", 24)  # 25 iterations with the warm-up
    first = await results_page(store, job, 0, 10)
    assert [it["index"] for it in first["iterations"]] == list(range(10))
    assert (first["total"], first["next"]) == (25, 10)
    assert first["summary"]["ms"]["n"] == 24 and first["summary"]["ms"]["median"] == 12.5
    assert first["job"]["spec"]["params"]["env"] == {"TOKEN": MASK}
    last = await results_page(store, job, 20, 10)
    assert [it["index"] for it in last["iterations"]] == list(range(20, 25))
    assert last["next"] is None and "summary" not in last
    assert (await results_page(store, job, 100, 10))["iterations"] == []
    whole = await results_view(store, job)
    assert len(whole["iterations"]) == 25 and whole["next"] is None


async def test_one_summary_is_computed_for_callers_asking_at_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await stored_job(store, "shared", 5)
    computed = []
    real = labd.store.results._summaries
    monkeypatch.setattr(labd.store.results, "_summaries", lambda s: computed.append(1) or real(s))
    answers = await asyncio.gather(*(summary_of(store, job) for _ in range(8)))
    assert len(computed) == 1 and all(a == answers[0] for a in answers)
    await summary_of(store, job)  # finished: kept
    assert len(computed) == 1


async def test_history_comes_in_pages_newest_first(store: Store) -> None:
    for n in range(5):
        await stored_job(store, f"h{n}", 3, revision=f"r{n}")
    await stored_job(store, "failed", 3, revision="rx", state="failed")
    newest = await history_page(store, "pages", "t", limit=2)
    (series,) = newest["series"].values()
    assert series["builds"] == ["r3", "r4"] and series["values"] == [2.0, 2.0]
    assert newest["next"] == "h3"
    older = await history_page(store, "pages", "t", limit=2, before=newest["next"])
    assert next(iter(older["series"].values()))["builds"] == ["r1", "r2"]
    oldest = await history_page(store, "pages", "t", limit=2, before=older["next"])
    assert next(iter(oldest["series"].values()))["builds"] == ["r0"] and oldest["next"] is None


async def test_a_history_series_carries_its_newest_jobs_direction(store: Store) -> None:
    """`labd detect --suite --test` tells regressions from improvements by this."""
    await stored_job(store, "old", 3, revision="r0")
    page = await history_page(store, "pages", "t")
    assert next(iter(page["series"].values()))["higher_is_better"] is False
    await stored_job(store, "new", 3, revision="r1", declared={"ms": {"higher_is_better": True}})
    page = await history_page(store, "pages", "t")
    (series,) = page["series"].values()
    assert series["builds"] == ["r0", "r1"] and series["higher_is_better"] is True


def holding(
    heavy: HeavyQueries, release: asyncio.Event, answered: list[str]
) -> Callable[[str], Awaitable[None]]:
    """A query by `who` that holds its turn until `release`, noting when it got it."""

    async def query(who: str) -> None:
        async with heavy.turn(who):
            answered.append(who)
            await release.wait()

    return query


async def test_heavy_queries_wait_their_turn_and_the_rest_are_told_to_retry() -> None:
    heavy = HeavyQueries(running=1, waiting=1)
    release = asyncio.Event()
    order: list[str] = []
    query = holding(heavy, release, order)
    first = asyncio.create_task(query("first"))
    await asyncio.sleep(0)
    second = asyncio.create_task(query("second"))
    await asyncio.sleep(0)
    with pytest.raises(Busy):
        async with heavy.turn("third"):
            pass
    release.set()
    await asyncio.gather(first, second)
    assert order == ["first", "second"]
    async with heavy.turn("third"):  # free again
        pass


async def test_one_principals_burst_leaves_the_others_their_turns() -> None:
    """A viewer flooding results and history holds at most half the places: the CI still
    gets its answer, and the viewer gets its places back once its queries end."""
    heavy = HeavyQueries(running=2, waiting=4)
    release = asyncio.Event()
    answered: list[str] = []
    query = holding(heavy, release, answered)
    flood = [asyncio.create_task(query("viewer")) for _ in range(heavy.share)]
    await asyncio.sleep(0)
    with pytest.raises(Busy, match="viewer has 3 results, history and artefact queries"):
        async with heavy.turn("viewer"):
            pass
    ci = asyncio.create_task(query("ci"))
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(*flood, ci)
    assert answered.count("viewer") == 3 and "ci" in answered
    async with heavy.turn("viewer"):
        pass


async def test_the_store_reads_pages_without_whole_iterations(store: Store) -> None:
    job = await stored_job(store, "lean", 4)
    flagged = Iteration(
        job_id="lean", attempt=1, index=5, warmup=False, values={"ms": 99.0}, started_at=NOW,
        finished_at=NOW, device_id="d1", flags=["hot"], set_aside=True,
    )  # fmt: skip
    await store.add_iteration(flagged, token=None)
    # Set aside: kept and counted, left out of what verdicts are computed from.
    assert await store.measured_series(job.id, 1) == {"ms": [1.0, 2.0, 3.0, 4.0]}
    assert await store.count_iterations(job.id, 1) == 6
    records, total = await store.iteration_records(job.id, 1, 2)
    assert total == 6 and [r["index"] for r in records] == [1, 2]
