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
