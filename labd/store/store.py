"""The store: jobs, devices and raw iterations, in SQLite or PostgreSQL through the same code.

Every method is one short transaction. Claiming work uses `SELECT ... FOR UPDATE SKIP LOCKED`
on PostgreSQL so several hosts can share one queue; on SQLite (one host) every transaction
begins IMMEDIATE, which serialises writers without deadlocks.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import structlog
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from labd.errors import LabdError
from labd.model import (
    AdminState,
    Device,
    DeviceSelector,
    Iteration,
    Job,
    JobState,
    TestSpec,
    can_move,
)
from labd.store import outbox as outbox_mod
from labd.store.migrations import migrate
from labd.store.outbox import OutboxRow, append_job_event
from labd.store.tables import ACTIVE_STATES, devices, iterations, jobs, lanes
from labd.store.tables import outbox as outbox_table

log = structlog.get_logger("labd.store")


class StoreError(LabdError):
    """The database refused or could not be reached."""


class JobConflict(StoreError):
    """A job id was submitted again with a different spec."""

    exit_code = 2


@dataclass(frozen=True)
class Lease:
    """A claimed job: only the holder of the token may move it on."""

    job: Job
    token: str


def _ts(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def spec_hash(spec: TestSpec) -> str:
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()


def lane_key(selector: DeviceSelector) -> str:
    return hashlib.sha256(selector.key().encode()).hexdigest()[:32]


def default_sqlite_url(state_dir: Path) -> str:
    return f"sqlite+aiosqlite:///{state_dir / 'labd.db'}"


class Store:
    """Async access to labd's database. Create with `await Store.open(url)`."""

    def __init__(self, engine: AsyncEngine, host: str = "") -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        self.host = host  # who delivers the outbox rows this store writes

    @classmethod
    async def open(cls, url: str, host: str = "") -> Store:
        """Connect, apply pending migrations, and return the store."""
        if url.startswith("sqlite"):
            engine = create_async_engine(url, connect_args={"timeout": 30})
            _configure_sqlite(engine)
        else:
            engine = create_async_engine(url, pool_size=10, max_overflow=10, pool_pre_ping=True)
        store = cls(engine, host)
        try:
            async with engine.begin() as conn:
                applied = await conn.run_sync(migrate)
        except Exception as e:
            await engine.dispose()
            raise StoreError(f"cannot open the store at {_safe_url(engine)}: {e}") from e
        if applied:
            log.info("store migrated", versions=applied, dialect=store.dialect)
        return store

    async def close(self) -> None:
        await self.engine.dispose()

    async def ping(self) -> str | None:
        """None when the database answers, else why not (for /readyz)."""
        try:
            async with self.engine.connect() as conn:
                await conn.execute(sa.text("SELECT 1"))
        except Exception as e:
            return f"database unreachable: {type(e).__name__}: {e}"
        return None

    # Jobs -----------------------------------------------------------------------------------

    async def submit_job(
        self, job_id: str, spec: TestSpec, submitter: str, now: float | None = None
    ) -> tuple[Job, bool]:
        """Persist a queued job; returns (job, created). Submitting the same id and spec again
        returns the existing job; the same id with another spec raises JobConflict."""
        now = time.time() if now is None else now
        digest, lane = spec_hash(spec), lane_key(spec.device)
        try:
            async with self.engine.begin() as conn:
                await self._ensure_lane(conn, lane, spec.device)
                rank = await self._fair_rank(conn, submitter, lane, spec.priority)
                await conn.execute(
                    jobs.insert().values(
                        id=job_id,
                        state=JobState.QUEUED.value,
                        priority=spec.priority,
                        fair_rank=rank,
                        lane=lane,
                        submitter=submitter,
                        suite=spec.suite,
                        test=spec.test,
                        spec=spec.model_dump(mode="json"),
                        spec_hash=digest,
                        attempts=0,
                        max_attempts=spec.max_attempts,
                        submitted_at=now,
                    )
                )
                await append_job_event(
                    conn,
                    self.host,
                    job_id,
                    "queued",
                    "queued",
                    {
                        "submitter": submitter,
                        "suite": spec.suite,
                        "test": spec.test,
                        "priority": spec.priority,
                    },
                )
        except IntegrityError:
            existing = await self.get_job(job_id)
            if existing is None:
                raise
            if spec_hash(existing.spec) != digest:
                raise JobConflict(
                    f"job id {job_id!r} was already submitted with a different spec"
                ) from None
            return existing, False
        job = await self.get_job(job_id)
        assert job is not None
        return job, True

    async def _ensure_lane(self, conn: AsyncConnection, key: str, selector: DeviceSelector) -> None:
        found = await conn.scalar(sa.select(lanes.c.key).where(lanes.c.key == key))
        if found is None:
            await conn.execute(lanes.insert().values(key=key, selector=selector.model_dump()))

    async def _fair_rank(
        self, conn: AsyncConnection, submitter: str, lane: str, priority: int
    ) -> int:
        # Start-time fair queuing: a new job ranks after its submitter's waiting jobs, but
        # never before the lane's current head, so a newcomer interleaves with a big batch.
        queued = (jobs.c.state == JobState.QUEUED.value) & (jobs.c.lane == lane)
        own_last = await conn.scalar(
            sa.select(sa.func.max(jobs.c.fair_rank)).where(
                queued, jobs.c.submitter == submitter, jobs.c.priority == priority
            )
        )
        head = await conn.scalar(
            sa.select(jobs.c.fair_rank)
            .where(queued, jobs.c.priority == priority)
            .order_by(jobs.c.fair_rank)
            .limit(1)
        )
        return max((own_last or 0) + 1, head or 0)

    async def get_job(self, job_id: str) -> Job | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(sa.select(jobs).where(jobs.c.id == job_id))).first()
        return _job(row) if row else None

    async def list_jobs(
        self, states: Sequence[JobState] = (), limit: int = 100, newest_first: bool = True
    ) -> list[Job]:
        query = sa.select(jobs).limit(limit)
        if states:
            query = query.where(jobs.c.state.in_([s.value for s in states]))
        query = query.order_by(jobs.c.seq.desc() if newest_first else jobs.c.seq)
        async with self.engine.connect() as conn:
            return [_job(row) for row in await conn.execute(query)]

    async def finished_jobs(self, suite: str, test: str, limit: int = 10_000) -> list[Job]:
        """The test's succeeded jobs, oldest first: the builds of its history."""
        query = (
            sa.select(jobs)
            .where(jobs.c.suite == suite, jobs.c.test == test, jobs.c.state == "succeeded")
            .order_by(jobs.c.seq.desc())
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            return [_job(row) for row in reversed((await conn.execute(query)).all())]

    async def queue_by_priority(self) -> list[tuple[int, int, float]]:
        """(priority, queued jobs, oldest submission time) per priority that has any."""
        query = (
            sa.select(jobs.c.priority, sa.func.count(), sa.func.min(jobs.c.submitted_at))
            .where(jobs.c.state == JobState.QUEUED.value)
            .group_by(jobs.c.priority)
        )
        async with self.engine.connect() as conn:
            return [(p, int(n), float(t)) for p, n, t in await conn.execute(query)]

    async def count_jobs(self) -> dict[str, int]:
        """Jobs per state."""
        query = sa.select(jobs.c.state, sa.func.count()).group_by(jobs.c.state)
        async with self.engine.connect() as conn:
            return {state: count for state, count in await conn.execute(query)}

    async def lanes(self) -> dict[str, DeviceSelector]:
        """Every selector jobs were ever submitted with, by lane key."""
        async with self.engine.connect() as conn:
            rows = await conn.execute(sa.select(lanes.c.key, lanes.c.selector))
            return {key: DeviceSelector.model_validate(sel) for key, sel in rows}

    async def claim_job(
        self, device_id: str, lane_keys: Sequence[str], owner: str, ttl: float
    ) -> Lease | None:
        """Lease the best queued job of the given lanes for device_id, or None if none waits."""
        now = time.time()
        token = uuid.uuid4().hex
        async with self.engine.begin() as conn:
            best = await self._peek(conn, lane_keys, now)
            if best is None:
                return None
            row = (
                await conn.execute(
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
                )
            ).first()
            if row is None:
                return None
            await append_job_event(
                conn,
                self.host,
                row.id,
                "leased",
                "leased",
                {"device_id": device_id, "host": owner, "attempt": row.attempts},
            )
        return Lease(_job(row), token)

    async def _peek(
        self, conn: AsyncConnection, lane_keys: Sequence[str], now: float
    ) -> int | None:
        # The head of each lane is the first entry of ix_jobs_dispatch: one index seek per
        # lane, so the cost stays flat however long the queue grows. Heads another host is
        # claiming right now are skipped, not waited for; they stay locked until we commit.
        heads = []
        for key in lane_keys:
            row = (
                await conn.execute(
                    sa.select(jobs.c.seq, jobs.c.priority, jobs.c.fair_rank)
                    .where(
                        jobs.c.state == JobState.QUEUED.value,
                        jobs.c.lane == key,
                        jobs.c.not_before <= now,
                    )
                    .order_by(jobs.c.priority.desc(), jobs.c.fair_rank, jobs.c.seq)
                    .limit(1)
                    .with_for_update(skip_locked=True)
                )
            ).first()
            if row is not None:
                heads.append((-row.priority, row.fair_rank, row.seq))
        return min(heads)[2] if heads else None

    async def heartbeat(self, job_id: str, token: str, ttl: float) -> tuple[bool, bool]:
        """Extend a lease. Returns (still_held, cancel_requested)."""
        async with self.engine.begin() as conn:
            result = await conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.lease_token == token)
                .where(jobs.c.state.in_(ACTIVE_STATES))
                .values(lease_expires=time.time() + ttl)
                .returning(jobs.c.cancel_requested)
            )
            row = result.first()
        return (row is not None, bool(row.cancel_requested) if row else False)

    async def mark_running(self, job_id: str, token: str) -> bool:
        return await self._move(
            job_id,
            token,
            JobState.RUNNING,
            ("running", {}),
            from_states=("leased",),
            started_at=time.time(),
        )

    async def finish_job(self, job_id: str, token: str, state: JobState, error: str = "") -> bool:
        """Move a held job to a terminal state; False if the lease was lost meanwhile."""
        assert state.terminal
        return await self._move(
            job_id,
            token,
            state,
            ("finished", {"error": error}),
            error=error,
            finished_at=time.time(),
        )

    async def requeue_job(
        self, job_id: str, token: str, error: str, delay: float = 0.0, refund: bool = False
    ) -> bool:
        """Put a held job back in the queue (after `delay` s); `refund` forgives the attempt."""
        extra: dict[str, Any] = {"attempts": jobs.c.attempts - 1} if refund else {}
        return await self._move(
            job_id,
            token,
            JobState.QUEUED,
            ("requeued", {"reason": error, "retry_in_s": delay, "attempt_counted": not refund}),
            error=error,
            not_before=time.time() + delay,
            device_id="",
            lease_owner="",
            lease_token="",
            **extra,
        )

    async def _move(
        self,
        job_id: str,
        token: str,
        state: JobState,
        event: tuple[str, dict[str, Any]],
        from_states: Sequence[str] = (),
        **values: Any,
    ) -> bool:
        # Only moves the state machine allows, from states the caller's lease can be in.
        from_states = from_states or [s for s in ACTIVE_STATES if can_move(JobState(s), state)]
        assert all(can_move(JobState(old), state) for old in from_states), (from_states, state)
        async with self.engine.begin() as conn:
            result = await conn.execute(
                jobs.update()
                .where(
                    jobs.c.id == job_id,
                    jobs.c.lease_token == token,
                    jobs.c.state.in_(from_states),
                )
                .values(state=state.value, **values)
            )
            if result.rowcount != 1:
                return False
            await append_job_event(conn, self.host, job_id, event[0], state.value, event[1])
        return True

    async def request_cancel(self, job_id: str) -> Job | None:
        """Cancel a queued job at once; flag an active one for its runner. None if unknown."""
        async with self.engine.begin() as conn:
            cancelled = await conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.state == JobState.QUEUED.value)
                .values(
                    state=JobState.CANCELLED.value,
                    finished_at=time.time(),
                    error="cancelled while queued",
                    cancel_requested=True,
                )
            )
            flagged = await conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.state.in_(ACTIVE_STATES))
                .where(jobs.c.cancel_requested.is_(False))
                .values(cancel_requested=True)
                .returning(jobs.c.state)
            )
            if cancelled.rowcount == 1:
                error = {"error": "cancelled while queued"}
                await append_job_event(conn, self.host, job_id, "finished", "cancelled", error)
            elif (state := flagged.scalar()) is not None:
                await append_job_event(conn, self.host, job_id, "cancel_requested", state, {})
        return await self.get_job(job_id)

    async def expire_leases(self, now: float | None = None, owner: str = "") -> list[Job]:
        """Requeue (or fail, when out of attempts) every job whose lease ran out, or, with
        `owner`, every lease that owner holds (a restarted host's leases are all dead)."""
        now = time.time() if now is None else now
        moved = []
        query = sa.select(jobs).where(jobs.c.state.in_(ACTIVE_STATES))
        if owner:
            query = query.where(jobs.c.lease_owner == owner)
        else:
            query = query.where(jobs.c.lease_expires < now)
        async with self.engine.begin() as conn:
            rows = (await conn.execute(query.with_for_update(skip_locked=True))).all()
            for row in rows:
                held_by = f"lease held by {row.lease_owner} expired"
                if row.cancel_requested:
                    values = {"state": "cancelled", "error": f"{held_by}; cancelled"}
                elif row.attempts >= row.max_attempts:
                    values = {
                        "state": "failed",
                        "error": f"{held_by} on attempt {row.attempts}; no attempts left",
                    }
                else:
                    values = {"state": "queued", "error": f"{held_by}; requeued"}
                finished = now if values["state"] != "queued" else None
                await conn.execute(
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
                kind = "requeued" if values["state"] == "queued" else "finished"
                detail = {"reason" if kind == "requeued" else "error": values["error"]}
                await append_job_event(conn, self.host, row.id, kind, values["state"], detail)
                moved.append(row.id)
        return [job for job_id in moved if (job := await self.get_job(job_id))]

    # Outbox ---------------------------------------------------------------------------------

    async def outbox_pending(self, limit: int = 100) -> list[OutboxRow]:
        """This host's undelivered messages, oldest first."""
        async with self.engine.connect() as conn:
            return await outbox_mod.pending(conn, self.host, limit)

    async def outbox_done(self, ids: Sequence[int]) -> None:
        """Forget delivered messages."""
        if ids:
            async with self.engine.begin() as conn:
                await conn.execute(outbox_table.delete().where(outbox_table.c.id.in_(list(ids))))

    async def outbox_append(self, stream: str, key: str, body: dict[str, Any]) -> None:
        async with self.engine.begin() as conn:
            await outbox_mod.append(conn, self.host, stream, key, body)

    async def outbox_depth(self) -> int:
        async with self.engine.connect() as conn:
            query = sa.select(sa.func.count()).where(outbox_table.c.host == self.host)
            return int(await conn.scalar(query) or 0)

    # Iterations -----------------------------------------------------------------------------

    async def add_iteration(self, iteration: Iteration) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                iterations.insert().values(
                    job_id=iteration.job_id,
                    attempt=iteration.attempt,
                    idx=iteration.index,
                    record=iteration.model_dump(mode="json"),
                )
            )
            data = iteration.model_dump(
                mode="json", include={"attempt", "index", "warmup", "values", "error", "device_id"}
            )
            await append_job_event(conn, self.host, iteration.job_id, "iteration", "running", data)

    async def iterations(self, job_id: str, attempt: int | None = None) -> list[Iteration]:
        """Raw iterations of a job (one attempt, or every attempt), in order."""
        query = sa.select(iterations.c.record).where(iterations.c.job_id == job_id)
        if attempt is not None:
            query = query.where(iterations.c.attempt == attempt)
        query = query.order_by(iterations.c.attempt, iterations.c.idx)
        async with self.engine.connect() as conn:
            return [Iteration.model_validate(r) for r in await conn.scalars(query)]

    # Devices --------------------------------------------------------------------------------

    async def upsert_device(self, device: Device) -> Device:
        """Record a device as seen now; the stored admin state wins over the given one."""
        async with self.engine.begin() as conn:
            admin = await conn.scalar(sa.select(devices.c.admin).where(devices.c.id == device.id))
            if admin is not None:
                device = device.model_copy(update={"admin": AdminState(admin)})
            values = {
                "host": device.host,
                "record": device.model_dump(mode="json"),
                "state": device.state.value,
                "admin": device.admin.value,
                "updated_at": time.time(),
            }
            if admin is None:
                await conn.execute(devices.insert().values(id=device.id, **values))
            else:
                await conn.execute(
                    devices.update().where(devices.c.id == device.id).values(**values)
                )
        return device

    async def set_admin(self, device_id: str, admin: AdminState) -> Device | None:
        async with self.engine.begin() as conn:
            record = await conn.scalar(sa.select(devices.c.record).where(devices.c.id == device_id))
            if record is None:
                return None
            device = Device.model_validate(record).model_copy(update={"admin": admin})
            await conn.execute(
                devices.update()
                .where(devices.c.id == device_id)
                .values(admin=admin.value, record=device.model_dump(mode="json"))
            )
        return device

    async def list_devices(self, host: str | None = None) -> list[Device]:
        query = sa.select(devices.c.record).order_by(devices.c.id)
        if host is not None:
            query = query.where(devices.c.host == host)
        async with self.engine.connect() as conn:
            return [Device.model_validate(r) for r in await conn.scalars(query)]

    async def get_device(self, device_id: str) -> Device | None:
        async with self.engine.connect() as conn:
            record = await conn.scalar(sa.select(devices.c.record).where(devices.c.id == device_id))
        return Device.model_validate(record) if record is not None else None

    async def active_job_on(self, device_id: str) -> str | None:
        async with self.engine.connect() as conn:
            return await conn.scalar(
                sa.select(jobs.c.id).where(
                    jobs.c.device_id == device_id, jobs.c.state.in_(ACTIVE_STATES)
                )
            )


def _job(row: Any) -> Job:
    return Job(
        id=row.id,
        spec=TestSpec.model_validate(row.spec),
        state=JobState(row.state),
        submitter=row.submitter,
        attempts=row.attempts,
        error=row.error,
        device_id=row.device_id,
        lease_owner=row.lease_owner,
        cancel_requested=row.cancel_requested,
        submitted_at=_ts(row.submitted_at) or datetime.now(UTC),
        started_at=_ts(row.started_at),
        finished_at=_ts(row.finished_at),
    )


def _configure_sqlite(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _: Any) -> None:
        # Take transaction control from the driver so that every transaction can BEGIN
        # IMMEDIATE: writers queue on the busy timeout instead of failing with "locked".
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")  # an acknowledged submit survives power loss
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _safe_url(engine: AsyncEngine) -> str:
    return engine.url.render_as_string(hide_password=True)
