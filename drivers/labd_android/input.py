"""Touch and keys on Android through the persistent shell.

`adb shell input tap` starts an adb connection, a shell and a Java process per call (hundreds
of milliseconds). Here one shell stays open; where the device offers the input service's shell
command (`cmd input`, Android 12 and later), events go to InputManager in system_server with
no Java process started; older devices fall back to `input`. Each dispatch is timed, so the
latency achieved is reported, not assumed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from labd.sdk import MAX_INPUT_S, TestFailure, UsageError, check_duration, check_text, timed
from labd_android.names import shown
from labd_android.shell import PersistentShell

# Hardware keys by name, Android's KeyEvent codes; looked up as desktop key names are (without
# case, "_", "-" or spaces), so "Page_Down", "page-down" and "pagedown" agree.
KEYCODES = {"enter": 66, "return": 66, "back": 4, "home": 3, "menu": 82, "tab": 61, "del": 67,
            "backspace": 67, "forwarddel": 112, "escape": 111, "esc": 111, "space": 62,
            "pageup": 92, "pagedown": 93, "up": 19, "down": 20, "left": 21, "right": 22,
            "dpadcenter": 23, "search": 84, "volumeup": 24, "volumedown": 25, "power": 26,
            "wakeup": 224, "appswitch": 187}  # fmt: skip
KEYCODE_NAME = re.compile(r"KEYCODE_[A-Z0-9_]{1,48}")
MAX_KEYCODE = 999  # KeyEvent's codes stop near 320; a number is a code, not a count
MAX_PIXEL = 32_767  # a screen coordinate (the screen's size is the device's to check)
# Characters of a text that are keys, not symbols (the others labd.sdk.check_text refuses).
CONTROL_KEYS = {"\n": "enter", "\t": "tab", "\b": "del", "\x1b": "escape"}


def keycode(name: object) -> str:
    """What `input keyevent` is given for a key: a name of KEYCODES, a `KEYCODE_...` name or a
    code from 1 to 999; UsageError naming the key otherwise (checked before a job starts)."""
    text = name if isinstance(name, str) else ""
    code = KEYCODES.get(text.lower().replace("_", "").replace("-", "").replace(" ", ""))
    if code is not None:
        return str(code)
    if KEYCODE_NAME.fullmatch(text.upper()):
        return text.upper()
    if text.isascii() and text.isdigit() and len(text) <= 3 and 1 <= int(text) <= MAX_KEYCODE:
        return str(int(text))
    raise UsageError(
        f"key {shown(name if isinstance(name, str) else repr(name))}: expected a key name "
        f"({', '.join(KEYCODES)}), a KEYCODE_... name or a key code from 1 to {MAX_KEYCODE}"
    )


def _pixel(name: str, value: object) -> str:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_PIXEL:
        raise UsageError(
            f"{name}={value!r}: expected a whole number of pixels from 0 to {MAX_PIXEL}"
        )
    return str(value)


def typed_chunks(line: str) -> list[str]:
    """`line` (no control characters) as the arguments of `input text`, which reads "%s" as
    a space: spaces become "%s", and a "%s" of the text itself is split across two commands
    ("...%" then "s..."), so no command holds it."""
    pieces = line.split("%s")
    chunks = [
        ("s" if n else "") + piece + ("%" if n < len(pieces) - 1 else "")
        for n, piece in enumerate(pieces)
    ]
    return [chunk.replace(" ", "%s") for chunk in chunks if chunk]


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
        self._send("tap", _pixel("x", x), _pixel("y", y))

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int = 300) -> None:
        points = [_pixel(n, v) for n, v in (("x1", x1), ("y1", y1), ("x2", x2), ("y2", y2))]
        duration = check_duration("duration_ms", duration_ms, MAX_INPUT_S * 1000)
        whole = round(duration)
        self._send("swipe", *points, str(whole), busy_ms=whole)

    def long_press(self, x: int, y: int, duration_ms: int = 800) -> None:
        self.swipe(x, y, x, y, duration_ms)

    def key(self, name: str) -> None:
        self._send("keyevent", keycode(name))

    def text(self, text: str) -> None:
        """Exactly this text: quoted for the shell, spaces and "%s" as `input text` needs
        them (typed_chunks), newline, tab, backspace and escape as their keys; any other
        control character is refused before anything is typed."""
        run = ""
        for char in check_text(text):
            if char in CONTROL_KEYS:
                self._type(run)
                self.key(CONTROL_KEYS[char])
                run = ""
            else:
                run += char
        self._type(run)

    def _type(self, line: str) -> None:
        for chunk in typed_chunks(line):
            self._send("text", chunk)

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
