"""Power control: the cure for a device that stopped answering (labgrid's PowerProtocol).
Plugins register in the `labd.power` entry-point group; `[pool.power.<device>]` picks one
per device and gives it its options."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic

from pydantic import BaseModel
from typing_extensions import TypeVar

from labd.sdk.generic import NoOptions, options_class

OptionsT = TypeVar("OptionsT", bound=BaseModel, default=Any)


class PowerControl(ABC, Generic[OptionsT]):
    """Switches one device's power: a relay channel, a smart plug, a USB hub port.

    `class Relay(PowerControl[RelayOptions])` gets `self.options` typed as RelayOptions and
    `Relay.Options` set to RelayOptions, which labd validates the configuration against."""

    Options: ClassVar[type[BaseModel]] = NoOptions

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.Options = options_class(cls, PowerControl, "Options")

    def __init__(self, options: OptionsT) -> None:
        self.options = options

    @abstractmethod
    async def on(self) -> None: ...

    @abstractmethod
    async def off(self) -> None: ...

    async def cycle(self, off_seconds: float) -> None:
        """Off, wait, on."""
        await self.off()
        await asyncio.sleep(off_seconds)
        await self.on()

    async def close(self) -> None:
        """Release the port or connection."""
