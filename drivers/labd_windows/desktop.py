"""The local Windows desktop as the page-load scenario's Desktop: SendInput keys and mouse,
mss capture of the screen, the browser as a plain child process, the end screen as a topmost
window. Linux's stabilisers (a CPU of its own, no ASLR) are not applied here: recorded so."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from labd.capture import SourceSpec
from labd.sdk import CaptureSource, Image, InfrastructureError, RunAs, UsageError
from labd_windows.input import WindowsInput
from labd_windows.win32 import RGB, Win32Api

Screen = Callable[[float], CaptureSource]


def local_screen(fps: float) -> CaptureSource:
    return SourceSpec("screen", fps=fps)


class WindowsDesktop:
    stabilisers: frozenset[str] = frozenset()

    def __init__(self, api: Win32Api, size: tuple[int, int], screen: Screen = local_screen):
        self.api = api
        self.size = size
        self.screen = screen
        self.overlays: list[object] = []

    def open(self) -> WindowsInput:
        return WindowsInput(self.api.send, self.size)

    def capture(self, fps: float) -> CaptureSource:
        return self.screen(fps)

    def screenshot(self) -> Image:
        source = self.screen(1).open()
        try:
            frame = source.read()
        finally:
            source.close()
        if frame is None:
            raise InfrastructureError("the screen gave no frame")
        return frame[1][::4, ::4].copy()

    def split_cpus(self) -> tuple[set[int], set[int]]:
        raise InfrastructureError("exclusive_cpu is not applied on Windows")

    def start(
        self,
        argv: list[str],
        profile: Path,
        cpus: Collection[int] | None,
        no_aslr: bool,
        run_as: RunAs | None,
        env: Mapping[str, str],
    ) -> subprocess.Popen[bytes]:
        if run_as is not None:
            raise UsageError("policy.run_as: starting a browser as another user needs Linux")
        # Windows programs need the system's own variables (SystemRoot ...); labd's never.
        system = {k: v for k, v in os.environ.items() if not k.upper().startswith("LABD_")}
        return subprocess.Popen(
            argv,
            env=system | dict(env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0),
        )

    def has_window(self, pid: int) -> bool:
        return self.api.has_window(pid)

    def stop(self, process: subprocess.Popen[bytes]) -> None:
        if process.poll() is not None:
            return
        taskkill = shutil.which("taskkill")
        if taskkill is not None:  # the browser with its helper processes (/T: the tree)
            subprocess.run([taskkill, "/T", "/F", "/PID", str(process.pid)], capture_output=True)
        else:
            process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def overlay(self, rgb: RGB) -> None:
        self.overlays.append(self.api.overlay(rgb, self.size))

    def remove_overlays(self) -> None:
        while self.overlays:
            self.api.remove(self.overlays.pop())

    def close(self) -> None:
        self.remove_overlays()
