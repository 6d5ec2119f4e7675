"""Devices: what a job can run on."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

DEVICE_ID_PATTERN = r"^[A-Za-z0-9_.:@-]+$"
_DEVICE_ID = re.compile(DEVICE_ID_PATTERN)
ID_MAX = 128
# A driver builds its devices from the outside world (serial numbers, file names), in its
# own threads too: an id the rules refuse must leave out that device, not fail the whole
# list when built. So a Device is built whatever its id, and its id is checked where a
# record enters the lab or is read back: Device.checked (the pool, the store).
_CHECKED = {"device_id_rules": True}


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

    id: str  # checked by Device.checked: see _CHECKED
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
    def _id_rules(cls, value: str, info: ValidationInfo) -> str:
        if not (info.context or {}).get("device_id_rules"):
            return value
        if not value or len(value) > ID_MAX:
            raise PydanticCustomError(
                "string_length", "a device id has 1 to {most} characters", {"most": ID_MAX}
            )
        if not _DEVICE_ID.match(value):
            raise PydanticCustomError(
                "string_pattern_mismatch",
                "String should match pattern '{pattern}'",
                {"pattern": DEVICE_ID_PATTERN},
            )
        return value

    @classmethod
    def checked(cls, record: Any) -> Self:
        """`record` as a device of the lab, its id by the rules (ValidationError if not)."""
        return cls.model_validate(record, context=_CHECKED)


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
