"""Page-load iterations whose sync or capture cannot be trusted say why."""

from __future__ import annotations

from labd.capture import untrustworthy
from labd_browser import PageLoad


def test_a_clean_load_is_trusted() -> None:
    assert untrustworthy({"sync_confidence": 0.99, "dropped_frames": 0.0}, 0.9, 2) == []


def test_poor_sync_and_dropped_frames_are_named() -> None:
    reasons = untrustworthy({"sync_confidence": 0.61, "dropped_frames": 5.0}, 0.9, 2)
    assert reasons == [
        "sync confidence 0.61 below 0.9: the green or red screen was not found clearly",
        "5 dropped frames (more than 2): visual changes may have been missed",
    ]


def test_every_metric_a_page_load_reports_has_a_unit() -> None:
    units = {m.name: m.unit for m in PageLoad.default_metrics}
    emitted = {"visually_complete_ms", "speed_index", "sync_confidence", "dropped_frames",
               "browser.load", "browser.responseStart"}  # fmt: skip
    assert emitted <= units.keys() and all(units.values())
