"""Jobs and their state machine."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from labd.model.spec import TestSpec


class JobState(StrEnum):
    QUEUED = "queued"
    LEASED = "leased"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT})

# Every legal move. Leased/running go back to queued when a lease expires or an
# infrastructure failure is retried; cancellation is legal from every live state.
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset(
        {JobState.LEASED, JobState.CANCELLED, JobState.FAILED, JobState.TIMED_OUT}
    ),
    JobState.LEASED: frozenset(
        {JobState.RUNNING, JobState.QUEUED, JobState.CANCELLED, JobState.FAILED}
    ),
    JobState.RUNNING: frozenset(
        {
            JobState.SUCCEEDED,
            JobState.FAILED,
            JobState.CANCELLED,
            JobState.TIMED_OUT,
            JobState.QUEUED,
        }
    ),
    **{state: frozenset() for state in TERMINAL},
}


def can_move(old: JobState, new: JobState) -> bool:
    return new in TRANSITIONS[old]


class Job(BaseModel):
    """A submitted test spec and where it stands."""

    model_config = ConfigDict(extra="forbid")

    id: str
    spec: TestSpec
    state: JobState
    submitter: str = ""
    attempts: int = 0
    error: str = ""  # why it ended, or why its last attempt was requeued (until the next starts)
    device_id: str = ""
    lease_owner: str = ""
    cancel_requested: bool = False
    submitted_at: datetime
    queue_deadline: datetime | None = None  # not started by then: it times out
    started_at: datetime | None = None
    finished_at: datetime | None = None
