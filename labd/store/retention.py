"""The daemon's database retention: every `retention_interval_s`, ended jobs past
`raw_max_age_days` lose their raw iterations (their digest stays: results, trends and `labd
detect` still read them) and, when `jobs_max_age_days` is set, jobs past it are removed whole.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import structlog

from labd.model import Iteration, Job, JobState
from labd.store.results import digest_from, job_metric_specs
from labd.store.store import Store

log = structlog.get_logger("labd.store")

DAY_S = 86400.0
CHUNK = 100  # jobs read and pruned at a time
PASS_LIMIT = 10_000  # jobs a pass prunes at most: a large backlog drains over several passes
FAILED_KEPT = 1000  # jobs whose digest failed, skipped for the daemon's life (said once each)


@dataclass
class Pruned:
    """What one pass removed."""

    raw_jobs: int = 0  # jobs whose raw iterations were removed
    iterations: int = 0
    jobs: int = 0  # jobs removed whole


@dataclass
class Tally:
    """What retention did since the daemon started (its metrics read this)."""

    removed: Pruned = field(default_factory=Pruned)
    skipped: int = 0  # jobs whose digest could not be made: their raw values stay
    passes_ok: int = 0
    passes_failed: int = 0
    failing: int = 0  # passes in a row that failed: 0 once one succeeds
    last_success: float = 0.0  # Unix time the last pass ended without error


class Retention:
    """Applies the store's retention limits to one database."""

    def __init__(self, store: Store, raw_max_age_days: float, jobs_max_age_days: float) -> None:
        self.store = store
        self.raw_max_age_s = raw_max_age_days * DAY_S
        self.jobs_max_age_s = jobs_max_age_days * DAY_S
        self.failed: set[str] = set()
        self.tally = Tally()

    @property
    def enabled(self) -> bool:
        return bool(self.raw_max_age_s or self.jobs_max_age_s)

    async def apply(self) -> Pruned:
        """One pass: whole jobs first (no digest is computed for a job about to go)."""
        pruned = Pruned()
        now = self.store.clock.now()
        if self.jobs_max_age_s:
            while pruned.jobs < PASS_LIMIT:
                gone = await self.store.forget_ended(now - self.jobs_max_age_s, CHUNK)
                pruned.jobs += len(gone)
                if len(gone) < CHUNK:
                    break
        if self.raw_max_age_s:
            before = now - self.raw_max_age_s
            while pruned.raw_jobs < PASS_LIMIT:
                chunk = await self.store.ended_with_raw_values(before, CHUNK, self.failed)
                progress = 0
                for job in chunk:
                    removed = await self._digest(job)
                    progress += removed > 0
                    pruned.iterations += removed
                pruned.raw_jobs += progress
                # A chunk where nothing went (every job failed, past FAILED_KEPT, or another
                # host took them) would come back the same: the next pass tries again.
                if len(chunk) < CHUNK or not progress:
                    break
        return pruned

    async def _digest(self, job: Job) -> int:
        """Keep the job's digest and remove its raw iterations; returns how many went."""
        try:
            records = await self.store.attempt_records(job.id, job.attempts)
            digest = await asyncio.to_thread(_digest_with_units, job, records)
            point = await self.store.history_point(job) if job.state is JobState.SUCCEEDED else None
            history = dataclasses.asdict(point) if point is not None else {}
            return await self.store.keep_digest(job.id, digest, history)
        except Exception as e:  # one job's bad record must not stop every later job's
            self.tally.skipped += 1
            if len(self.failed) < FAILED_KEPT:
                self.failed.add(job.id)
            log.warning(
                "database retention skipped a job: its raw values stay",
                job_id=job.id,
                error=f"{type(e).__name__}: {e}",
            )
            return 0

    async def for_ever(self, interval_s: float) -> None:
        """Apply the limits now and every `interval_s`; a pass that fails is said and
        retried at the next."""
        if not self.enabled:
            return
        tally = self.tally
        while True:
            try:
                pruned = await self.apply()
            except Exception as e:
                tally.passes_failed += 1
                tally.failing += 1
                log.warning("database retention failed", error=f"{type(e).__name__}: {e}")
            else:
                tally.passes_ok += 1
                tally.failing = 0
                tally.last_success = time.time()
                tally.removed.raw_jobs += pruned.raw_jobs
                tally.removed.iterations += pruned.iterations
                tally.removed.jobs += pruned.jobs
                if pruned.raw_jobs or pruned.jobs:
                    log.info("database retention applied", **dataclasses.asdict(pruned))
            await asyncio.sleep(interval_s)


def _digest_with_units(job: Job, records: list[dict[str, Any]]) -> dict[str, Any]:
    """`digest_of`'s summary and set_aside of the last attempt, and each metric's unit as its
    iterations recorded it (pages show it beside the kept summary): NumPy work, in a thread."""
    last = [Iteration.model_validate(record) for record in records]
    specs = job_metric_specs(job, last)
    units = {name: spec["unit"] for name, spec in specs.items() if spec["unit"]}
    return digest_from(job, last) | {"units": units}
