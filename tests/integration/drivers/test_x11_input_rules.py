"""X11 input's edge cases on Xvfb: characters the keyboard map lacks, typed right however many
there are; a display without a spare keycode; labd.sdk's one rule for input values (the
Windows driver's test is tests/unit/drivers/test_input_rules.py)."""

from __future__ import annotations

import asyncio
import math

import pytest
from Xlib import display

from labd.errors import InfrastructureError, UsageError
from labd_x11 import X11Input
from tests.integration.drivers.test_x11_input import Recorder


def typed(recorder: Recorder) -> str:
    return "".join(e["char"] or "" for e in recorder.until("F12") if e["type"] == "key")


def test_more_missing_characters_than_spare_keycodes_are_typed_right(
    desktop: tuple[X11Input, Recorder],
) -> None:
    """80 CJK characters without a delay, 19 spare keycodes on Xvfb: a keycode is remapped
    again only once clients have read the earlier key events (some were typed wrong)."""
    x11, recorder = desktop
    assert len(x11.spares) < 80
    text = "".join(chr(0x4E00 + 7 * i) for i in range(80))
    x11.text(text)
    x11.key("F12")
    assert typed(recorder) == text


async def test_a_display_without_a_spare_keycode_is_a_clear_error(xvfb: str) -> None:
    """Was a bare StopIteration, which a Future cannot take: the awaiting code hung."""
    other = display.Display(xvfb)
    first = other.display.info.min_keycode
    count = other.display.info.max_keycode - first + 1
    mapping = other.get_keyboard_mapping(first, count)
    for i, syms in enumerate(mapping):
        if not any(syms):  # a spare keycode: give it a symbol
            other.change_keyboard_mapping(first + i, [(0x01002600 + i, 0x01002600 + i)])
    other.sync()
    x11 = X11Input(xvfb)
    try:
        assert x11.spares == []
        with pytest.raises(InfrastructureError, match="no spare keycode to type '日'"):
            await asyncio.wait_for(asyncio.to_thread(x11.text, "a日"), 10)
        x11.text("ok")  # what the map has is still typed
    finally:
        x11.close()
        other.close()


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda x: x.key(""), "key '': expected a key name"),
        (lambda x: x.key("ctrl+"), "key 'ctrl\\+': no key after the modifiers"),
        (lambda x: x.click(40000, 5), "x=40000: expected a whole number of pixels from 0 to 639"),
        (lambda x: x.click(5, -40000), "y=-40000"),
        (lambda x: x.click(1.5, 5), "x=1.5"),
        (lambda x: x.move(640, 0), "x=640"),
        (lambda x: x.drag(0, 0, 10**6, 0), "x=1000000"),
        (lambda x: x.text("a", delay_ms=-1), "delay_ms=-1: expected a finite number >= 0"),
        (lambda x: x.text("a", delay_ms=math.nan), "delay_ms=nan"),
        (lambda x: x.drag(0, 0, 5, 5, duration_s=-1), "duration_s=-1"),
        (lambda x: x.drag(0, 0, 5, 5, duration_s=math.nan), "duration_s=nan"),
        (lambda x: x.scroll("down", 2**25), "clicks=33554432"),
        (lambda x: x.text("a\ud800"), "'\\\\ud800' at position 1 cannot be typed"),
    ],
)
def test_bad_values_are_usage_errors_naming_the_argument(
    xvfb: str, call: object, error: str
) -> None:
    x11 = X11Input(xvfb)
    try:
        with pytest.raises(UsageError, match=error):
            call(x11)  # type: ignore[operator]
    finally:
        x11.close()


def test_the_shared_key_names_work(desktop: tuple[X11Input, Recorder]) -> None:
    x11, recorder = desktop
    for combo in ("pageup", "Page_Up", "ctrl+.", "Enter", "esc", "F12"):
        x11.key(combo)
    names = [e["name"] for e in recorder.until("F12") if e["type"] == "key"]
    assert names == ["Page_Up", "Page_Up", "Control_L", "period", "Return", "Escape", "F12"]
