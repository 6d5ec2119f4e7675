"""A stand-in for the Windows desktop below the Win32 calls, for the Windows driver on Linux.

`FakeWin32` takes the SendInput events the driver builds (real INPUT structures, decoded here
from their fields as Windows would read them) and plays a browser on a screen: Ctrl+L, typed
text and Enter load a URL; a `data:` URL of one colour shows that colour; any other URL is a
page that draws three blocks, 150, 300 and 450 ms after Enter (the old page stays until the
first). The screen lives in a small
state file, so `ScreenFile` (a labd.sdk.CaptureSource) renders the same frames in labd's
capture process as in the scenario's own looks. Topmost windows cover the whole screen.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import numpy as np

from labd.sdk import FrameSource, Image
from labd_windows.sendinput import (
    CHAR_VK,
    INPUT,
    INPUT_KEYBOARD,
    KEYEVENTF_KEYUP,
    KEYEVENTF_UNICODE,
    NAMED_VK,
)

# What Windows calls each virtual key, lower case ("return", "page_up", "l", "."): the first
# name of a key wins ("control_l" over "control_r"); modifiers by their short names.
NAMES = {
    **{code: name.lower() for name, code in reversed(NAMED_VK.items())},
    **{code: char for char, (code, shift) in reversed(CHAR_VK.items()) if not shift},
    0x11: "ctrl", 0x10: "shift", 0x12: "alt", 0x5B: "win", 0x5C: "win",
}  # fmt: skip
MODIFIERS = {"ctrl", "shift", "alt", "win"}
CHROME_PX = 24  # the browser's own bar at the top
BLOCKS_MS = (150, 300, 450)  # when each third of the page is drawn, after Enter


@dataclass(frozen=True)
class ScreenFile:
    """The screen as a capture source: picklable, renders from the state file."""

    path: str
    width: int
    height: int
    fps: float

    def open(self) -> FrameSource:
        return _ScreenReader(self)


class _ScreenReader(FrameSource):
    def __init__(self, screen: ScreenFile) -> None:
        self.screen = screen
        self.next_tick = time.monotonic()

    def read(self) -> tuple[float, Image] | None:
        delay = self.next_tick - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        self.next_tick = max(self.next_tick + 1 / self.screen.fps, time.monotonic())
        now_ms = time.monotonic() * 1000
        state = json.loads(Path(self.screen.path).read_text())
        return now_ms, render(state, self.screen.width, self.screen.height, now_ms)


def render(state: dict[str, object], width: int, height: int, now_ms: float) -> Image:
    """BGR frame of the screen at `now_ms` (monotonic clock, shared by processes)."""
    frame = np.full((height, width, 3), 255, np.uint8)
    frame[:CHROME_PX] = (60, 60, 60)
    since = state.get("page_since")
    loading = isinstance(since, float) and now_ms - since < BLOCKS_MS[0]
    if isinstance(colour := state.get("colour"), list) and (since is None or loading):
        frame[CHROME_PX:] = colour[::-1]  # a browser shows the old page until the new paints
    elif isinstance(since, float):
        third = (width - 40) // 3
        for n, at in enumerate(BLOCKS_MS):
            if now_ms - since >= at:
                x = 20 + n * third
                frame[CHROME_PX + 20 : height - 20, x : x + third - 10] = (40 * n, 90, 200 - 50 * n)
    if isinstance(overlay := state.get("overlay"), list):
        frame[:] = overlay[::-1]
    return frame


@dataclass
class FakeWin32:
    """Win32Api for the driver: records what it was sent, keeps the screen's state."""

    state_path: Path
    size: tuple[int, int] = (320, 240)
    actions: list[tuple[str, str]] = field(default_factory=list)  # ("key", "ctrl+l"), ("text", ..)
    events: int = 0
    problem: str | None = None
    _held: set[str] = field(default_factory=set)
    _typed: str = ""
    _surrogate: int = 0
    _state: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._save()

    def screen(self, fps: float) -> ScreenFile:
        return ScreenFile(str(self.state_path), *self.size, fps)

    def screen_size(self) -> tuple[int, int]:
        return self.size

    def input_desktop_problem(self) -> str | None:
        return self.problem

    def has_window(self, pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    def overlay(self, rgb: tuple[int, int, int], size: tuple[int, int]) -> object:
        assert size == self.size
        self._state["overlay"] = list(rgb)
        self._save()
        return rgb

    def remove(self, overlay: object) -> None:
        self._state.pop("overlay", None)
        self._save()

    def send(self, events: Sequence[INPUT]) -> None:
        for event in events:
            self.events += 1
            if event.type == INPUT_KEYBOARD:
                self._key(event.ki.wVk, event.ki.wScan, event.ki.dwFlags)

    def _key(self, vk: int, scan: int, flags: int) -> None:
        up = bool(flags & KEYEVENTF_KEYUP)
        if flags & KEYEVENTF_UNICODE:
            if up:
                return
            if 0xD800 <= scan < 0xDC00:
                self._surrogate = scan
                return
            if self._surrogate:
                scan = 0x10000 + ((self._surrogate - 0xD800) << 10) + (scan - 0xDC00)
                self._surrogate = 0
            self._typed += chr(scan)
            return
        name = NAMES[vk]
        if name in MODIFIERS:
            (self._held.discard if up else self._held.add)(name)
            return
        if up:
            return
        self._flush_text()
        combo = "+".join([*sorted(self._held), name])
        self.actions.append(("key", combo))
        if combo == "ctrl+l":
            self._typed = ""
        elif combo == "return":
            self._navigate(self.actions[-2][1] if len(self.actions) > 1 else "")

    def _flush_text(self) -> None:
        if self._typed:
            self.actions.append(("text", self._typed))
            self._typed = ""

    def _navigate(self, url: str) -> None:
        if url.startswith("data:text/html"):
            found = re.search(r"background:#([0-9a-f]{6})", unquote(url))
            assert found, url
            rgb = bytes.fromhex(found.group(1))
            self._state = {"colour": list(rgb)}
        else:
            self._state = {**self._state, "page_since": time.monotonic() * 1000}
        self._save()

    def _save(self) -> None:
        temporary = self.state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self._state))
        temporary.replace(self.state_path)  # a reader never sees half a state
