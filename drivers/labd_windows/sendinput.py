"""Windows keyboard and mouse input through user32's SendInput, with ctypes only.

The structures follow winuser.h with Windows' own type widths; their layout depends on the
pointer size (ULONG_PTR dwExtraInfo) and is checked on every platform: INPUT is 40 bytes on
64-bit Windows, 28 on 32-bit. Building the events is pure
and portable; only `send` needs Windows.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Sequence

from labd.sdk import InfrastructureError, UsageError

INPUT_MOUSE, INPUT_KEYBOARD = 0, 1
KEYEVENTF_KEYUP = 0x0002
KEYEVENTF_UNICODE = 0x0004
MOUSEEVENTF_MOVE = 0x0001
MOUSEEVENTF_LEFTDOWN, MOUSEEVENTF_LEFTUP = 0x0002, 0x0004
MOUSEEVENTF_RIGHTDOWN, MOUSEEVENTF_RIGHTUP = 0x0008, 0x0010
MOUSEEVENTF_MIDDLEDOWN, MOUSEEVENTF_MIDDLEUP = 0x0020, 0x0040
MOUSEEVENTF_WHEEL = 0x0800
MOUSEEVENTF_HWHEEL = 0x1000
MOUSEEVENTF_VIRTUALDESK = 0x4000
MOUSEEVENTF_ABSOLUTE = 0x8000
WHEEL_DELTA = 120

# Windows is LLP64: LONG and DWORD are 32 bits there, while ctypes.wintypes maps them to C's
# long, 64 bits on Linux. Fixed widths keep the layout right wherever it is checked.
LONG = ctypes.c_int32
DWORD = ctypes.c_uint32
WORD = ctypes.c_uint16
ULONG_PTR = ctypes.c_size_t  # pointer-sized, as on Windows

VK = {
    "backspace": 0x08, "tab": 0x09, "return": 0x0D, "enter": 0x0D, "shift": 0x10, "ctrl": 0x11,
    "control": 0x11, "alt": 0x12, "escape": 0x1B, "space": 0x20, "pageup": 0x21, "pagedown": 0x22,
    "end": 0x23, "home": 0x24, "left": 0x25, "up": 0x26, "right": 0x27, "down": 0x28,
    "delete": 0x2E, "win": 0x5B, **{f"f{n}": 0x6F + n for n in range(1, 25)},
    **{chr(c).lower(): c for c in range(ord("A"), ord("Z") + 1)},
    **{str(d): 0x30 + d for d in range(10)},
}  # fmt: skip
BUTTON_FLAGS = {
    "left": (MOUSEEVENTF_LEFTDOWN, MOUSEEVENTF_LEFTUP),
    "right": (MOUSEEVENTF_RIGHTDOWN, MOUSEEVENTF_RIGHTUP),
    "middle": (MOUSEEVENTF_MIDDLEDOWN, MOUSEEVENTF_MIDDLEUP),
}


class MOUSEINPUT(ctypes.Structure):
    _fields_ = [
        ("dx", LONG),
        ("dy", LONG),
        ("mouseData", DWORD),
        ("dwFlags", DWORD),
        ("time", DWORD),
        ("dwExtraInfo", ULONG_PTR),
    ]


class KEYBDINPUT(ctypes.Structure):
    _fields_ = [
        ("wVk", WORD),
        ("wScan", WORD),
        ("dwFlags", DWORD),
        ("time", DWORD),
        ("dwExtraInfo", ULONG_PTR),
    ]


class HARDWAREINPUT(ctypes.Structure):
    _fields_ = [("uMsg", DWORD), ("wParamL", WORD), ("wParamH", WORD)]


class _INPUTUNION(ctypes.Union):
    _fields_ = [("mi", MOUSEINPUT), ("ki", KEYBDINPUT), ("hi", HARDWAREINPUT)]


class INPUT(ctypes.Structure):
    _anonymous_ = ("u",)
    _fields_ = [("type", DWORD), ("u", _INPUTUNION)]


def key_input(vk: int = 0, scan: int = 0, flags: int = 0) -> INPUT:
    event = INPUT(type=INPUT_KEYBOARD)
    event.ki = KEYBDINPUT(wVk=vk, wScan=scan, dwFlags=flags)
    return event


def mouse_input(dx: int = 0, dy: int = 0, data: int = 0, flags: int = 0) -> INPUT:
    event = INPUT(type=INPUT_MOUSE)
    event.mi = MOUSEINPUT(dx=dx, dy=dy, mouseData=data & 0xFFFFFFFF, dwFlags=flags)
    return event


def text_inputs(text: str) -> list[INPUT]:
    """Each character as a Unicode key press and release (KEYEVENTF_UNICODE, no keyboard
    layout involved); characters beyond the BMP as their UTF-16 surrogate pair."""
    events = []
    units = text.encode("utf-16-le")
    for i in range(0, len(units), 2):
        unit = int.from_bytes(units[i : i + 2], "little")
        events.append(key_input(scan=unit, flags=KEYEVENTF_UNICODE))
        events.append(key_input(scan=unit, flags=KEYEVENTF_UNICODE | KEYEVENTF_KEYUP))
    return events


def combo_inputs(combo: str) -> list[INPUT]:
    """ "ctrl+l": modifiers down, the key down and up, modifiers up (in reverse)."""
    codes = []
    for part in combo.lower().split("+"):
        if part not in VK:
            raise UsageError(f"key {combo!r}: unknown key {part!r}")
        codes.append(VK[part])
    down = [key_input(vk=c) for c in codes]
    up = [key_input(vk=c, flags=KEYEVENTF_KEYUP) for c in reversed(codes)]
    return down + up


def absolute(x: int, y: int, screen: tuple[int, int]) -> tuple[int, int]:
    """Pixels to SendInput's 0..65535 absolute coordinates."""
    width, height = screen
    return (x * 65535 + width // 2) // max(1, width - 1), (y * 65535 + height // 2) // max(
        1, height - 1
    )


def click_inputs(x: int, y: int, screen: tuple[int, int], button: str = "left") -> list[INPUT]:
    if button not in BUTTON_FLAGS:
        raise UsageError(f"mouse button {button!r}: expected one of {', '.join(BUTTON_FLAGS)}")
    ax, ay = absolute(x, y, screen)
    down, up = BUTTON_FLAGS[button]
    move = mouse_input(ax, ay, flags=MOUSEEVENTF_MOVE | MOUSEEVENTF_ABSOLUTE)
    return [move, mouse_input(flags=down), mouse_input(flags=up)]


def scroll_inputs(clicks: int, horizontal: bool = False) -> list[INPUT]:
    """Positive clicks scroll up (or right)."""
    return [
        mouse_input(
            data=clicks * WHEEL_DELTA, flags=MOUSEEVENTF_HWHEEL if horizontal else MOUSEEVENTF_WHEEL
        )
    ]


def send(events: Sequence[INPUT]) -> None:
    """Inject the events (Windows only); all of them, or an error naming how many went in."""
    if sys.platform != "win32":
        raise InfrastructureError("SendInput exists on Windows only")
    array = (INPUT * len(events))(*events)
    user32 = ctypes.WinDLL("user32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
    sent = user32.SendInput(len(events), array, ctypes.sizeof(INPUT))
    if sent != len(events):
        error = ctypes.get_last_error()  # type: ignore[attr-defined,unused-ignore]
        raise InfrastructureError(
            f"SendInput injected {sent} of {len(events)} events (error {error})"
        )
