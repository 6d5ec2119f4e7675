"""What every part of the store shares: errors, leases, row conversion, the engine."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from labd.errors import LabdError
from labd.events import Event, EventBus
from labd.model import (
    STORED,
    Device,
    DeviceSelector,
    Job,
    JobState,
    TestSpec,
)
from labd.store.clock import LabClock

T = TypeVar("T")


class StoreError(LabdError):
    """The database refused or could not be reached."""


class JobConflict(StoreError):
    """A job id was submitted again with a different spec."""

    exit_code = 2


class DeviceTaken(StoreError):
    """Another host recorded the device in the same moment (two hosts offering one id)."""


@dataclass(frozen=True)
class Lease:
    """A claimed job: only the holder of the token may move it on."""

    job: Job
    token: str
    # The device the previous attempt failed on (its error is job.error), "" for none.
    failed_on: str = ""


def _ts(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def spec_hash(spec: TestSpec) -> str:
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()


def lane_key(selector: DeviceSelector, scenario: str) -> str:
    """Jobs with equal selectors and the same scenario share a queue lane."""
    return hashlib.sha256(f"{selector.key()}\n{scenario}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Lane:
    """A queue lane: which devices its jobs fit, and the scenario they need of the driver."""

    selector: DeviceSelector
    scenario: str  # "" only for lanes written before scenarios were matched: any driver

    def fits(self, device: Device, scenarios: Collection[str]) -> bool:
        """Whether `device`, whose driver offers `scenarios`, can run this lane's jobs."""
        return self.selector.matches(device) and (
            not self.scenario or self.scenario in scenarios
        )


def row_to_job(row: Any) -> Job:
    """A jobs table row as the domain model."""
    return Job(
        id=row.id,
        spec=TestSpec.model_validate(row.spec, context=STORED),
        state=JobState(row.state),
        submitter=row.submitter,
        attempts=row.attempts,
        error=row.error,
        device_id=row.device_id,
        lease_owner=row.lease_owner,
        cancel_requested=row.cancel_requested,
        submitted_at=_ts(row.submitted_at) or datetime.now(UTC),
        queue_deadline=_ts(row.queue_deadline),
        started_at=_ts(row.started_at),
        finished_at=_ts(row.finished_at),
    )


class StoreBase:
    """The engine and the host whose outbox rows a store writes; the parts below use them."""

    engine: AsyncEngine
    dialect: str
    host: str
    known_lanes: set[str]  # lanes this process has committed (lanes are never deleted)
    sqlite_thread: SqliteThread | None
    bus: EventBus | None  # where the events of committed changes are published
    clock: LabClock  # every time another host compares is written by it

    def announce(self, events: Sequence[Event]) -> None:
        """Publish on the bus the events of a transaction that has just committed."""
        if self.bus is not None:
            for event in events:
                self.bus.publish(event)

    async def write(self, work: Callable[[sa.Connection], T]) -> T:
        """Run `work` in one write transaction. On SQLite the whole transaction is one hop to
        labd's SQLite writer thread (through aiosqlite every statement costs three or four);
        elsewhere it runs on the async engine."""
        if self.sqlite_thread is not None:
            return await self.sqlite_thread.run(work, write=True)
        async with self.engine.begin() as conn:
            return await conn.run_sync(work)

    async def read(self, work: Callable[[sa.Connection], T]) -> T:
        """Run `work` in one read-only transaction, in one hop like `write`."""
        if self.sqlite_thread is not None:
            return await self.sqlite_thread.run(work, write=False)
        async with self.engine.connect() as conn:
            return await conn.run_sync(work)


class SqliteThread:
    """Whole transactions for SQLite, each in one hop from the event loop: writes on one
    thread with one synchronous connection, so labd's writers queue here rather than sleep in
    SQLite's busy handler for each other; reads on another, so they never queue behind a
    write's fsync."""

    def __init__(self, writer: sa.Engine, reader: sa.Engine) -> None:
        self.writer, self.reader = writer, reader
        self._writes = ThreadPoolExecutor(1, thread_name_prefix="labd-sqlite-write")
        self._reads = ThreadPoolExecutor(1, thread_name_prefix="labd-sqlite-read")

    async def run(self, work: Callable[[sa.Connection], T], write: bool) -> T:
        loop = asyncio.get_running_loop()
        if write:
            return await loop.run_in_executor(self._writes, _in_transaction, self.writer, work)
        return await loop.run_in_executor(self._reads, _in_transaction, self.reader, work)

    def close(self) -> None:
        self._writes.shutdown(wait=True)
        self._reads.shutdown(wait=True)
        self.writer.dispose()
        self.reader.dispose()


def _in_transaction(engine: sa.Engine, work: Callable[[sa.Connection], T]) -> T:
    with engine.begin() as conn:
        return work(conn)
