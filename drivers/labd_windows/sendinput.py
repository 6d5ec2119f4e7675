"""Windows keyboard and mouse input through user32's SendInput, with ctypes only.

The structures follow winuser.h with Windows' own type widths; their layout depends on the
pointer size (ULONG_PTR dwExtraInfo) and is checked on every platform: INPUT is 40 bytes on
64-bit Windows, 28 on 32-bit. Building the events is pure
and portable; only `send` needs Windows. Values are checked by labd.sdk's one rule for desktop
input, the X11 driver's too: the same key names, "\n" typed as Return, points on the screen.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Sequence

from labd.sdk import (
    CONTROL_CHARS,
    MAX_CLICKS,
    InfrastructureError,
    UsageError,
    check_count,
    check_point,
    check_text,
    parse_key,
)

INPUT_MOUSE, INPUT_KEYBOARD = 0, 1
KEYEVENTF_EXTENDEDKEY = 0x0001
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

# Virtual keys of labd.sdk's key names (KEY_NAMES' values, X keysym names).
NAMED_VK = {
    "Control_L": 0x11, "Control_R": 0x11, "Shift_L": 0x10, "Shift_R": 0x10, "Alt_L": 0x12,
    "Alt_R": 0x12, "Super_L": 0x5B, "Super_R": 0x5C, "Meta_L": 0x5B, "Meta_R": 0x5C,
    "BackSpace": 0x08, "Tab": 0x09, "Return": 0x0D, "Pause": 0x13, "Caps_Lock": 0x14,
    "Escape": 0x1B, "space": 0x20, "Page_Up": 0x21, "Page_Down": 0x22, "End": 0x23, "Home": 0x24,
    "Left": 0x25, "Up": 0x26, "Right": 0x27, "Down": 0x28, "Print": 0x2C, "Insert": 0x2D,
    "Delete": 0x2E, "Menu": 0x5D, "Num_Lock": 0x90, "Scroll_Lock": 0x91,
    **{f"F{n}": 0x6F + n for n in range(1, 25)},
    "KP_Enter": 0x0D, "KP_Multiply": 0x6A, "KP_Add": 0x6B, "KP_Subtract": 0x6D,
    "KP_Decimal": 0x6E, "KP_Divide": 0x6F, **{f"KP_{n}": 0x60 + n for n in range(10)},
}  # fmt: skip
# The keypad's Enter is Return's virtual key sent as an extended key (as the keyboard does).
EXTENDED = {"KP_Enter"}
VK_SHIFT = NAMED_VK["Shift_L"]
# Characters as (virtual key, with shift) on the US layout; a combination with any other
# character holds the modifiers around its Unicode key event.
_US_KEYS = {0xC0: "`~", 0xBD: "-_", 0xBB: "=+", 0xDB: "[{", 0xDD: "]}", 0xDC: "\\|", 0xBA: ";:",
            0xDE: "'\"", 0xBC: ",<", 0xBE: ".>", 0xBF: "/?"}  # fmt: skip
CHAR_VK: dict[str, tuple[int, bool]] = {
    **{chr(c).lower(): (c, False) for c in range(ord("A"), ord("Z") + 1)},
    **{chr(c): (c, True) for c in range(ord("A"), ord("Z") + 1)},
    **{str(d): (0x30 + d, False) for d in range(10)},
    **{shifted: (0x30 + d, True) for d, shifted in enumerate(")!@#$%^&*(")},
    **{pair[0]: (vk, False) for vk, pair in _US_KEYS.items()},
    **{pair[1]: (vk, True) for vk, pair in _US_KEYS.items()},
}
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
    layout involved); characters beyond the BMP as their UTF-16 surrogate pair; "\n", "\t",
    "\b" and "\x1b" as the keys Return, Tab, BackSpace and Escape, as X11 types them."""
    events = []
    for char in check_text(text):
        if char in CONTROL_CHARS:
            events += _tap(NAMED_VK[CONTROL_CHARS[char]])
        else:
            events += _unicode(char)
    return events


def combo_inputs(combo: str) -> list[INPUT]:
    """ "ctrl+l": modifiers down, the key down and up, modifiers up (in reverse); labd.sdk's
    key names, or one character (shift added for "L" or "?", as on the US layout)."""
    mods, last = parse_key(combo)
    held = [NAMED_VK[name] for name in mods]
    if last in NAMED_VK:
        keys = _tap(NAMED_VK[last], KEYEVENTF_EXTENDEDKEY if last in EXTENDED else 0)
    elif last in CHAR_VK:
        vk, shift = CHAR_VK[last]
        if shift and VK_SHIFT not in held:
            held.append(VK_SHIFT)
        keys = _tap(vk)
    else:
        keys = _unicode(last)
    down = [key_input(vk=c) for c in held]
    up = [key_input(vk=c, flags=KEYEVENTF_KEYUP) for c in reversed(held)]
    return down + keys + up


def _tap(vk: int, flags: int = 0) -> list[INPUT]:
    return [key_input(vk=vk, flags=flags), key_input(vk=vk, flags=flags | KEYEVENTF_KEYUP)]


def _unicode(char: str) -> list[INPUT]:
    events = []
    units = char.encode("utf-16-le")
    for i in range(0, len(units), 2):
        unit = int.from_bytes(units[i : i + 2], "little")
        events.append(key_input(scan=unit, flags=KEYEVENTF_UNICODE))
        events.append(key_input(scan=unit, flags=KEYEVENTF_UNICODE | KEYEVENTF_KEYUP))
    return events


def absolute(x: int, y: int, screen: tuple[int, int]) -> tuple[int, int]:
    """A point of the screen (checked) to SendInput's 0..65535 absolute coordinates: the first
    pixel is 0, the last 65535."""
    check_point(x, y, screen)
    width, height = screen
    return _scale(x, width), _scale(y, height)


def _scale(pixel: int, size: int) -> int:
    span = max(1, size - 1)
    return (pixel * 65535 + span // 2) // span  # rounded to the nearest


def click_inputs(x: int, y: int, screen: tuple[int, int], button: str = "left") -> list[INPUT]:
    if button not in BUTTON_FLAGS:
        raise UsageError(f"mouse button {button!r}: expected one of {', '.join(BUTTON_FLAGS)}")
    ax, ay = absolute(x, y, screen)
    down, up = BUTTON_FLAGS[button]
    move = mouse_input(ax, ay, flags=MOUSEEVENTF_MOVE | MOUSEEVENTF_ABSOLUTE)
    return [move, mouse_input(flags=down), mouse_input(flags=up)]


def scroll_inputs(clicks: int, horizontal: bool = False) -> list[INPUT]:
    """Positive clicks scroll up (or right); 1 to MAX_CLICKS of them either way."""
    if isinstance(clicks, int):  # the sign is the direction
        check_count("clicks", abs(clicks), MAX_CLICKS)
    else:
        check_count("clicks", clicks, MAX_CLICKS)
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
