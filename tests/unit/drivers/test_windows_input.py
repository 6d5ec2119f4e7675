"""SendInput's structures and the events labd builds for it: checked on every platform
(ctypes lays them out as Windows does); injecting them runs on Windows only."""

from __future__ import annotations

import ctypes
import sys

import pytest
import structlog

from labd.errors import InfrastructureError, UsageError
from labd.sdk import Controller
from labd_windows import (
    INPUT,
    KEYBDINPUT,
    MOUSEINPUT,
    WindowsInput,
    click_inputs,
    combo_inputs,
    scroll_inputs,
    send,
    text_inputs,
)
from labd_windows.driver import WindowsDriver, WindowsOptions
from labd_windows.sendinput import (
    KEYEVENTF_KEYUP,
    KEYEVENTF_UNICODE,
    MOUSEEVENTF_ABSOLUTE,
    MOUSEEVENTF_LEFTDOWN,
    MOUSEEVENTF_MOVE,
    MOUSEEVENTF_WHEEL,
)

POINTER = ctypes.sizeof(ctypes.c_void_p)


def test_structure_layout_matches_winuser_h() -> None:
    if POINTER == 8:  # x64 and arm64 Windows
        expected = {"INPUT": 40, "MOUSEINPUT": 32, "KEYBDINPUT": 24, "union_offset": 8}
    else:  # 32-bit Windows
        expected = {"INPUT": 28, "MOUSEINPUT": 24, "KEYBDINPUT": 16, "union_offset": 4}
    assert ctypes.sizeof(INPUT) == expected["INPUT"]
    assert ctypes.sizeof(MOUSEINPUT) == expected["MOUSEINPUT"]
    assert ctypes.sizeof(KEYBDINPUT) == expected["KEYBDINPUT"]
    assert INPUT.u.offset == expected["union_offset"]
    assert (KEYBDINPUT.wVk.offset, KEYBDINPUT.wScan.offset, KEYBDINPUT.dwFlags.offset) == (0, 2, 4)
    assert KEYBDINPUT.dwExtraInfo.offset == (16 if POINTER == 8 else 12)
    assert MOUSEINPUT.dwExtraInfo.offset == (24 if POINTER == 8 else 20)


def test_text_is_unicode_key_events_with_surrogate_pairs() -> None:
    events = text_inputs("a€🙂")
    units = [(e.type, e.ki.wVk, e.ki.wScan, e.ki.dwFlags) for e in events]
    down, up = KEYEVENTF_UNICODE, KEYEVENTF_UNICODE | KEYEVENTF_KEYUP
    assert units == [
        (1, 0, ord("a"), down), (1, 0, ord("a"), up),
        (1, 0, 0x20AC, down), (1, 0, 0x20AC, up),
        (1, 0, 0xD83D, down), (1, 0, 0xD83D, up),  # U+1F642 as UTF-16
        (1, 0, 0xDE42, down), (1, 0, 0xDE42, up),
    ]  # fmt: skip


def test_shell_metacharacters_are_just_characters() -> None:
    text = "; rm -rf / `id` $(id) 'q' \"d\""  # "\n" is Return: test_input_rules.py
    scans = [e.ki.wScan for e in text_inputs(text)][::2]
    assert "".join(map(chr, scans)) == text


def test_combinations_press_in_order_and_release_in_reverse() -> None:
    events = combo_inputs("ctrl+shift+t")
    assert [(e.ki.wVk, e.ki.dwFlags) for e in events] == [
        (0x11, 0), (0x10, 0), (0x54, 0),
        (0x54, KEYEVENTF_KEYUP), (0x10, KEYEVENTF_KEYUP), (0x11, KEYEVENTF_KEYUP),
    ]  # fmt: skip
    with pytest.raises(UsageError, match="unknown modifier 'hyper'"):  # as on X11
        combo_inputs("hyper+x")


def test_mouse_events() -> None:
    move, down, up = click_inputs(1919, 1079, (1920, 1080))
    assert (move.type, move.mi.dx, move.mi.dy) == (0, 65535, 65535)
    assert move.mi.dwFlags == MOUSEEVENTF_MOVE | MOUSEEVENTF_ABSOLUTE
    assert (down.mi.dwFlags, up.mi.dwFlags) == (MOUSEEVENTF_LEFTDOWN, MOUSEEVENTF_LEFTDOWN * 2)
    assert click_inputs(0, 0, (1920, 1080))[0].mi.dx == 0
    (wheel,) = scroll_inputs(-2)
    assert wheel.mi.dwFlags == MOUSEEVENTF_WHEEL and wheel.mi.mouseData == (-240) & 0xFFFFFFFF


@pytest.mark.skipif(sys.platform == "win32", reason="checks the error elsewhere than Windows")
def test_send_elsewhere_is_a_clear_error() -> None:
    with pytest.raises(InfrastructureError, match="SendInput exists on Windows only"):
        send(text_inputs("x"))


@pytest.mark.skipif(sys.platform != "win32", reason="SendInput injects input on Windows only")
def test_send_on_windows() -> None:  # pragma: no cover - runs on Windows
    send(combo_inputs("shift"))  # a harmless key: injected and accepted


async def test_the_controller_drives_windows_input_as_sendinput_events() -> None:
    """The platform-neutral controller over SendInput: a URL typed after Ctrl+L, a tap as a
    left click at absolute coordinates, a swipe down as wheel clicks down."""
    sent: list[list[INPUT]] = []
    screen = (1920, 1080)
    controller = Controller(WindowsInput(lambda events: sent.append(list(events)), screen), screen)
    await controller.load_url("http://site.test/é")
    await controller.tap(960, 540)
    await controller.swipe(0, 250)
    keys = [(e.ki.wVk, e.ki.dwFlags) for e in sent[0]]
    assert keys == [(0x11, 0), (0x4C, 0), (0x4C, KEYEVENTF_KEYUP), (0x11, KEYEVENTF_KEYUP)]
    typed = [e.ki.wScan for batch in sent[1:-3] for e in batch][::2]
    assert "".join(map(chr, typed)) == "http://site.test/%C3%A9"  # one at a time, in ASCII
    assert [(e.ki.wVk, e.ki.dwFlags) for e in sent[-3]] == [(0x0D, 0), (0x0D, KEYEVENTF_KEYUP)]
    move, down, up = sent[-2]
    assert (move.mi.dx, move.mi.dy) == (32785, 32798)  # the centre, in 0..65535
    assert (down.mi.dwFlags, up.mi.dwFlags) == (MOUSEEVENTF_LEFTDOWN, MOUSEEVENTF_LEFTDOWN * 2)
    (wheel,) = sent[-1]
    assert wheel.mi.dwFlags == MOUSEEVENTF_WHEEL and wheel.mi.mouseData == (-240) & 0xFFFFFFFF


@pytest.mark.skipif(sys.platform == "win32", reason="off Windows only")
def test_a_windows_driver_configured_off_windows_says_it_offers_no_device() -> None:
    """`[drivers.windows] id = ...` on Linux passed `config check` and gave no device without
    a word (a tester's find); left at its defaults, as on every lab, it stays quiet."""
    with structlog.testing.capture_logs() as logs:
        WindowsDriver(WindowsOptions.model_validate({}), "h")
        WindowsDriver(WindowsOptions.model_validate({"id": "lab-win", "tags": ["x"]}), "h")
    (said,) = [e for e in logs if e["event"] == "the windows driver offers no device here"]
    assert said["log_level"] == "warning" and "(configured: id, tags)" in said["hint"]
