"""An X11 display as the page-load scenario's Desktop: XTEST input, mss capture, browsers
started on the display with Linux's stabilisation between fork and exec, the end screen as an
override-redirect window (shown at once, the same in every browser)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Collection, Mapping
from pathlib import Path

import mss
import numpy as np

from labd.capture import SourceSpec
from labd.process import child_setup, split_cpus, user_arguments
from labd.sdk import Image, RunAs
from labd_x11.xinput import X11Input

RGB = tuple[int, int, int]
GROUP_EXIT_S = 5.0  # how long a killed browser group may take to be gone


class X11Desktop:
    stabilisers = frozenset({"exclusive_cpu", "no_aslr"})

    def __init__(self, display: str, size: tuple[int, int]) -> None:
        self.display = display
        self.size = size
        self.x11: X11Input | None = None

    def open(self) -> X11Input:
        if self.x11 is None:
            self.x11 = X11Input(self.display)
        return self.x11

    def capture(self, fps: float) -> SourceSpec:
        return SourceSpec("x11", self.display, fps=fps)

    def screenshot(self) -> Image:
        with mss.MSS(display=self.display) as screen:
            shot = np.asarray(screen.grab(screen.monitors[0]))
        return shot[::4, ::4, :3].copy()  # BGRA: every 4th pixel, no alpha

    def split_cpus(self) -> tuple[set[int], set[int]]:
        return split_cpus()

    def start(
        self,
        argv: list[str],
        profile: Path,
        cpus: Collection[int] | None,
        no_aslr: bool,
        run_as: RunAs | None,
        env: Mapping[str, str],
    ) -> subprocess.Popen[bytes]:
        if run_as is not None:  # never a browser as root: the profile is its home
            for path in (profile, *profile.iterdir()):
                run_as.give(path)
        return subprocess.Popen(
            argv,
            env={**env, "DISPLAY": self.display},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its helper processes die with it (killpg)
            # Also dies with this worker thread of the loop's executor, which lives as long as
            # the loop: a killed labd leaves no browser behind.
            preexec_fn=child_setup(cpus, no_aslr, run_as),
            **user_arguments(run_as),
        )

    def has_window(self, pid: int) -> bool:
        """Any viewable window: a display labd's browser has to itself (an Xvfb of its own);
        browsers do not reliably set _NET_WM_PID, so the window is not matched to `pid`."""
        return bool(self.open().windows())

    def stop(self, process: subprocess.Popen[bytes]) -> None:
        # The whole group, even when the browser itself has gone (a crash): its helper
        # processes must not outlive it and load the next measurement.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)
        # A killed process takes a moment to exit (a browser's many threads, a loaded host):
        # return once the whole group is gone, so nothing of it runs into the next iteration.
        deadline = time.monotonic() + GROUP_EXIT_S
        while time.monotonic() < deadline:
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.02)

    def overlay(self, rgb: RGB) -> None:
        self.open().overlay(rgb)

    def remove_overlays(self) -> None:
        self.open().remove_overlays()

    def close(self) -> None:
        if self.x11 is not None:
            self.x11.close()
            self.x11 = None
