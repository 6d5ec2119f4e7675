"""One rule for desktop input values, labd.sdk's: the Windows driver refuses and types as the
X11 driver does (tests/integration/drivers/test_x11_input_rules.py checks X11 on Xvfb). The
Windows events are decoded by tests/windows_standin.py as Windows reads them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from Xlib import XK

from labd.errors import UsageError
from labd.sdk import inputs
from labd_windows import WindowsInput, scroll_inputs, text_inputs
from labd_windows.sendinput import (
    KEYEVENTF_EXTENDEDKEY,
    KEYEVENTF_KEYUP,
    NAMED_VK,
    absolute,
    combo_inputs,
)
from tests.windows_standin import FakeWin32


@pytest.fixture
def windows(tmp_path: Path) -> tuple[WindowsInput, FakeWin32]:
    api = FakeWin32(tmp_path / "screen.json", size=(1920, 1080))
    return WindowsInput(api.send, api.size), api


def test_every_key_name_is_a_key_on_both_desktops() -> None:
    names = set(inputs.KEY_NAMES.values())
    assert {name for name in names if XK.string_to_keysym(name) == 0} == set()
    assert names - set(NAMED_VK) == set()


@pytest.mark.parametrize(
    ("combo", "error"),
    [
        ("", "key '': expected a key name"),
        ("ctrl+", "key 'ctrl\\+': no key after the modifiers"),
        ("hyper+x", "unknown modifier 'hyper'"),
        ("NoSuchKey", "no key named 'NoSuchKey'"),
        ("ctrl+\ud800", "is not a key"),
        ("shift+shift+x", "modifier 'shift' given twice"),
        ("ctrl+ctrl", "'ctrl' is held already as a modifier"),
        # A name of 5,000 characters is quoted cut, not whole twice (a tester's find).
        ("x" * 5000, r"^key 'x{40}'\.\.\. \(5,000 characters\): no key named 'x{40}'\.\.\. "),
    ],
)
def test_bad_keys_are_usage_errors_naming_the_key(
    windows: tuple[WindowsInput, FakeWin32], combo: str, error: str
) -> None:
    with pytest.raises(UsageError, match=error):
        windows[0].key(combo)


def test_keys_of_the_shared_vocabulary_reach_windows(
    windows: tuple[WindowsInput, FakeWin32],
) -> None:
    """Page_Up and ctrl+. were refused on Windows while X11 took them."""
    device, api = windows
    for combo in ("Page_Up", "pageup", "ctrl+.", "ctrl+l", "Return", "shift", "ctrl++"):
        device.key(combo)
    assert api.actions == [
        ("key", "page_up"), ("key", "page_up"), ("key", "ctrl+."), ("key", "ctrl+l"),
        ("key", "return"), ("key", "ctrl+shift+="),  # "+" is shift and "=" on the US layout
    ]  # fmt: skip


def test_a_newline_is_return_on_windows_as_on_x11(windows: tuple[WindowsInput, FakeWin32]) -> None:
    device, api = windows
    device.text("a\nb\tc")
    device.key("F12")  # flushes the stand-in's typed text
    assert api.actions == [
        ("text", "a"), ("key", "return"), ("text", "b"), ("key", "tab"), ("text", "c"),
        ("key", "f12"),
    ]  # fmt: skip


def test_a_lone_surrogate_is_refused_naming_where_it_is() -> None:
    with pytest.raises(UsageError, match="'\\\\ud800' at position 1 cannot be typed"):
        text_inputs("a\ud800")
    with pytest.raises(UsageError, match="'\\\\x00' at position 0"):
        text_inputs("\x00")
    assert len(text_inputs("👨\u200d👩")) == 10  # a joiner (format character) is typed


@pytest.mark.parametrize(
    ("x", "y", "error"),
    [
        (10**9, 5, "x=1000000000: expected a whole number of pixels from 0 to 1919"),
        (5, -1, "y=-1: expected a whole number of pixels from 0 to 1079"),
        (1920, 5, "x=1920"),
        (1.5, 5, "x=1.5"),
        (True, 5, "x=True"),
    ],
)
def test_points_off_the_screen_are_refused(
    windows: tuple[WindowsInput, FakeWin32], x: object, y: object, error: str
) -> None:
    """Not a silent int32 wrap (10**9 gave dx -300358138)."""
    with pytest.raises(UsageError, match=error):
        windows[0].click(x, y)  # type: ignore[arg-type]


def test_the_last_pixel_is_65535() -> None:
    assert absolute(1, 1, (2, 2)) == (65535, 65535)  # was 65536
    assert absolute(0, 0, (2, 2)) == (0, 0)
    assert absolute(1919, 1079, (1920, 1080)) == (65535, 65535)
    assert absolute(0, 0, (1, 1)) == (0, 0)


def test_counts_and_durations_are_checked(windows: tuple[WindowsInput, FakeWin32]) -> None:
    device, _ = windows
    with pytest.raises(UsageError, match="clicks=33554432: expected a whole number from 1 to"):
        device.scroll("up", 2**25)  # scrolled the other way
    with pytest.raises(UsageError, match="clicks=33554432"):
        scroll_inputs(-(2**25))
    with pytest.raises(UsageError, match="count=0"):
        device.click(1, 1, count=0)
    for delay in (-1, math.nan, math.inf, 1001):
        with pytest.raises(UsageError, match=r"delay_ms=.*: expected a finite number from 0 to"):
            device.text("a", delay_ms=delay)
    # One call blocks its thread, which a job's time-out cannot stop: bounded (a million
    # characters, or 601 at 100 ms, were accepted and blocked for minutes)
    with pytest.raises(UsageError, match="text of 1000000 characters: at most 10000"):
        device.text("a" * 1_000_000)
    with pytest.raises(UsageError, match=r"would take 60\.1 s: at most 60 s"):
        device.text("a" * 601, delay_ms=100)


def test_spaces_around_plus_and_keypad_keys(windows: tuple[WindowsInput, FakeWin32]) -> None:
    """ "ctrl + l" and "KP_Enter" were refused though the docs take them."""
    device, api = windows
    device.key("ctrl + l")
    device.key("ctrl+ ")  # a space alone is the space key
    assert api.actions == [("key", "ctrl+l"), ("key", "ctrl+space")]
    enter = combo_inputs("KP_Enter")
    assert [(e.ki.wVk, e.ki.dwFlags) for e in enter] == [
        (0x0D, KEYEVENTF_EXTENDEDKEY),
        (0x0D, KEYEVENTF_EXTENDEDKEY | KEYEVENTF_KEYUP),
    ]  # fmt: skip  (the keypad's Enter: Return's virtual key, extended)
    assert [e.ki.wVk for e in combo_inputs("KP_7")] == [0x67, 0x67]
