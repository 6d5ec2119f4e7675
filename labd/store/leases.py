"""Leases: claiming work (FOR UPDATE SKIP LOCKED), heartbeats, state moves, expiry."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from labd.events import (
    JobCancelRequested,
    JobFinished,
    JobLeased,
    JobRequeued,
    JobRunning,
)
from labd.model import (
    Job,
    JobState,
    can_move,
)
from labd.store.base import (
    Lease,
    row_to_job,
)
from labd.store.notices import notify_cancel
from labd.store.outbox import JobEvent, append_job_event
from labd.store.queue import JobQueue
from labd.store.tables import ACTIVE_STATES, iterations, jobs


class Leases(JobQueue):
    """Moving leased jobs on; builds on the queue (it reads jobs back)."""

    async def claim_job(
        self,
        device_id: str,
        lane_keys: Sequence[str],
        owner: str,
        ttl: float,
        avoid_grace_s: float = 0.0,
    ) -> Lease | None:
        """Lease the best queued job of the given lanes for device_id, or None if none waits.
        A job whose last attempt failed on device_id's infrastructure is left to other devices
        for `avoid_grace_s` after it became due; then device_id may take it back."""
        now = self.clock.now()
        token = uuid.uuid4().hex

        def claim(conn: sa.Connection) -> Any:
            best = self._peek(conn, lane_keys, now, device_id, avoid_grace_s)
            if best is None:
                return None
            row = conn.execute(
                jobs.update()
                .where(jobs.c.seq == best, jobs.c.state == JobState.QUEUED.value)
                .values(
                    state=JobState.LEASED.value,
                    device_id=device_id,
                    lease_owner=owner,
                    lease_token=token,
                    lease_expires=now + ttl,
                    attempts=jobs.c.attempts + 1,
                )
                .returning(*jobs.c)
            ).first()
            if row is not None:
                leased = JobLeased(
                    job_id=row.id, device_id=device_id, host=owner, attempt=row.attempts
                )
                append_job_event(conn, self.host, leased)
                return row, leased
            return None

        claimed = await self.write(claim)
        if claimed is None:
            return None
        row, leased = claimed
        self.announce([leased])
        return Lease(row_to_job(row), token, row.avoid_device)

    def _peek(
        self,
        conn: sa.Connection,
        lane_keys: Sequence[str],
        now: float,
        device_id: str,
        avoid_grace_s: float,
    ) -> int | None:
        # The head of each lane is the first entry of ix_jobs_dispatch: one index seek per
        # lane, so the cost stays flat however long the queue grows. Heads another host is
        # claiming right now are skipped, not waited for; they stay locked until we commit.
        heads = []
        for key in lane_keys:
            row = conn.execute(
                sa.select(jobs.c.seq, jobs.c.priority, jobs.c.fair_rank)
                .where(
                    jobs.c.state == JobState.QUEUED.value,
                    jobs.c.lane == key,
                    jobs.c.not_before <= now,
                    (jobs.c.avoid_device != device_id) | (jobs.c.not_before <= now - avoid_grace_s),
                )
                .order_by(jobs.c.priority.desc(), jobs.c.fair_rank, jobs.c.seq)
                .limit(1)
                .with_for_update(skip_locked=True)
            ).first()
            if row is not None:
                heads.append((-row.priority, row.fair_rank, row.seq))
        return min(heads)[2] if heads else None

    async def heartbeat(self, job_id: str, token: str, ttl: float) -> tuple[bool, bool]:
        """Extend a lease. Returns (still_held, cancel_requested)."""
        update = (
            jobs.update()
            .where(jobs.c.id == job_id, jobs.c.lease_token == token)
            .where(jobs.c.state.in_(ACTIVE_STATES))
            .values(lease_expires=self.clock.now() + ttl)
            .returning(jobs.c.cancel_requested)
        )
        row = await self.write(lambda conn: conn.execute(update).first())
        return (row is not None, bool(row.cancel_requested) if row else False)

    async def mark_running(self, job_id: str, token: str) -> bool:
        """Move a leased job to running; False when it must not run: its lease moved on, or a
        cancel came before it started (the job is then ended `cancelled` here, since its
        runner may not have been reachable when the cancel came)."""
        if await self._move(
            job_id,
            token,
            JobState.RUNNING,
            lambda row: JobRunning(job_id=job_id, device_id=row.device_id, attempt=row.attempts),
            from_states=("leased",),
            where=jobs.c.cancel_requested.is_(False),
            started_at=self.clock.now(),
            error="",  # the last attempt's, which no longer says where the job stands
        ):
            return True
        await self._move(
            job_id,
            token,
            JobState.CANCELLED,
            lambda row: _finished(row, JobState.CANCELLED.value, CANCELLED_BEFORE_START),
            from_states=("leased",),
            where=jobs.c.cancel_requested.is_(True),
            error=CANCELLED_BEFORE_START,
            finished_at=self.clock.now(),
        )
        return False

    async def finish_job(self, job_id: str, token: str, state: JobState, error: str = "") -> bool:
        """Move a held job to a terminal state; False if the lease was lost meanwhile. A job
        whose cancel was requested before it ended is ended `cancelled` whatever `state`
        says (its runner may have finished before it heard of the cancel)."""
        assert state.terminal
        if state is not JobState.CANCELLED and await self._move(
            job_id,
            token,
            JobState.CANCELLED,
            lambda row: _finished(row, JobState.CANCELLED.value, CANCELLED_WHILE_RUNNING),
            where=jobs.c.cancel_requested.is_(True),
            error=CANCELLED_WHILE_RUNNING,
            finished_at=self.clock.now(),
        ):
            return True
        return await self._move(
            job_id,
            token,
            state,
            lambda row: _finished(row, state.value, error),
            error=error,
            finished_at=self.clock.now(),
        )

    async def requeue_job(
        self,
        job_id: str,
        token: str,
        error: str,
        delay: float = 0.0,
        refund: bool = False,
        avoid_device: str = "",
    ) -> bool:
        """Put a held job back in the queue (after `delay` s); `refund` forgives the attempt;
        `avoid_device` (whose infrastructure failed it) is the last to be offered it again.
        A forgiven attempt runs again under its number from its first iteration: the values it
        stored are dropped (a half-run of an attempt that does not count; kept, the run again
        could not store its own)."""
        extra: dict[str, Any] = {"attempts": jobs.c.attempts - 1} if refund else {}

        def forget(conn: sa.Connection, row: Any) -> None:
            ended = row.attempts + 1
            conn.execute(
                iterations.delete().where(
                    iterations.c.job_id == job_id, iterations.c.attempt == ended
                )
            )

        return await self._move(
            job_id,
            token,
            JobState.QUEUED,
            lambda row: JobRequeued(
                job_id=job_id,
                reason=error,
                attempt=row.attempts + 1 if refund else row.attempts,  # the attempt that ended
                retry_in_s=delay,
                attempt_counted=not refund,
            ),
            error=error,
            not_before=self.clock.now() + delay,
            device_id="",
            lease_owner="",
            lease_token="",
            avoid_device=avoid_device,
            queue_deadline=deadline_from(self.clock.now()),
            then=forget if refund else None,
            **extra,
        )

    async def _move(
        self,
        job_id: str,
        token: str,
        state: JobState,
        event: Callable[[Any], JobEvent],
        from_states: Sequence[str] = (),
        then: Callable[[sa.Connection, Any], None] | None = None,
        where: sa.ColumnElement[bool] | None = None,
        **values: Any,
    ) -> bool:
        """Move a held job on; `event` makes the move's event from the moved row (its new
        values), `then` does more in the same transaction, `where` narrows the rows moved.
        False, and no event, when the lease has moved on (or `where` did not hold)."""
        # Only moves the state machine allows, from states the caller's lease can be in.
        from_states = from_states or [s for s in ACTIVE_STATES if can_move(JobState(s), state)]
        assert all(can_move(JobState(old), state) for old in from_states), (from_states, state)
        update = (
            jobs.update()
            .where(jobs.c.id == job_id, jobs.c.lease_token == token, jobs.c.state.in_(from_states))
            .values(state=state.value, **values)
            .returning(*MOVED)
        )
        if where is not None:
            update = update.where(where)

        def move(conn: sa.Connection) -> JobEvent | None:
            row = conn.execute(update).first()
            if row is None:
                return None
            if then is not None:
                then(conn, row)
            moved = event(row)
            append_job_event(conn, self.host, moved)
            return moved

        moved = await self.write(move)
        if moved is None:
            return False
        self.announce([moved])
        return True

    async def request_cancel(self, job_id: str) -> Job | None:
        """Cancel a queued job at once; flag an active one for its runner. None if unknown."""

        def cancel(conn: sa.Connection) -> JobEvent | None:
            cancelled = conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.state == JobState.QUEUED.value)
                .values(
                    state=JobState.CANCELLED.value,
                    finished_at=self.clock.now(),
                    error="cancelled while queued",
                    cancel_requested=True,
                )
                .returning(*MOVED)
            ).first()
            flagged = conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.state.in_(ACTIVE_STATES))
                .where(jobs.c.cancel_requested.is_(False))
                .values(cancel_requested=True)
                .returning(jobs.c.state)
            )
            event: JobEvent | None = None
            if cancelled is not None:
                event = _finished(cancelled, JobState.CANCELLED.value, "cancelled while queued")
            elif (state := flagged.scalar()) is not None:
                event = JobCancelRequested(job_id=job_id, state=state)
                if self.dialect == "postgresql":  # the host running it may be another
                    notify_cancel(conn, job_id)
            if event is not None:
                append_job_event(conn, self.host, event)
            return event

        if (event := await self.write(cancel)) is not None:
            self.announce([event])
        return await self.get_job(job_id)

    async def expire_leases(
        self, now: float | None = None, owner: str = "", why: Mapping[str, str] | None = None
    ) -> list[Job]:
        """Requeue (or fail, when out of attempts) every job whose lease ran out, or, with
        `owner`, every lease that owner holds (a restarted host's leases are all dead).
        `why`: what ended a job's attempt, by job id, when its host knows and could not write
        it (a full disk): said with the expiry."""
        now = self.clock.now() if now is None else now
        moved = []
        query = sa.select(jobs).where(jobs.c.state.in_(ACTIVE_STATES))
        if owner:
            query = query.where(jobs.c.lease_owner == owner)
        else:
            query = query.where(jobs.c.lease_expires < now)

        def expire(conn: sa.Connection) -> list[JobEvent]:
            events: list[JobEvent] = []
            for row in conn.execute(query.with_for_update(skip_locked=True)).all():
                held_by = (
                    f"{owner} restarted while it held the job"  # no lease ran out
                    if owner
                    else f"lease held by {row.lease_owner} expired"
                )
                if known := (why or {}).get(row.id):
                    held_by += f" ({known})"
                refund = False
                values: dict[str, Any]
                if row.cancel_requested:
                    values = {"state": "cancelled", "error": f"{held_by}; cancelled"}
                elif owner and row.state == JobState.LEASED.value:
                    # Claimed, never started (a stop that came mid-claim, a crash): nothing of
                    # the job ran, so its attempt is not counted.
                    refund = True
                    values = {
                        "state": "queued",
                        "error": f"lease held by {owner} ended before the job started "
                        f"({owner} restarted); requeued, the attempt not counted",
                        "attempts": row.attempts - 1,
                    }
                elif row.attempts >= row.max_attempts:
                    values = {
                        "state": "failed",
                        "error": f"{held_by} on attempt {row.attempts}; no attempts left",
                    }
                else:
                    values = {"state": "queued", "error": f"{held_by}; requeued"}
                finished = now if values["state"] != "queued" else None
                if values["state"] == "queued":  # from the clock's now, not the reaper's
                    values["queue_deadline"] = deadline_from(self.clock.now())
                conn.execute(
                    jobs.update()
                    .where(jobs.c.seq == row.seq)
                    .values(
                        device_id="",
                        lease_owner="",
                        lease_token="",
                        finished_at=finished,
                        **values,
                    )
                )
                event: JobEvent
                if values["state"] == "queued":
                    event = JobRequeued(
                        job_id=row.id,
                        reason=values["error"],
                        attempt=row.attempts,
                        retry_in_s=0,
                        attempt_counted=not refund,
                    )
                else:
                    event = _finished(row, values["state"], values["error"])
                append_job_event(conn, self.host, event)
                events.append(event)
                moved.append(row.id)
            return events

        self.announce(await self.write(expire))
        return [job for job_id in moved if (job := await self.get_job(job_id))]

    async def overdue_jobs(self, now: float | None = None) -> list[Job]:
        """Queued jobs past their queue deadline."""
        now = self.clock.now() if now is None else now
        query = sa.select(jobs).where(
            jobs.c.state == JobState.QUEUED.value, jobs.c.queue_deadline < now
        )
        rows = await self.read(lambda conn: conn.execute(query).all())
        return [row_to_job(row) for row in rows]

    async def time_out_queued(
        self, reasons: Mapping[str, str], now: float | None = None
    ) -> list[Job]:
        """Time out each job of `reasons` (job id: why) that is still queued past its
        deadline; one started meanwhile is left alone. Returns the jobs timed out."""
        now = self.clock.now() if now is None else now

        def time_out(conn: sa.Connection) -> list[JobEvent]:
            events: list[JobEvent] = []
            for job_id, reason in reasons.items():
                row = conn.execute(
                    jobs.update()
                    .where(jobs.c.id == job_id, jobs.c.state == JobState.QUEUED.value)
                    .where(jobs.c.queue_deadline < now)
                    .values(state=JobState.TIMED_OUT.value, finished_at=now, error=reason)
                    .returning(*MOVED)
                ).first()
                if row is not None:
                    events.append(_finished(row, JobState.TIMED_OUT.value, reason))
                    append_job_event(conn, self.host, events[-1])
            return events

        events = await self.write(time_out)
        self.announce(events)
        return [job for event in events if (job := await self.get_job(event.job_id))]


CANCELLED_BEFORE_START = "cancelled before it started"
CANCELLED_WHILE_RUNNING = "cancelled while running"

def deadline_from(now: float) -> sa.ColumnElement[Any]:
    """A requeued job's queue deadline: its queue_timeout_s again, from `now` (it had started
    in time; kept as it was, a job requeued a day after its submission timed out at once as
    "not started"). A job without one keeps none."""
    return jobs.c.queue_deadline - jobs.c.submitted_at + now


# What a moved job's event is made of (the row's values after the move).
MOVED = (jobs.c.id, jobs.c.suite, jobs.c.test, jobs.c.device_id, jobs.c.attempts)


def _finished(row: Any, state: str, error: str) -> JobFinished:
    return JobFinished(
        job_id=row.id,
        state=state,
        error=error,
        suite=row.suite,
        test=row.test,
        device_id=row.device_id,
    )
