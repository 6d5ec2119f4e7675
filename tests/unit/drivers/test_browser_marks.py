"""The browser's own Navigation Timing marks, as a page-load iteration keeps them."""

from __future__ import annotations

import json

from labd_browser.devtools import TIMING, marks


def test_a_mark_the_page_has_not_reached_is_no_value() -> None:
    """A load cut short by the quiet rule, or a huge page still parsing: `browser.load` was
    recorded as 0 ms and went into the summary and every comparison."""
    answer = json.dumps(
        {"responseStart": 207, "domInteractive": None, "domContentLoaded": None, "load": None}
    )
    assert marks(answer) == {"browser.responseStart": 207.0}
    assert "v - s : null" in TIMING  # what the page answers for an event not yet happened


def test_no_answer_is_no_marks() -> None:
    assert marks(None) == {} and marks("") == {}
    done = {"responseStart": 5, "domInteractive": 40, "domContentLoaded": 41, "load": 90}
    assert marks(json.dumps(done)) == {f"browser.{k}": float(v) for k, v in done.items()}
