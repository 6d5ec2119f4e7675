"""When the page load is done: the screen changed from what it showed before Enter, then
stayed still. A loaded host can draw the whole page before labd's first grab after Enter."""

from __future__ import annotations

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
    shown = iter(frames_after_enter)
    s._grab = lambda: next(shown, frames_after_enter[-1])  # type: ignore[method-assign]
    return s


async def test_a_page_drawn_before_the_first_grab_after_enter_is_done() -> None:
    await scenario([PAGE])._until_quiet(GREEN)  # returns: it was drawn


async def test_a_page_drawn_after_enter_is_done() -> None:
    await scenario([GREEN, GREEN, PAGE])._until_quiet(GREEN)


async def test_a_screen_that_never_changes_is_nothing_drawn() -> None:
    with pytest.raises(TestFailure, match=r"within 1 s \(nothing was drawn\)"):
        await scenario([GREEN])._until_quiet(GREEN)
