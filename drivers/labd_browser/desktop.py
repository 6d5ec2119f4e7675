"""What the page-load scenario needs from a platform: a desktop a browser runs on.

X11 (labd_x11.X11Desktop) and Windows (labd_windows.WindowsDesktop) implement it; a driver
provides one per device (`provides = {Desktop: "desktop"}`). Making one does no I/O; every
method blocks (a display server, a process), so the scenario calls them on a thread.
"""

from __future__ import annotations

import subprocess
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from labd.sdk import CaptureSource, DesktopInput, Image, RunAs

RGB = tuple[int, int, int]


@runtime_checkable
class Desktop(Protocol):
    @property
    def size(self) -> tuple[int, int]:
        """Width and height in pixels (known from discovery: no I/O)."""

    @property
    def stabilisers(self) -> frozenset[str]:
        """Which of exclusive_cpu and no_aslr this platform applies to a browser."""

    def open(self) -> DesktopInput:
        """Connect; the desktop's keyboard and mouse."""

    def capture(self, fps: float) -> CaptureSource:
        """The screen as a capture source, for labd.capture.Recorder."""

    def screenshot(self) -> Image:
        """The screen now, every 4th pixel (BGR): enough to see a change, cheap enough to
        poll while a page loads."""

    def split_cpus(self) -> tuple[set[int], set[int]]:
        """(the browser's CPUs, everyone else's), for exclusive_cpu."""

    def start(
        self,
        argv: list[str],
        profile: Path,
        cpus: Collection[int] | None,
        no_aslr: bool,
        run_as: RunAs | None,
        env: Mapping[str, str],
    ) -> subprocess.Popen[bytes]:
        """The browser, started on this desktop (with its helpers in a group of their own)
        with `env` (labd.process.program_env: none of labd's own variables) and what the
        desktop itself needs (its display)."""

    def has_window(self, pid: int) -> bool:
        """The browser started as `pid` shows a window."""

    def stop(self, process: subprocess.Popen[bytes]) -> None:
        """The browser and its helper processes, ended."""

    def overlay(self, rgb: RGB) -> None:
        """One colour over the whole screen, above everything, at once: the end screen."""

    def remove_overlays(self) -> None: ...

    def close(self) -> None:
        """Disconnect (overlays removed)."""
