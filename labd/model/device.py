"""Devices: what a job can run on."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

DEVICE_ID_PATTERN = r"^[A-Za-z0-9_.:@-]+$"
_DEVICE_ID = re.compile(DEVICE_ID_PATTERN)
# Set while a driver's discover() runs: ids come from the outside world there (serial numbers,
# file names), and one the rules refuse must leave out that device, not fail the whole list
# as a Device built with it would. The pool checks every returned device again, whole.
_IDS_CHECKED_LATER: ContextVar[bool] = ContextVar("device_ids_checked_later", default=False)


@contextmanager
def ids_checked_later() -> Iterator[None]:
    """Within it, a Device is built whatever its id; check each one afterwards."""
    token = _IDS_CHECKED_LATER.set(True)
    try:
        yield
    finally:
        _IDS_CHECKED_LATER.reset(token)


class DeviceState(StrEnum):
    AVAILABLE = "available"  # healthy and idle: can take a job
    BUSY = "busy"  # running a job
    OFFLINE = "offline"  # not reachable (unplugged, failed health check)
    QUARANTINED = "quarantined"  # failed too often; an administrator must `enable` it
    MAINTENANCE = "maintenance"  # taken out by an administrator


class AdminState(StrEnum):
    """What an administrator asked for; it outlives restarts and hot-plug."""

    ENABLED = "enabled"
    DRAINING = "draining"  # finish the current job, then take no more
    MAINTENANCE = "maintenance"


class Device(BaseModel):
    """One device in the pool, as drivers describe it and the pool tracks it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=128)
    driver: str
    platform: str
    model: str = ""
    os_version: str = ""
    tags: list[str] = Field(default_factory=list)
    host: str = ""
    capabilities: dict[str, Any] = Field(default_factory=dict)
    state: DeviceState = DeviceState.AVAILABLE
    admin: AdminState = AdminState.ENABLED
    reason: str = ""  # why the device is offline or quarantined
    consecutive_failures: int = 0

    @field_validator("id")
    @classmethod
    def _id_rules(cls, value: str) -> str:
        if _DEVICE_ID.match(value) or _IDS_CHECKED_LATER.get():
            return value
        raise PydanticCustomError(
            "string_pattern_mismatch",
            "String should match pattern '{pattern}'",
            {"pattern": DEVICE_ID_PATTERN},
        )


RUNNING = "running "  # a busy device's reason: "running <job id>"


def running_reason(job_id: str) -> str:
    return RUNNING + job_id


def job_running_on(device: Device) -> str | None:
    """The job a busy device's host recorded it running, or None."""
    if device.state is not DeviceState.BUSY or not device.reason.startswith(RUNNING):
        return None
    return device.reason.removeprefix(RUNNING)


class DeviceSelector(BaseModel):
    """Which devices a job may run on; an empty field matches anything."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    platform: str = Field("", description="Platform, e.g. host, android, x11.")
    model: str = Field("", description="Device model, exact match.")
    os_version: str = Field("", description="OS version prefix, e.g. '14' matches '14.0.1'.")
    tags: list[str] = Field(default_factory=list, description="Tags the device must all have.")
    device: str = Field("", description="One device by id.")

    def matches(self, device: Device) -> bool:
        return (
            (not self.platform or self.platform == device.platform)
            and (not self.model or self.model == device.model)
            and device.os_version.startswith(self.os_version)
            and set(self.tags) <= set(device.tags)
            and (not self.device or self.device == device.id)
        )

    def key(self) -> str:
        """A stable text key: jobs with equal selectors share a queue lane."""
        return self.model_dump_json()

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in self.model_dump().items() if v]
        return " ".join(parts) or "any device"
