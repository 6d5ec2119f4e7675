"""The machine labd runs on, offered as one device (or several slots of it)."""

from __future__ import annotations

import asyncio
import os
import platform
import socket
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, model_validator

from labd.sdk import OPTIONAL_ID_PATTERN, Device, Driver
from labd_host.command import CommandScenario
from labd_host.probe import conditions, cpu_model

log = structlog.get_logger("labd.host")


class HostOptions(BaseModel):
    """Options of the host driver (`[drivers.host]`)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="Offer this machine as a device.")
    id: str = Field(
        "", pattern=OPTIONAL_ID_PATTERN, description="Device id; empty means host-<hostname>."
    )
    slots: int = Field(
        1, ge=1, le=256, description="Jobs that may run at once (more than 1 adds noise)."
    )
    tags: list[str] = Field(default_factory=list, description="Tags for device selectors.")

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        # Read no more, said, and not refused: refused, an upgraded lab whose configuration
        # came from the previous `labd config example` did not start (systemd retried forever).
        if isinstance(data, dict) and "min_free_disk_mb" in data:
            data = {k: v for k, v in data.items() if k != "min_free_disk_mb"}
            log.warning(
                "[drivers.host] min_free_disk_mb is no longer read; remove it",
                hint="a full state directory pauses leasing on every device below [scheduler] "
                "min_free_mb, and no longer marks the host unhealthy",
            )
        return data


class HostDriver(Driver[HostOptions]):
    name = "host"
    platform = "host"
    version = "1"
    scenario_types = (CommandScenario,)

    async def discover(self) -> list[Device]:
        base, slots = self.options.id or f"host-{socket.gethostname()}", self.options.slots
        ids = [base] if slots == 1 else [f"{base}-{n}" for n in range(slots)]
        return [
            Device(
                id=device_id,
                driver=self.name,
                platform=self.platform,
                model=cpu_model(),
                os_version=platform.release(),
                tags=list(self.options.tags),
                host=self.host,
                capabilities={"cpus": sorted(os.sched_getaffinity(0))},
            )
            for device_id in ids
        ]

    async def conditions(self, device: Device) -> dict[str, Any]:
        return await asyncio.to_thread(conditions)

    async def health(self, device: Device) -> str | None:
        # Free space is the scheduler's to watch (scheduler.min_free_mb): a full disk is
        # this host's state, freed by an operator, not a fault to quarantine the device for.
        return None
