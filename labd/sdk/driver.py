"""The driver interface: a platform plugin finds its devices, checks their health, offers
scenarios and provides what those scenarios bind to. Drivers register in the `labd.drivers`
entry-point group, so a lab adds its own without touching labd."""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Generic

from pydantic import BaseModel
from typing_extensions import TypeVar

from labd.model import Device
from labd.sdk.bindings import PluginError, Resources
from labd.sdk.generic import NoOptions, options_class
from labd.sdk.inputs import DesktopInput, TouchInput
from labd.sdk.scenario import Scenario

OptionsT = TypeVar("OptionsT", bound=BaseModel, default=Any)


class Driver(ABC, Generic[OptionsT]):
    """A platform plugin. `class Phones(Driver[PhoneOptions])` types `self.options` and sets
    `Phones.Options`, which `[drivers.<name>]` is validated against.

    `scenario_types` lists the scenarios it offers; `provides` maps each protocol it provides
    to the name of the method that makes one for a device (`{MarkerStream: "logcat"}`).
    Those methods are called on the event loop when a job starts: they must return at once
    (a handle that connects when the scenario opens it), never wait on a device.
    """

    name: ClassVar[str]
    platform: ClassVar[str]
    Options: ClassVar[type[BaseModel]] = NoOptions
    version: ClassVar[str] = "0"
    scenario_types: ClassVar[tuple[type[Scenario], ...]] = ()
    provides: ClassVar[Mapping[type, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.Options = options_class(cls, Driver, "Options")

    def __init__(self, options: OptionsT, host: str) -> None:
        self.options = options
        self.host = host
        # Where labd keeps its state and its jobs' folders; labd sets it before the driver
        # is first asked anything (a driver checks free space there, not in labd's cwd).
        self.state_dir = Path.cwd()

    @abstractmethod
    async def discover(self) -> list[Device]:
        """The devices reachable now (called periodically: hot-plug shows up here)."""

    async def health(self, device: Device) -> str | None:
        """None when the device is healthy, else the reason it is not."""
        return None

    def why_absent(self, device_id: str) -> str | None:
        """Why a device the last discover() left out is not there, when the driver knows (a
        phone that has not accepted this computer's key, its server down); None: vanished."""
        return None

    def waiting(self) -> Mapping[str, str]:
        """Devices the last discover() saw and could not offer yet, by id, with what to do (a
        phone that has not accepted this computer's key): listed offline until it offers
        them, so an administrator sees them."""
        return {}

    def scenarios(self) -> Mapping[str, type[Scenario]]:
        """The scenarios this driver can run, by name (by default `scenario_types`)."""
        return {scenario.name: scenario for scenario in self.scenario_types}

    def resources(self, device: Device) -> Resources:
        """What this driver provides for `device`, where scenarios' bindings are resolved."""
        providers = {
            protocol: functools.partial(getattr(self, method), device)
            for protocol, method in self.provides.items()
        }
        return Resources(self.name, device.id, providers)

    def input(self, device: Device) -> DesktopInput | TouchInput:
        """The device's keyboard and pointer, or touch screen (blocking calls: use it from a
        thread, or through labd.sdk.Controller)."""
        raise PluginError(f"driver {self.name!r} offers no input for device {device.id}")

    async def conditions(self, device: Device) -> dict[str, Any]:
        """What the device is like right now, read before and after every iteration: load,
        CPU frequency and governor, temperatures, thermal-throttle counters or status. Keys
        the runner judges: load_1m and cpus, throttle_count, temperature_c, governor,
        thermal_status, battery_temp_c; others are recorded."""
        return {}

    async def expose_port(self, device: Device, host: str, port: int) -> str:
        """Make a server on this host reachable from the device; the host:port the device
        uses (Android: `adb reverse`). By default the device reaches it where it listens."""
        return f"{host}:{port}"

    async def close(self) -> None:
        """Release what the driver holds (connections, servers)."""
