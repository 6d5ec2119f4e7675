"""The interfaces a driver plugin implements. Drivers register through the `labd.drivers`
entry-point group (power controllers through `labd.power`), so a lab adds its own without
touching labd."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from labd.model.device import Device
from labd.model.policy import Policy
from labd.model.spec import MetricSpec


class NoOptions(BaseModel):
    """For drivers and scenarios that take no options."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class RunContext:
    """What a scenario gets for one job on one device."""

    job_id: str
    attempt: int
    device: Device
    workdir: Path
    fingerprint: dict[str, Any] = field(default_factory=dict)
    # The job's test network when it has one: "proxy" (http://address:port the device uses),
    # "address" (host:port) and "profile".
    network: dict[str, str] = field(default_factory=dict)
    # The admin's policy: which programs and environment a job may use, and as whom.
    policy: Policy = field(default_factory=Policy)
    # Why the current iteration's values cannot be trusted: a scenario adds a reason (a
    # time-out, a poor sync), the runner flags the iteration with it; reset per iteration.
    flags: list[str] = field(default_factory=list)


class Scenario(ABC):
    """One kind of test: parameters checked at submit time, then setup, iterations, teardown.

    `run_iteration` returns raw values per metric. It raises TestFailure when the test itself
    failed and InfrastructureError when the device or driver did.
    """

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoOptions
    default_metrics: ClassVar[tuple[MetricSpec, ...]] = ()

    def __init__(self, params: BaseModel, ctx: RunContext) -> None:
        self.params = params
        self.ctx = ctx

    @classmethod
    def metric_spec(cls, name: str) -> MetricSpec | None:
        """The unit and direction of a metric this scenario reports (by default from
        `default_metrics`; scenarios whose metric names vary answer for them here)."""
        return next((m for m in cls.default_metrics if m.name == name), None)

    @classmethod
    def check(cls, params: BaseModel) -> list[str]:
        """Problems knowable at submit time beyond types (e.g. a missing program)."""
        return []

    @classmethod
    def policy_problems(cls, params: BaseModel, policy: Policy) -> list[str]:
        """What the admin's policy does not allow in these parameters (checked at submit
        time; a scenario that starts programs checks them again when it starts one)."""
        return []

    async def setup(self) -> None:
        """Prepare the device; record what was applied in `self.ctx.fingerprint`."""

    @abstractmethod
    async def run_iteration(self, index: int) -> dict[str, float]: ...

    async def teardown(self) -> None:
        """Undo setup; called even when iterations failed."""


class Driver(ABC):
    """A platform plugin: finds its devices, checks their health, offers scenarios."""

    name: ClassVar[str]
    platform: ClassVar[str]
    Options: ClassVar[type[BaseModel]] = NoOptions
    version: ClassVar[str] = "0"

    def __init__(self, options: BaseModel, host: str) -> None:
        self.options = options
        self.host = host

    @abstractmethod
    async def discover(self) -> list[Device]:
        """The devices reachable now (called periodically: hot-plug shows up here)."""

    async def health(self, device: Device) -> str | None:
        """None when the device is healthy, else the reason it is not."""
        return None

    @abstractmethod
    def scenarios(self) -> Mapping[str, type[Scenario]]:
        """The scenarios this driver can run, by name."""

    async def conditions(self, device: Device) -> dict[str, Any]:
        """What the device is like right now, read before and after every iteration: load,
        CPU frequency and governor, temperatures, thermal-throttle counters or status. Keys
        the runner judges: load_1m and cpus, throttle_count, temperature_c, governor,
        thermal_status, battery_temp_c (see labd.runner.conditions); others are recorded."""
        return {}

    async def expose_port(self, device: Device, host: str, port: int) -> str:
        """Make a server on this host reachable from the device; the host:port the device
        uses (Android: `adb reverse`). By default the device reaches it where it listens."""
        return f"{host}:{port}"

    async def close(self) -> None:
        """Release what the driver holds (connections, servers)."""


class PowerControl(ABC):
    """Switches a device's power (a relay channel, a smart plug, a USB hub port)."""

    Options: ClassVar[type[BaseModel]] = NoOptions

    def __init__(self, options: BaseModel) -> None:
        self.options = options

    @abstractmethod
    async def on(self) -> None: ...

    @abstractmethod
    async def off(self) -> None: ...

    async def cycle(self, off_seconds: float) -> None:
        """Off, wait, on: the cure for a device that stopped answering."""
        await self.off()
        await asyncio.sleep(off_seconds)
        await self.on()

    async def close(self) -> None:
        """Release the port or connection."""
