"""What every part of the store shares: errors, leases, row conversion, the engine."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from labd.errors import LabdError
from labd.model import (
    DeviceSelector,
    Job,
    JobState,
    TestSpec,
)


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


def row_to_job(row: Any) -> Job:
    """A jobs table row as the domain model."""
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


class StoreBase:
    """The engine and the host whose outbox rows a store writes; the parts below use them."""

    engine: AsyncEngine  # transactions that write
    reader: AsyncEngine  # reads (SQLite: without the write lock)
    dialect: str
    host: str
