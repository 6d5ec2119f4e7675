"""After a job: compare it with its baseline and raise an alert for each metric that changed.

A spec's `baseline` names a job id, or a revision whose latest succeeded run of the same test
is the baseline. Each regression or improvement becomes a ChangeFound event and an outbox row
(delivered on <prefix>/alerts). The statistics run in a worker thread, off the event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from labd.events import ChangeFound, EventBus, JobFinished, dispatch
from labd.metric_specs import directions_of
from labd.model import Job, JobState
from labd.store import RawValuesRemoved, Store, measured_values
from labd.tasks import TaskSet

log = structlog.get_logger("labd.alerts")


class BaselineAnalyst:
    name = "analysis"

    def __init__(self, store: Store, bus: EventBus) -> None:
        self.store, self.bus = store, bus
        self._finished = bus.subscribe("analysis", JobFinished)
        self._tasks = TaskSet("analysis")

    async def start(self) -> None:
        self._tasks.supervise(
            "finished", lambda: dispatch(self._finished, self._on_finished), self.bus
        )

    async def stop(self, grace: float) -> None:
        self.bus.unsubscribe(self._finished)
        await self._tasks.cancel_all(grace)

    async def _on_finished(self, event: Any) -> None:
        assert isinstance(event, JobFinished)
        if event.state != JobState.SUCCEEDED.value:
            return
        job = await self.store.get_job(event.job_id)
        if job is not None and job.spec.ab is not None:
            await self._publish(await self.compare_variants(job))
            return
        if job is None or not job.spec.baseline:
            return
        baseline = await self.baseline_of(job)
        if baseline is None:
            log.warning("baseline not found", job_id=job.id, baseline=job.spec.baseline)
            return
        try:
            changes = await self.compare(baseline, job)
        except RawValuesRemoved as e:  # a baseline older than store.raw_max_age_days
            log.warning("baseline has no raw values", job_id=job.id, reason=str(e))
            return
        await self._publish(changes)

    async def _publish(self, changes: list[ChangeFound]) -> None:
        for change in changes:
            await self.store.record_event("alert", change.job_id, change)  # and publishes it
            log.info(
                "change found", job_id=change.job_id, metric=change.metric, verdict=change.verdict
            )

    async def compare_variants(self, job: Job) -> list[ChangeFound]:
        """An A/B job's own verdict: new against base, from its interleaved iterations (the
        alert names the job as its own baseline)."""
        from labd.store import compare_variants

        iterations = await self.store.iterations(job.id, attempt=job.attempts)
        results = await asyncio.to_thread(compare_variants, job, iterations)
        return [_change(job, job.id, r) for r in results if r.verdict in CHANGES]

    async def baseline_of(self, job: Job) -> Job | None:
        named = await self.store.get_job(job.spec.baseline)
        if named is not None and named.state is JobState.SUCCEEDED:
            return named
        runs = await self.store.finished_jobs(job.spec.suite, job.spec.test)
        same = [j for j in runs if j.spec.build.revision == job.spec.baseline and j.id != job.id]
        return same[-1] if same else None

    async def compare(self, baseline: Job, job: Job) -> list[ChangeFound]:
        base, _ = await measured_values(self.store, baseline)
        new, specs = await measured_values(self.store, job)
        directions = directions_of(specs)
        samples = {
            name: (base[name], new[name], directions.get(name, False))
            for name in sorted(base.keys() & new.keys())
        }
        results = await asyncio.to_thread(_compare, samples)
        return [_change(job, baseline.id, r) for r in results if r.verdict in CHANGES]


CHANGES = ("regression", "improvement")


def _compare(samples: dict[str, tuple[list[float], list[float], bool]]) -> list[Any]:
    from labd.stats import compare  # SciPy's first import (seconds under load) off the loop

    return compare(samples)


def _change(job: Job, baseline_id: str, r: Any) -> ChangeFound:
    return ChangeFound(
        job_id=job.id,
        baseline_job_id=baseline_id,
        suite=job.spec.suite,
        test=job.spec.test,
        metric=r.metric,
        verdict=r.verdict,
        ratio=r.ratio,
        ratio_ci_low=r.ratio_ci_low,
        ratio_ci_high=r.ratio_ci_high,
        method=r.method,
    )
