"""When the page load is done, where the browser cannot be asked: the screen changed from
what it showed before Enter, then stayed still. A loaded host can draw the whole page before
labd's first grab after Enter."""

from __future__ import annotations

import time

import numpy as np
import pytest

from labd.errors import TestFailure
from labd_browser import PageLoad
from labd_browser.pageload import PageLoadParams

GREEN = np.zeros((8, 8, 3), np.uint8)
PAGE = np.full((8, 8, 3), 200, np.uint8)


def scenario(frames_after_enter: list[np.ndarray]) -> PageLoad:
    """The scenario's waiting alone: its screen grabs come from the list (the last repeats)."""
    s = PageLoad.__new__(PageLoad)
    s.params = PageLoadParams(url="http://www.labd.test/", quiet_ms=100, load_timeout_s=1)
    s.profile = None  # no browser to ask: the pixels alone decide
    s.browser = None  # nor one to watch
    shown = iter(frames_after_enter)
    s._grab = lambda: next(shown, frames_after_enter[-1])  # type: ignore[method-assign]
    return s


async def test_a_page_drawn_before_the_first_grab_after_enter_is_done() -> None:
    await scenario([PAGE])._until_done(GREEN, time.monotonic())  # returns: it was drawn


async def test_a_page_drawn_after_enter_is_done() -> None:
    await scenario([GREEN, GREEN, PAGE])._until_done(GREEN, time.monotonic())


async def test_a_screen_that_never_changes_is_nothing_drawn() -> None:
    with pytest.raises(TestFailure, match=r"within 1 s \(nothing was drawn\)"):
        await scenario([GREEN])._until_done(GREEN, time.monotonic())


def green_page(spinner: int) -> np.ndarray:
    """A screen: the browser's chrome (top rows, a spinner in it) above a green content area."""
    frame = np.zeros((8, 8, 3), np.uint8)
    frame[2:] = (0, 255, 0)  # BGR
    frame[0, 0] = spinner
    return frame


async def test_a_still_page_under_a_turning_spinner_is_done() -> None:
    drawn = [green_page(0)]
    for n in range(40):  # the tab's spinner turns on; the page itself is drawn and still
        frame = green_page(n % 7)
        frame[2:] = 200
        drawn.append(frame)
    shown = iter(drawn)
    s = scenario([PAGE])
    s._grab = lambda: next(shown)  # type: ignore[method-assign]
    await s._until_done(green_page(0), time.monotonic())


async def test_a_page_that_keeps_changing_still_fails() -> None:
    frames = [green_page(0)]
    for n in range(40):
        frame = green_page(0)
        frame[4:] = 50 + n  # the content itself changes
        frames.append(frame)
    s = scenario(frames)
    with pytest.raises(TestFailure, match=r"\(the screen kept changing\)"):
        await s._until_done(green_page(0), time.monotonic())
