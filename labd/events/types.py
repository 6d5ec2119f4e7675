"""Typed domain events. Each is named after what happened; its docstring is its contract."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field


def _now() -> datetime:
    return datetime.now(UTC)


class Event(BaseModel):
    """Base of every event: a unique id and the moment it happened (UTC)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ClassVar[str] = "event"
    event_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    time: datetime = Field(default_factory=_now)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # snake_case kind from the class name: JobQueued -> job_queued
        name = cls.__name__
        cls.kind = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
        EVENT_TYPES[cls.kind] = cls

    def serialised(self) -> dict[str, Any]:
        """The event as JSON data that `deserialise` reads back: its kind and its fields."""
        return {"event": self.kind, "fields": self.model_dump(mode="json")}


EVENT_TYPES: dict[str, type[Event]] = {}  # every event class by its kind


def deserialise(data: Any) -> Event:
    """The event `Event.serialised` wrote. An unknown kind raises KeyError, fields that do
    not fit it pydantic's ValidationError."""
    return EVENT_TYPES[data["event"]].model_validate(data["fields"])


class DaemonStarted(Event):
    """The daemon finished starting every component and is serving."""

    host: str
    version: str


class DaemonStopping(Event):
    """The daemon was asked to stop (`reason`: the signal or error) and stops taking work."""

    host: str
    reason: str


class ConfigReloaded(Event):
    """SIGHUP applied a new configuration; `pending_restart` lists keys needing a restart."""

    applied: list[str]
    pending_restart: list[str]


class ConfigRejected(Event):
    """SIGHUP found an invalid configuration; the old one stays in force."""

    problems: list[str]


class JobQueued(Event):
    """A job was accepted and persisted; it waits for a device."""

    job_id: str
    suite: str
    test: str
    submitter: str
    priority: int


class JobRejected(Event):
    """A submission was refused; `problems` names every reason, `reason` is a short code
    (invalid, unsigned, bad_signature, forbidden, rate_limited ...)."""

    job_id: str
    source: str
    problems: list[str]
    reason: str = "invalid"
    principal: str = ""  # who sent it (its signature held): a follower takes only its own


class JobLeased(Event):
    """A host leased the job for a device (attempt counts from 1)."""

    job_id: str
    device_id: str
    host: str
    attempt: int


class JobRunning(Event):
    """The host that leased the job began running it (before its scenario's set-up)."""

    job_id: str
    device_id: str
    attempt: int


class JobStarted(Event):
    """The job's scenario finished its set-up on the device; its iterations begin."""

    job_id: str
    device_id: str
    attempt: int
    total_iterations: int


class IterationDone(Event):
    """One iteration finished: its raw values, or the error it failed with."""

    job_id: str
    device_id: str
    attempt: int
    index: int
    warmup: bool
    values: dict[str, float]
    error: str
    duration_s: float = 0.0
    set_aside: bool = False  # kept out of the summaries (a time-out, a hot device ...)


class JobRequeued(Event):
    """The job goes back to the queue (infrastructure failure, expired lease, shutdown);
    `attempt` is the one that ended, and counts against the job unless `attempt_counted` is
    false (a shutdown is not the job's fault)."""

    job_id: str
    reason: str
    attempt: int
    retry_in_s: float
    attempt_counted: bool = True


class JobCancelRequested(Event):
    """Cancelling an active job was asked for; its runner stops it (`state`: the job's state
    when asked). A queued job is cancelled at once instead (JobFinished)."""

    job_id: str
    state: str


class JobFinished(Event):
    """The job reached a terminal state: succeeded, failed, cancelled or timed_out."""

    job_id: str
    state: str
    error: str
    suite: str
    test: str
    device_id: str


class DeviceChanged(Event):
    """A device appeared, vanished, or changed state (`reason` says why)."""

    device_id: str
    host: str
    platform: str
    state: str
    admin: str
    reason: str
    model: str = ""


class HealthCheckFailed(Event):
    """A device failed its periodic health check (`failures` in a row)."""

    device_id: str
    platform: str
    reason: str
    failures: int


class DevicePowerCycled(Event):
    """A device that failed its health checks was power-cycled."""

    device_id: str
    reason: str


class ChangeFound(Event):
    """A finished job differs from its baseline: `verdict` is regression or improvement, with
    the ratio of the new to the baseline location and its interval."""

    job_id: str
    baseline_job_id: str
    suite: str
    test: str
    metric: str
    verdict: str
    ratio: float
    ratio_ci_low: float
    ratio_ci_high: float
    method: str


class AccessRefused(Event):
    """A request was refused for who sent it or what it asked (`reason`: a short code such
    as bad_signature, replayed, forbidden, rate_limited) on `channel` (mqtt or http)."""

    channel: str
    reason: str
    principal: str
    action: str
    target: str
    count: int = 1  # refusals of one kind said together (messages a full inbox dropped)


class ComponentDown(Event):
    """A supervised task of the daemon failed (`error`) and restarts in `retry_in_s`."""

    component: str
    error: str
    retry_in_s: float


class ComponentUp(Event):
    """A supervised task that had failed runs again."""

    component: str


class OutboxRowSetAside(Event):
    """A queued message could not be published (`error`) and was set aside in the store."""

    stream: str
    key: str
    error: str
