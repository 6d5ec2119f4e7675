"""A driver for tests whose scenario does what its parameters say: a real implementation of
the driver interface (not a mock), so the scheduler, pool and runner run unchanged."""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from labd.capture import CaptureError
from labd.errors import InfrastructureError, TestFailure, UsageError
from labd.sdk import Device, Driver, MetricSpec, NoOptions, PowerControl, Scenario


class ScriptParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sleep_s: float = 0.0
    value: float = 1.0
    step: float = 1.0  # iteration i returns value + step * i
    infra_failures: int = 0  # the first N attempts fail with an InfrastructureError
    fail_iteration: int = -1  # this iteration raises TestFailure
    bad_key_iteration: int = -1  # this iteration gives the device a key it has no name for
    capture_lost_attempts: int = 0  # the first N attempts lose the screen capture mid-run
    disk_full_attempts: int = 0  # the first N attempts find no space left (ENOSPC) to write
    read_only_attempts: int = 0  # the first N attempts find the job's folder read-only
    timeout_attempts: int = 0  # the first N attempts time out talking to the device
    bug: bool = False  # every iteration raises a plain exception, as a scenario's bug does
    bug_message: str = "scripted bug"
    env: dict[str, str] = {}  # unused: there to hold secrets that answers must redact


class ScriptScenario(Scenario):
    name = "script"
    Params = ScriptParams
    default_metrics = (MetricSpec(name="value", unit="ms"),)

    async def setup(self) -> None:
        p = self.params
        assert isinstance(p, ScriptParams)
        if self.ctx.attempt <= p.infra_failures:
            raise InfrastructureError(f"device fell over (attempt {self.ctx.attempt})")
        if self.ctx.attempt <= p.disk_full_attempts:
            raise OSError(errno.ENOSPC, "No space left on device", "capture.mkv")
        if self.ctx.attempt <= p.read_only_attempts:
            raise OSError(errno.EROFS, "Read-only file system", str(self.ctx.workdir))
        if self.ctx.attempt <= p.timeout_attempts:
            raise TimeoutError("the device did not answer")
        self.ctx.fingerprint["stabilisation"] = {"scripted": True}

    async def run_iteration(self, index: int) -> dict[str, float]:
        p = self.params
        assert isinstance(p, ScriptParams)
        await asyncio.sleep(p.sleep_s)
        if index == p.fail_iteration:
            raise TestFailure("scripted failure")
        if p.bug:
            raise RuntimeError(p.bug_message)
        if index == 1 and self.ctx.attempt <= p.capture_lost_attempts:
            raise CaptureError("capture.avi: X11 display ':0': cannot open it")
        if index == p.bad_key_iteration:
            raise UsageError("key 'Page_Dwn': no key named 'Page_Dwn'")
        return {"value": p.value + p.step * index}


class ScriptedDriver(Driver):
    name = "scripted"
    platform = "scripted"

    def __init__(self, ids: list[str], host: str = "test-host") -> None:
        super().__init__(NoOptions(), host)
        self.ids = list(ids)
        self.unhealthy: dict[str, str] = {}

    async def discover(self) -> list[Device]:
        return [
            Device(id=i, driver=self.name, platform=self.platform, host=self.host, tags=["fake"])
            for i in self.ids
        ]

    async def health(self, device: Device) -> str | None:
        return self.unhealthy.get(device.id)

    def scenarios(self) -> Mapping[str, type[Scenario]]:
        return {"script": ScriptScenario}


class NapScenario(Scenario):
    name = "nap"

    async def run_iteration(self, index: int) -> dict[str, float]:
        return {"napped": 1.0}


class NappingDriver(ScriptedDriver):
    """A second platform whose driver offers only the `nap` scenario."""

    name = "napping"
    platform = "napping"

    def scenarios(self) -> Mapping[str, type[Scenario]]:
        return {"nap": NapScenario}


class RecordingPower(PowerControl):
    """Power control that records what it was told, and can cure a device when cycled."""

    def __init__(self, on_cycle: object = None, broken: str = "") -> None:
        super().__init__(NoOptions())
        self.calls: list[str] = []
        self.on_cycle = on_cycle
        self.broken = broken  # the relay answers every switch with this error

    async def on(self) -> None:
        self.calls.append("on")
        if self.broken:
            raise InfrastructureError(self.broken)
        if callable(self.on_cycle):
            self.on_cycle()

    async def off(self) -> None:
        self.calls.append("off")
        if self.broken:
            raise InfrastructureError(self.broken)
