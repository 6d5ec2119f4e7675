"""Touch and keys on Android through the persistent shell.

`adb shell input tap` starts an adb connection, a shell and a Java process per call (hundreds
of milliseconds). Here one shell stays open; where the device offers the input service's shell
command (`cmd input`, Android 12 and later), events go to InputManager in system_server with
no Java process started; older devices fall back to `input`. Each dispatch is timed, so the
latency achieved is reported, not assumed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from labd.sdk import TestFailure, UsageError, timed
from labd_android.shell import PersistentShell

KEYCODES = {"enter": 66, "return": 66, "back": 4, "home": 3, "menu": 82, "tab": 61, "del": 67,
            "backspace": 67, "power": 26, "wakeup": 224, "app_switch": 187}  # fmt: skip


@dataclass(frozen=True)
class Touch:
    """One step of a recorded gesture: a touch from (x1, y1) to (x2, y2) over duration_ms,
    starting at_ms after the gesture began."""

    at_ms: float
    x1: int
    y1: int
    x2: int
    y2: int
    duration_ms: float = 0


class AndroidInput:
    def __init__(self, shell: PersistentShell) -> None:
        self.shell = shell
        self.latencies_ms: list[float] = []
        self.tool: list[str] | None = None  # found by the first event: no I/O until then

    def _send(self, *args: str, busy_ms: float = 0) -> None:
        """One command; its dispatch latency is the round trip less `busy_ms`, the time the
        command spends on purpose (a swipe's duration: `input swipe` returns after it)."""
        if self.tool is None:
            _, status = self.shell.run(["cmd", "input"])  # its usage, when the service has one
            self.tool = ["cmd", "input"] if status == 0 else ["input"]
        with timed(self.latencies_ms):  # labd.sdk.TimedInput: stored with the iteration
            output, status = self.shell.run([*self.tool, *args])
        self.latencies_ms[-1] = max(0.0, self.latencies_ms[-1] - busy_ms)
        if status != 0:
            raise TestFailure(
                f"{' '.join(self.tool)} {args[0]}: exit status {status}: {output.strip()[:200]}"
            )

    def tap(self, x: int, y: int) -> None:
        self._send("tap", str(x), str(y))

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int = 300) -> None:
        self._send(
            "swipe", str(x1), str(y1), str(x2), str(y2), str(duration_ms), busy_ms=duration_ms
        )

    def long_press(self, x: int, y: int, duration_ms: int = 800) -> None:
        self.swipe(x, y, x, y, duration_ms)

    def key(self, name: str) -> None:
        code = KEYCODES.get(
            name.lower(), name.upper() if name.upper().startswith("KEYCODE_") else None
        )
        if code is None:
            raise UsageError(f"key {name!r}: expected one of {', '.join(KEYCODES)} or KEYCODE_...")
        self._send("keyevent", str(code))

    def text(self, text: str) -> None:
        """Exactly this text: quoted for the shell, spaces as `input text` wants them (%s),
        newlines as Enter."""
        for n, line in enumerate(text.split("\n")):
            if n:
                self.key("enter")
            if line:
                self._send("text", line.replace(" ", "%s"))

    def gesture(self, steps: Sequence[Touch]) -> None:
        """Replays a recorded gesture profile with its timing."""
        began = time.perf_counter()
        for step in steps:
            wait = step.at_ms / 1000 - (time.perf_counter() - began)
            if wait > 0:
                time.sleep(wait)
            if step.x1 == step.x2 and step.y1 == step.y2 and step.duration_ms == 0:
                self.tap(step.x1, step.y1)
            else:
                self.swipe(step.x1, step.y1, step.x2, step.y2, int(step.duration_ms))
