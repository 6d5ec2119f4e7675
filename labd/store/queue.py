"""Submitting and finding jobs: idempotent submission, fair ranks, lanes, listings."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from labd.errors import AuthError
from labd.events import JobQueued
from labd.model import (
    DeviceSelector,
    Job,
    JobState,
    TestSpec,
)
from labd.store.base import (
    JobConflict,
    Lane,
    lane_key,
    row_to_job,
    spec_hash,
)
from labd.store.nonces import Nonces, NonceSeen, record_nonce
from labd.store.outbox import event_row
from labd.store.tables import ACTIVE_STATES, jobs, lanes, outbox

SUBMITTER_LOCK = 0x1ABF  # first key of a submitter's PostgreSQL advisory lock (see _check_quota)


class JobQueue(Nonces):
    """Submitting jobs and reading them back."""

    async def submit_job(
        self,
        job_id: str,
        spec: TestSpec,
        submitter: str,
        now: float | None = None,
        nonce: tuple[str, str, float] | None = None,
        queue_timeout_s: float | None = None,
        max_unfinished: int | None = None,
    ) -> tuple[Job, bool]:
        """Persist a queued job; returns (job, created). The same submitter submitting the same
        id and spec again gets the existing job; the same id with another spec, or another
        submitter's id, raises JobConflict. `nonce` (principal, nonce, expiry) of a signed
        request is recorded in the same transaction when this returns (NonceSeen when this
        host has it already), not when it raises. With `max_unfinished`: AuthError
        `quota_exceeded` when the submitter has that many jobs queued or running, counted in
        the transaction that inserts, so parallel submissions, on any host, cannot all pass.
        A job not started `queue_timeout_s` after `now` times out (None: it waits for ever)."""
        now = self.clock.now() if now is None else now
        deadline = None if queue_timeout_s is None else now + queue_timeout_s
        digest, lane = spec_hash(spec), lane_key(spec.device, spec.scenario)
        queued = JobQueued(
            job_id=job_id,
            suite=spec.suite,
            test=spec.test,
            submitter=submitter,
            priority=spec.priority,
        )
        # As few statements as it takes, in one hop (CI waits for the answer): the lane once
        # per process, the fair rank computed inside the INSERT, the first event numbered 1
        # without an UPDATE.
        row = {
            "id": job_id,
            "state": JobState.QUEUED.value,
            "priority": spec.priority,
            "lane": lane,
            "submitter": submitter,
            "suite": spec.suite,
            "test": spec.test,
            "spec": spec.model_dump(mode="json"),
            "spec_hash": digest,
            "attempts": 0,
            "max_attempts": spec.max_attempts,
            "event_seq": 1,
            "submitted_at": now,
            "queue_deadline": deadline,
            "rank_submitter": submitter,
            "rank_lane": lane,
            "rank_priority": spec.priority,
        }
        selector = None if lane in self.known_lanes else spec.device.model_dump()

        def insert(conn: sa.Connection) -> None:
            if nonce is not None:
                record_nonce(conn, self.host, *nonce)
            if max_unfinished is not None:
                _check_quota(conn, job_id, submitter, max_unfinished)
            if selector is not None:
                found = conn.scalar(sa.select(lanes.c.key).where(lanes.c.key == lane))
                if found is None:
                    # Another host's first job of the lane may commit it meanwhile (PostgreSQL).
                    new_lane = {"key": lane, "selector": selector, "scenario": spec.scenario}
                    conn.execute(_insert_lane(conn.dialect.name), new_lane)
            conn.execute(INSERT_JOB, row)
            conn.execute(outbox.insert(), event_row(self.host, "job", job_id, 1, queued))

        try:
            await self.write(insert)
        except IntegrityError:
            existing = await self.get_job(job_id)
            if existing is None:
                raise
            if existing.submitter != submitter:
                # Idempotent for its own submitter only; nothing more of the job is said.
                raise JobConflict(f"job id {job_id!r} belongs to another submitter") from None
            if spec_hash(existing.spec) != digest:
                raise JobConflict(
                    f"job id {job_id!r} was already submitted with a different spec"
                ) from None
            if nonce is not None and not await self.first_use(*nonce):
                raise NonceSeen(nonce[1]) from None
            return existing, False
        self.known_lanes.add(lane)
        self.announce([queued])
        job = Job(
            id=job_id,
            spec=spec,
            state=JobState.QUEUED,
            submitter=submitter,
            submitted_at=datetime.fromtimestamp(now, UTC),
            queue_deadline=None if deadline is None else datetime.fromtimestamp(deadline, UTC),
        )
        return job, True

    async def get_job(self, job_id: str) -> Job | None:
        query = sa.select(jobs).where(jobs.c.id == job_id)
        row = await self.read(lambda conn: conn.execute(query).first())
        return row_to_job(row) if row else None

    async def list_jobs(self, states: Sequence[JobState] = (), limit: int = 100) -> list[Job]:
        """The newest `limit` jobs in `states` (any state when empty), newest first."""
        query = sa.select(jobs).limit(limit)
        if states:
            query = query.where(jobs.c.state.in_([s.value for s in states]))
        query = query.order_by(jobs.c.seq.desc())
        return await self.read(lambda conn: [row_to_job(row) for row in conn.execute(query)])

    async def queued_in_run_order(self, limit: int) -> tuple[list[Job], int]:
        """(the first `limit` queued jobs in the order leases take them, how many are queued).
        The order is the lease's (priority, then each submitter's turn, then submission), so
        it is the run order where every device fits every job; a job no free device fits
        waits, and its row says why."""
        first = (
            sa.select(jobs)
            .where(jobs.c.state == JobState.QUEUED.value)
            .order_by(jobs.c.priority.desc(), jobs.c.fair_rank, jobs.c.seq)
            .limit(limit)
        )
        count = sa.select(sa.func.count()).where(jobs.c.state == JobState.QUEUED.value)

        def read(conn: sa.Connection) -> tuple[list[Job], int]:
            return [row_to_job(row) for row in conn.execute(first)], int(conn.scalar(count) or 0)

        return await self.read(read)

    async def finished_jobs(self, suite: str, test: str, limit: int = 10_000) -> list[Job]:
        """The test's succeeded jobs, oldest first: the builds of its history."""
        query = (
            sa.select(jobs)
            .where(jobs.c.suite == suite, jobs.c.test == test, jobs.c.state == "succeeded")
            .order_by(jobs.c.seq.desc())
            .limit(limit)
        )
        rows = await self.read(lambda conn: conn.execute(query).all())
        return [row_to_job(row) for row in reversed(rows)]

    async def queue_by_priority(self) -> list[tuple[int, int, float]]:
        """(priority, queued jobs, oldest submission time) per priority that has any."""
        query = (
            sa.select(jobs.c.priority, sa.func.count(), sa.func.min(jobs.c.submitted_at))
            .where(jobs.c.state == JobState.QUEUED.value)
            .group_by(jobs.c.priority)
        )
        rows = await self.read(lambda conn: conn.execute(query).all())
        return [(p, int(n), float(t)) for p, n, t in rows]

    async def count_jobs(self) -> dict[str, int]:
        """Jobs per state."""
        query = sa.select(jobs.c.state, sa.func.count()).group_by(jobs.c.state)
        rows = await self.read(lambda conn: conn.execute(query).all())
        return {state: count for state, count in rows}

    async def count_unfinished(self, submitter: str) -> int:
        """The submitter's jobs queued or running (for its quota)."""
        return await self.read(lambda conn: _unfinished(conn, submitter))

    async def lanes(self) -> dict[str, Lane]:
        """Every (selector, scenario) jobs were ever submitted with, by lane key."""
        query = sa.select(lanes.c.key, lanes.c.selector, lanes.c.scenario)
        rows = await self.read(lambda conn: conn.execute(query).all())
        return {
            key: Lane(DeviceSelector.model_validate(sel), scenario) for key, sel, scenario in rows
        }

    async def active_job_on(self, device_id: str) -> str | None:
        query = sa.select(jobs.c.id).where(
            jobs.c.device_id == device_id, jobs.c.state.in_(ACTIVE_STATES)
        )
        return await self.read(lambda conn: conn.scalar(query))


def _insert_lane(dialect: str) -> sa.Insert:
    """INSERT a lane, nothing when it exists (both dialects say it the same way)."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    return insert(lanes).on_conflict_do_nothing(index_elements=["key"])


def _unfinished(conn: sa.Connection, submitter: str) -> int:
    live = (JobState.QUEUED.value, *ACTIVE_STATES)
    query = sa.select(sa.func.count()).where(jobs.c.submitter == submitter, jobs.c.state.in_(live))
    return conn.scalar(query) or 0


def _check_quota(conn: sa.Connection, job_id: str, submitter: str, limit: int) -> None:
    """AuthError `quota_exceeded` when `submitter` has `limit` unfinished jobs, unless a job
    has `job_id` already (the INSERT then fails, and a duplicate or a conflict is answered).
    The count holds until the transaction ends: SQLite's write transactions are serial
    (BEGIN IMMEDIATE, one writer at a time, whatever the process); on PostgreSQL, whose
    transactions count side by side, each first takes the submitter's advisory lock, so a
    second host counts only once the first has committed."""
    if conn.dialect.name == "postgresql":
        conn.execute(
            sa.text("SELECT pg_advisory_xact_lock(:space, :key)"),
            {"space": SUBMITTER_LOCK, "key": _submitter_key(submitter)},
        )
    unfinished = _unfinished(conn, submitter)
    if unfinished >= limit and conn.scalar(sa.select(jobs.c.id).where(jobs.c.id == job_id)) is None:
        raise AuthError(
            "quota_exceeded",
            f"quota: principal {submitter!r} has {unfinished} jobs queued or running "
            f"(limit {limit})",
        )


def _submitter_key(submitter: str) -> int:
    """The second key of a submitter's advisory lock: 32 bits of a hash (two submitters that
    share one merely wait for each other)."""
    digest = hashlib.sha256(f"labd submitter {submitter}".encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


def _fair_rank() -> sa.ColumnElement[int]:
    """Start-time fair queuing: a new job ranks after its submitter's waiting jobs, but never
    before the lane's current head, so a newcomer interleaves with a big batch."""
    waiting = (
        (jobs.c.state == JobState.QUEUED.value)
        & (jobs.c.lane == sa.bindparam("rank_lane"))
        & (jobs.c.priority == sa.bindparam("rank_priority"))
    )
    own_last = sa.select(sa.func.max(jobs.c.fair_rank)).where(
        waiting, jobs.c.submitter == sa.bindparam("rank_submitter")
    )
    head = sa.select(jobs.c.fair_rank).where(waiting).order_by(jobs.c.fair_rank).limit(1)
    own_next = sa.func.coalesce(own_last.scalar_subquery(), 0) + 1
    head_rank = sa.func.coalesce(head.scalar_subquery(), 0)
    return sa.case((own_next > head_rank, own_next), else_=head_rank)


# Built once: building an expression costs more than running it.
INSERT_JOB = jobs.insert().values(fair_rank=_fair_rank())
