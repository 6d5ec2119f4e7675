"""The X11 driver: each configured DISPLAY is a desktop device, running page loads."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
from typing import ClassVar

import structlog
from pydantic import BaseModel, ConfigDict, Field, field_validator

from labd.process import child_setup
from labd.sdk import Device, Driver, InfrastructureError
from labd_browser import Desktop, PageLoad
from labd_x11.desktop import X11Desktop
from labd_x11.xinput import X11Input

log = structlog.get_logger("labd.x11")

MIN_SIDE, MAX_SIDE = 16, 32767  # pixels a side of a virtual screen (X's coordinates are 16-bit)


class X11Options(BaseModel):
    """Options of the X11 driver (`[drivers.x11]`)."""

    model_config = ConfigDict(extra="forbid")

    displays: list[str] = Field(
        default_factory=list, description='Displays to offer as devices, e.g. [":0", "lab-pc:0"].'
    )
    xvfb: list[str] = Field(
        default_factory=list,
        description='Virtual displays labd starts itself (Xvfb), by size, e.g. ["1280x800"]; '
        "one that stops is started again on its display.",
    )
    tags: list[str] = Field(default_factory=list, description="Tags for device selectors.")

    @field_validator("xvfb")
    @classmethod
    def _sizes(cls, sizes: list[str]) -> list[str]:
        for size in sizes:
            found = re.fullmatch(r"(\d{1,5})x(\d{1,5})", size)
            if not found or not all(MIN_SIDE <= int(n) <= MAX_SIDE for n in found.groups()):
                raise ValueError(
                    f"{size!r} is not a screen size: WIDTHxHEIGHT in pixels, each from "
                    f"{MIN_SIDE} to {MAX_SIDE}, e.g. '1280x800'"
                )
        return sizes


class X11Driver(Driver[X11Options]):
    name = "x11"
    platform = "x11"
    version = "1"
    scenario_types = (PageLoad,)
    provides: ClassVar = {Desktop: "desktop"}

    def __init__(self, options: X11Options, host: str) -> None:
        super().__init__(options, host)
        self.servers: list[tuple[subprocess.Popen[bytes], str]] = []
        self.unreachable: set[str] = set()  # configured displays not offered, already told

    async def discover(self) -> list[Device]:
        if self.options.xvfb and not self.servers:
            self.servers = [await asyncio.to_thread(start_xvfb, size) for size in self.options.xvfb]
        for n, (process, display) in enumerate(self.servers):
            if process.poll() is not None:  # it stopped (killed, crashed): the same display again
                log.warning("Xvfb stopped; starting it again", display=display,
                            exit_status=process.returncode)  # fmt: skip
                wanted = self.options.xvfb[n]
                self.servers[n] = await asyncio.to_thread(start_xvfb, wanted, display)
        devices = []
        for name in [*self.options.displays, *(display for _, display in self.servers)]:
            size = await asyncio.to_thread(_screen_size, name)
            if isinstance(size, str):  # not reachable now; discovery tries again
                if name not in self.unreachable:  # said once, not at every discovery
                    log.warning("an X11 display of [drivers.x11] is not offered: it cannot be "
                                "opened", display=name, error=size)  # fmt: skip
                    self.unreachable.add(name)
                continue
            if name in self.unreachable:
                log.info("an X11 display of [drivers.x11] can be opened again", display=name)
                self.unreachable.discard(name)
            devices.append(
                Device(
                    id=f"x11-{name.replace(':', '_')}",
                    driver=self.name,
                    platform=self.platform,
                    model=f"{size[0]}x{size[1]}",
                    tags=list(self.options.tags),
                    host=self.host,
                    capabilities={"display": name, "width": size[0], "height": size[1]},
                )
            )
        return devices

    async def health(self, device: Device) -> str | None:
        name = str(device.capabilities.get("display", ""))
        size = await asyncio.to_thread(_screen_size, name)
        return size if isinstance(size, str) else None

    async def close(self) -> None:
        for process, _ in self.servers:
            process.terminate()
            await asyncio.to_thread(process.wait, 10)
        self.servers = []

    def input(self, device: Device) -> X11Input:
        """Input for one desktop (opens the display: blocking, use from a thread)."""
        return X11Input(str(device.capabilities["display"]))

    def desktop(self, device: Device) -> Desktop:
        """The display as the page-load scenario's Desktop (connects when opened)."""
        caps = device.capabilities
        size = (int(caps.get("width", 1280)), int(caps.get("height", 800)))
        return X11Desktop(str(caps["display"]), size)


def _screen_size(name: str) -> tuple[int, int] | str:
    """(width, height) of the display's screen, or why it cannot be opened."""
    try:
        x11 = X11Input(name)
    except InfrastructureError as e:
        return str(e)
    screen = x11.display.screen()
    size = (screen.width_in_pixels, screen.height_in_pixels)
    x11.close()
    return size


def start_xvfb(size: str, display: str = "") -> tuple[subprocess.Popen[bytes], str]:
    """An Xvfb of this size ("1280x800") on `display`, or on a free one; (process, display
    name)."""
    program = shutil.which("Xvfb")
    if program is None:
        raise InfrastructureError("[drivers.x11] xvfb: Xvfb is not installed (Debian package xvfb)")
    read_end, write_end = os.pipe()
    # -displayfd: Xvfb picks a free display and writes its number once it accepts clients.
    argv = [program, *([display] if display else []), "-displayfd", str(write_end),
            "-screen", "0", f"{size}x24", "-nolisten", "tcp"]  # fmt: skip
    # Dies with this worker thread of the loop's executor, which lives as long as labd: a
    # killed labd leaves no display behind (each holds 70 MB and a display number).
    process = subprocess.Popen(
        argv, pass_fds=(write_end,), stderr=subprocess.DEVNULL, preexec_fn=child_setup(None, False)
    )
    os.close(write_end)
    with os.fdopen(read_end) as ready:
        number = ready.readline().strip()
    if not number:
        raise InfrastructureError(f"Xvfb {size} did not start (exit status {process.poll()})")
    return process, f":{number}"
