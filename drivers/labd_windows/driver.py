"""The Windows driver: the desktop of the machine labd runs on, when that is Windows, as one
device running page loads (no device anywhere else)."""

from __future__ import annotations

import platform
import socket
import sys
from typing import ClassVar

import structlog
from pydantic import BaseModel, ConfigDict, Field

from labd.sdk import OPTIONAL_ID_PATTERN, Device, Driver
from labd_browser import Desktop, PageLoad
from labd_windows.desktop import WindowsDesktop
from labd_windows.input import WindowsInput
from labd_windows.win32 import Win32, Win32Api

log = structlog.get_logger("labd.windows")


class WindowsOptions(BaseModel):
    """Options of the Windows driver (`[drivers.windows]`)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="Offer this Windows desktop as a device.")
    id: str = Field(
        "", pattern=OPTIONAL_ID_PATTERN, description="Device id; empty means windows-<hostname>."
    )
    tags: list[str] = Field(default_factory=list, description="Tags for device selectors.")


class WindowsDriver(Driver[WindowsOptions]):
    name = "windows"
    platform = "windows"
    version = "1"
    scenario_types = (PageLoad,)
    provides: ClassVar = {Desktop: "desktop"}

    def __init__(self, options: WindowsOptions, host: str, api: Win32Api | None = None) -> None:
        """`api`: the Win32 calls (by default the real ones, on Windows; none elsewhere)."""
        super().__init__(options, host)
        if api is None and sys.platform == "win32":
            api = Win32()
        self.api = api
        if api is None and options.model_fields_set - {"enabled"}:
            # Configured on purpose (an id, tags) on a machine that is not Windows: said once,
            # or the lab waits for a device that never comes, without a word.
            log.warning(
                "the windows driver offers no device here",
                platform=sys.platform,
                hint="it drives the desktop of the Windows machine labd runs on; run labd "
                "there (configured: " + ", ".join(sorted(options.model_fields_set)) + ")",
            )

    async def discover(self) -> list[Device]:
        if self.api is None:
            return []  # not Windows: no desktop of that kind here
        width, height = self.api.screen_size()
        return [
            Device(
                id=self.options.id or f"windows-{socket.gethostname()}",
                driver=self.name,
                platform=self.platform,
                model=f"{width}x{height}",
                os_version=platform.version(),
                tags=list(self.options.tags),
                host=self.host,
                capabilities={"width": width, "height": height},
            )
        ]

    async def health(self, device: Device) -> str | None:
        return self.api.input_desktop_problem() if self.api is not None else "not Windows"

    def input(self, device: Device) -> WindowsInput:
        return WindowsInput(self._api().send, _size(device))

    def desktop(self, device: Device) -> Desktop:
        return WindowsDesktop(self._api(), _size(device))

    def _api(self) -> Win32Api:
        if self.api is None:
            raise RuntimeError("the Windows driver has no device off Windows")
        return self.api


def _size(device: Device) -> tuple[int, int]:
    return int(device.capabilities["width"]), int(device.capabilities["height"])
