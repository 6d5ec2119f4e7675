"""Reads for answers that can be large (a job's raw iterations, a test's history), in pages.

Each returns plain JSON data, decoded where the transaction runs (on SQLite, the reader
thread), so the event loop neither decodes nor holds more than one page. Only the fields an
answer needs are read: the summary and the history never load an iteration's whole fingerprint
(the history reads its device model and metric directions only).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from labd.metric_specs import directions_of, metric_specs
from labd.model import Job
from labd.store.base import StoreBase, row_to_job
from labd.store.tables import iterations, job_digests, jobs


@dataclass
class HistoryPoint:
    """One succeeded job of a test's history: the median of each metric's measured values."""

    job_id: str
    build: str
    device_class: str
    medians: dict[str, float] = field(default_factory=dict)
    higher_is_better: dict[str, bool] = field(default_factory=dict)  # labd.metric_specs


def _measured_fields() -> tuple[Any, ...]:
    """The parts of a stored iteration `_measured` reads (absent in older records: NULL)."""
    record = iterations.c.record
    return (
        record["values"],
        record["warmup"].as_boolean(),
        record["error"].as_string(),
        record["set_aside"].as_boolean(),
        record["variant"].as_string(),
    )


def _measured(rows: Any, variant: str = "") -> dict[str, list[float]]:
    """As `labd.store.results.measured`: warm-ups, failed and set-aside iterations left out, one
    variant ("" for a job without variants)."""
    values: dict[str, list[float]] = {}
    for metric_values, warmup, error, aside, its_variant in rows:
        if not warmup and not error and not aside and (its_variant or "") == variant:
            for name, value in (metric_values or {}).items():
                values.setdefault(name, []).append(value)
    return dict(sorted(values.items()))


class Views(StoreBase):
    """Paged reads of raw iterations and histories."""

    async def iteration_records(
        self, job_id: str, offset: int = 0, limit: int = 1000
    ) -> tuple[list[dict[str, Any]], int]:
        """(one page of the job's raw iterations as JSON data, every attempt in order; the
        number the job has in all)."""
        page = (
            sa.select(iterations.c.record)
            .where(iterations.c.job_id == job_id)
            .order_by(iterations.c.attempt, iterations.c.idx)
            .offset(offset)
            .limit(limit)
        )
        count = sa.select(sa.func.count()).where(iterations.c.job_id == job_id)

        def read(conn: sa.Connection) -> tuple[list[dict[str, Any]], int]:
            return list(conn.scalars(page)), int(conn.scalar(count) or 0)

        return await self.read(read)

    async def count_iterations(self, job_id: str, attempt: int) -> int:
        """How many iterations one attempt of the job has recorded."""
        query = sa.select(sa.func.count()).where(
            iterations.c.job_id == job_id, iterations.c.attempt == attempt
        )
        count: int | None = await self.read(lambda conn: conn.scalar(query))
        return count or 0

    async def attempt_records(self, job_id: str, attempt: int) -> list[dict[str, Any]]:
        """Every raw iteration of one attempt, in order, as JSON data."""
        query = (
            sa.select(iterations.c.record)
            .where(iterations.c.job_id == job_id, iterations.c.attempt == attempt)
            .order_by(iterations.c.idx)
        )
        return await self.read(lambda conn: list(conn.scalars(query)))

    async def measured_series(
        self, job_id: str, attempt: int, variant: str = ""
    ) -> dict[str, list[float]]:
        """Per metric, in iteration order, the measured values of one attempt (see
        `_measured`), read without the rest of each iteration."""
        query = (
            sa.select(*_measured_fields())
            .where(iterations.c.job_id == job_id, iterations.c.attempt == attempt)
            .order_by(iterations.c.idx)
        )
        return await self.read(lambda conn: _measured(conn.execute(query), variant))

    async def history_page(
        self, suite: str, test: str, limit: int, before: str = ""
    ) -> tuple[list[HistoryPoint], str | None]:
        """(the test's newest `limit` succeeded jobs older than job `before`, oldest first;
        the `before` of the next older page, None when this one reaches the first job). A job
        whose raw iterations retention removed gives the point kept in its digest."""
        query = (
            sa.select(jobs, job_digests.c.history.label("kept_point"))
            .select_from(jobs.outerjoin(job_digests, job_digests.c.job_id == jobs.c.id))
            .where(jobs.c.suite == suite, jobs.c.test == test, jobs.c.state == "succeeded")
        )
        if before:
            cursor = sa.select(jobs.c.seq).where(jobs.c.id == before).scalar_subquery()
            query = query.where(jobs.c.seq < cursor)
        query = query.order_by(jobs.c.seq.desc()).limit(limit + 1)

        def read(conn: sa.Connection) -> tuple[list[HistoryPoint], str | None]:
            rows = conn.execute(query).all()
            points = []
            for row in reversed(rows[:limit]):
                job = row_to_job(row)
                if row.kept_point is not None:
                    point = HistoryPoint(**row.kept_point) if row.kept_point else None
                else:
                    point = history_point(conn, job)
                if point is not None:
                    points.append(point)
            return points, (str(rows[limit - 1].id) if len(rows) > limit else None)

        return await self.read(read)

    async def history_point(self, job: Job) -> HistoryPoint | None:
        """The job's point of its test's history, from its raw iterations (None: none)."""
        return await self.read(lambda conn: history_point(conn, job))


def history_point(conn: sa.Connection, job: Job) -> HistoryPoint | None:
    """The medians of the last attempt's measured values, the device class (the model the
    first iteration ran on) and the metrics' directions; None when nothing was measured."""
    where = (iterations.c.job_id == job.id, iterations.c.attempt == job.attempts)
    measured = _measured(
        conn.execute(sa.select(*_measured_fields()).where(*where).order_by(iterations.c.idx))
    )
    if not measured:
        return None
    model = iterations.c.record[("fingerprint", "model")].as_string()
    declared = iterations.c.record[("fingerprint", "metrics")]
    first = conn.execute(
        sa.select(model, declared).where(*where).order_by(iterations.c.idx).limit(1)
    ).first()
    specs = metric_specs(
        [m.model_dump() for m in job.spec.metrics],
        [{"metrics": first[1]}] if first is not None else [],
    )
    return HistoryPoint(
        job_id=job.id,
        build=job.spec.build.revision or job.spec.build.build_id or job.id,
        device_class=(first[0] if first is not None else None) or job.device_id,
        medians={m: statistics.median(v) for m, v in measured.items()},
        higher_is_better=directions_of(specs),
    )
