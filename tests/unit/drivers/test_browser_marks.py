"""The page on screen as the browser reports it: the Navigation Timing marks a page-load
iteration keeps, and whether the page is the one asked for."""

from __future__ import annotations

import json

from labd_browser.devtools import TIMING, page_state

ABOUT = {"page": "http://site.test/", "status": 200, "error": None}


def test_a_mark_the_page_has_not_reached_is_no_value() -> None:
    """A huge page still parsing: `browser.load` was recorded as 0 ms and went into the summary
    and every comparison."""
    answer = {"responseStart": 207, "domInteractive": None, "domContentLoaded": None, "load": None}
    state = page_state(json.dumps(answer | ABOUT))
    assert state is not None and state.marks == {"browser.responseStart": 207.0}
    assert not state.loaded and state.navigated and state.failure is None
    assert "v - s : null" in TIMING  # what the page answers for an event not yet happened


def test_no_answer_is_no_state() -> None:
    assert page_state(None) is None and page_state("") is None and page_state('"x"') is None
    # A page's script that replaced JSON.stringify answers what it likes: no state, no crash.
    for forged in ("{not json", '{"load": "soon"}', '{"load": [1]}', '{"load": 1e999}'):
        assert page_state(forged) is None
    done = {"responseStart": 5, "domInteractive": 40, "domContentLoaded": 41, "load": 90}
    state = page_state(json.dumps(done | ABOUT))
    assert state is not None and state.loaded
    assert state.marks == {f"browser.{k}": float(v) for k, v in done.items()}


def test_error_pages_and_http_errors_are_named() -> None:
    """What Chromium 156 and Firefox ESR 153 answered for a dead port, an unknown host and an empty
    404 (read from the real browsers; the end-to-end tests load them)."""
    chromium = {"page": "chrome-error://chromewebdata/", "status": None, "load": 30}
    firefox = {"page": "about:neterror?e=dnsNotFound&u=http%3A//x.invalid/&c=UTF-8"}
    cases = [
        (chromium | {"error": "ERR_NAME_NOT_RESOLVED"}, "Chromium shows its error page"),
        (firefox, "Firefox shows its error page (dnsNotFound)"),
        (ABOUT | {"status": 404}, "the server answered HTTP 404"),
        (ABOUT | {"status": 503}, "the server answered HTTP 503"),
    ]
    for answer, why in cases:
        state = page_state(json.dumps(answer))
        assert state is not None and state.failure is not None and state.failure.startswith(why)
    # Where it failed, as each browser says: a redirect's target is not the URL typed.
    moved = {"address": "http://site.test:9/next"}
    for answer, at in [
        (chromium | moved, "at http://site.test:9/next"),
        (firefox, "at http://x.invalid/"),
        (
            ABOUT | moved | {"page": "http://site.test/next", "status": 410},
            "at http://site.test/next",
        ),
        (chromium | {"address": "javascript:alert(1)"}, "Chromium shows its error page (no code)"),
    ]:
        state = page_state(json.dumps(answer))
        assert state is not None and state.failure is not None and state.failure.endswith(at)
    revalidated = page_state(json.dumps(ABOUT | {"status": 304}))  # a 304 page is the page
    assert revalidated is not None and revalidated.failure is None


def test_labds_sync_page_is_not_the_page_navigated_to() -> None:
    state = page_state(json.dumps({"page": "data:text/html;charset=utf-8,...", "load": 12}))
    assert state is not None and state.loaded and not state.navigated
