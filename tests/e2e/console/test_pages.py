"""Each console page in Debian's chromium against a daemon that ran real jobs, read as a
person reads it: the text, the charts' axis labels, the video playing, progress moving."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.console.conftest import ARTIFACTS, Lab, command_spec

PROGRESS = "document.querySelector('tr[data-job=long] progress').value"
STILLS_LOADED = (
    "[...document.querySelectorAll('.filmstrip img')].every(i => i.complete && i.naturalWidth > 0)"
)


def until(condition: Callable[[], Any], seconds: float) -> None:
    """Wait for what a person would wait for (the page's own script forbids eval, so
    Playwright's wait_for_function cannot run there)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the page did not change in time"
        time.sleep(0.1)


def axis_titles(page: Any) -> list[str]:
    return page.locator("svg.plot text.axis-title").all_text_contents()


def test_devices_show_state_and_an_admin_drains_and_enables(lab: Lab, page_as: Any) -> None:
    viewer = page_as("viewer")
    assert "available" in viewer.locator("tr[id^=device-host]").inner_text()
    assert viewer.locator("button", has_text="Drain").count() == 0  # a viewer has no buttons
    admin = page_as("admin")
    host_row = admin.locator("tr[id^=device-host]")
    host_row.locator("button", has_text="Drain").click()
    admin.wait_for_url("**/console/devices")
    assert "draining" in admin.locator("tr[id^=device-host]").inner_text()
    admin.locator("tr[id^=device-host]").locator("button", has_text="Enable").click()
    admin.wait_for_url("**/console/devices")
    assert "enabled" in admin.locator("tr[id^=device-host]").inner_text()


def test_running_progress_moves_live_the_queue_says_why_and_an_admin_cancels(
    lab: Lab, page_as: Any
) -> None:
    lab.submit("long", command_spec("long", "r1", 0.3, iterations=40))
    lab.wait("long", ("running",))
    lab.submit("behind", command_spec("long", "r1", 0.01, iterations=2))
    viewer = page_as("viewer")
    viewer.goto("/console/running")
    row = viewer.locator("tr[data-job=long]")
    first = int(row.locator("progress").get_attribute("value") or 0)
    viewer.evaluate("window.notReloaded = true")
    # The bar moves by events pushed from the daemon, not by reloading the page.
    until(lambda: int(viewer.evaluate(PROGRESS)) >= first + 3, 30)
    assert viewer.evaluate("window.notReloaded") is True
    assert "Live: following the lab." in viewer.locator("#live-status").inner_text()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    viewer.screenshot(path=ARTIFACTS / "running-page-live.png")

    viewer.goto("/console/queue")
    waiting = viewer.locator("tr", has_text="behind").inner_text()
    assert "busy (job long)" in waiting, waiting

    admin = page_as("admin")
    admin.goto("/console/jobs/long")
    admin.locator("button", has_text="Cancel this job").click()
    until(lambda: admin.locator("table.facts .state").inner_text() == "cancelled", 30)
    lab.wait("behind")


def test_the_job_page_shows_figures_values_in_order_and_the_fingerprint(
    lab: Lab, page_as: Any
) -> None:
    page = page_as("viewer")
    page.goto("/console/jobs/t-r2")
    text = page.locator("main").inner_text()
    assert "rep/t (command)" in text and "succeeded" in text and "r2" in text
    summary = page.locator("table", has_text="median [95% CI]").inner_text()
    assert "wall_time_ms" in summary and "\t8\t" in summary  # n = 8 measured iterations
    assert "wall_time_ms (ms)" in axis_titles(page) and "iteration" in axis_titles(page)
    ticks = page.locator("svg.plot text.tick").all_text_contents()
    # 1 warm-up and 8 measured, numbered from 0 as the CSV and the artefact folders number them
    assert {"0", "8"} <= set(ticks) and "9" not in ticks, ticks
    assert page.locator("h2", has_text="Fingerprint").count() == 1
    assert page.locator("table.environment").inner_text().strip() != ""


def test_compare_puts_many_tests_side_by_side_most_severe_first(lab: Lab, page_as: Any) -> None:
    page = page_as("viewer")
    page.goto("/console/compare")
    page.fill("input[name=base]", "r1")
    page.fill("input[name=new]", "r2")
    page.click("form.compare-form button")
    page.wait_for_url("**/console/compare?base=r1&new=r2*")
    rows = page.locator("table.compare tr").all_inner_texts()
    head, first = rows[0], rows[1]
    for column in ("of", "base", "new", "delta", "95% interval", "n base", "n new"):
        assert column in head.split("\t")
    # base and new are the location the change compares, named beside them
    location = first.split("\t")[2]
    assert location == ("mean" if "\twelch\t" in first else "median"), first
    assert first.startswith("rep/t\twall_time_ms") and "regression" in first, rows
    assert any(r.startswith("rep/u\twall_time_ms") for r in rows[2:]), rows
    assert "2 test(s)" in page.locator("main").inner_text()
    assert "change of new against base (%), 95% interval" in axis_titles(page)


def test_history_has_builds_on_the_x_axis_a_band_above_zero_and_the_change(
    lab: Lab, page_as: Any
) -> None:
    # Steps of 50 and 400 ms: far above what a loaded machine adds to a sleep.
    builds = [(f"h{n:02d}", 0.05 if n < 12 else 0.4) for n in range(16)]
    for revision, seconds in builds:  # one at a time: the history's order is the builds'
        lab.submit(f"hist-{revision}", command_spec("hist", revision, seconds, iterations=4))
        lab.wait(f"hist-{revision}")
    page = page_as("viewer")
    page.goto("/console/history")
    page.locator("a", has_text="rep/hist").click()
    page.wait_for_url("**/console/history?suite=rep&test=hist")
    assert "16 builds" in page.locator("main").inner_text()
    chart = page.locator("svg.plot", has_text="wall_time_ms (ms)")
    titles = chart.locator("text.axis-title").all_text_contents()
    assert titles == ["wall_time_ms (ms)", "build"], titles
    ticks = chart.locator("text.tick").all_text_contents()
    assert {"h00", "h15"} <= set(ticks), ticks
    numbers = [float(t.replace(",", "")) for t in ticks if re.fullmatch(r"-?[\d,.]+", t)]
    assert min(numbers) >= 0, numbers
    # The prediction band (after ten builds) never reaches below the value axis' 0.
    band = chart.locator("polygon.band").get_attribute("points") or ""
    bottom = float(chart.locator("line.axis").first.get_attribute("y1") or 0)
    assert band and max(float(p.split(",")[1]) for p in band.split()) <= bottom
    # An eightfold slowdown from h12 on is found (once four builds confirm it) and marked.
    found = chart.locator("xpath=preceding::p[1]").inner_text()
    assert "changes: a regression, up +" in found and "at h12" in found, found
    assert chart.locator("line.alert").count() >= 1


def test_a_page_load_shows_its_video_filmstrip_heat_map_and_progress(
    lab: Lab, page_as: Any
) -> None:
    if lab.page_load is None:
        pytest.skip("Xvfb or chromium is missing: no page-load job ran")
    page = page_as("viewer")
    page.goto(f"/console/jobs/{lab.page_load}")
    video = page.locator("video")
    duration = page.evaluate(
        """() => new Promise((done, fail) => {
            const v = document.querySelector('video');
            v.muted = true;
            v.addEventListener('timeupdate', () => { if (v.currentTime > 0) done(v.duration); });
            v.addEventListener('error', () => fail(String(v.error && v.error.message)));
            v.play().catch(fail);
        })"""
    )
    assert video.count() == 1 and 0.2 < duration < 60, duration  # it plays, for a load's span
    # Under no shaping the example page appears in one frame: one still at least, the last
    # one complete.
    stills = page.locator(".filmstrip img")
    assert stills.count() >= 1
    stills.last.scroll_into_view_if_needed()
    until(lambda: page.evaluate(STILLS_LOADED), 30)
    captions = page.locator(".filmstrip figcaption").all_text_contents()
    assert captions[-1].endswith("ms · 100%"), captions
    assert page.evaluate("document.querySelector('img.heatmap').naturalWidth") > 0
    assert "visual progress (%)" in axis_titles(page)
    assert "time since navigation (ms)" in axis_titles(page)


def test_an_ab_job_page_compares_its_two_sides(lab: Lab, page_as: Any) -> None:
    spec = command_spec("ab", "r1", 0.01, iterations=8) | {
        "ab": {
            "base": {"params": {"command": ["sleep", "0.01"]}},
            "new": {"params": {"command": ["sleep", "0.06"]}},
        }
    }
    lab.submit("ab-job", spec)
    lab.wait("ab-job")
    page = page_as("viewer")
    page.goto("/console/jobs/ab-job")
    rows = page.locator("main table", has_text="95% interval").locator("tr").all_inner_texts()
    assert rows[1].startswith("wall_time_ms") and "regression" in rows[1], rows
    assert "\t8\t8\t" in rows[1]  # n on each side
