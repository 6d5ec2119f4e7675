"""The charts a performance engineer reads: axes with units and labels, one scale for base and
new, dots for few values, bands that stay inside the metric's domain."""

from __future__ import annotations

import math
import re

from labd.report import svg
from labd.report.axes import ticks, value_ticks


def texts(chart: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", chart)


def test_ticks_are_round_and_cover_the_values() -> None:
    assert ticks(95.5, 109.3) == [95.0, 100.0, 105.0, 110.0]
    assert ticks(0.0013, 0.0021)[0] <= 0.0013 and ticks(0.0013, 0.0021)[-1] >= 0.0021
    assert value_ticks([3.0, 40.0], floor=0.0)[0] == 0.0


def test_a_series_has_its_unit_on_the_value_axis_and_iterations_below() -> None:
    chart = svg.series_plot("t", [10.0, 12.0, 11.0], "ms", quantity="wall_time_ms")
    labels = texts(chart)
    assert "wall_time_ms (ms)" in labels and "iteration" in labels
    assert {"1", "2", "3"} <= set(labels)


def test_a_series_given_its_iterations_indexes_labels_them_as_the_csv_does() -> None:
    """The console's chart said iteration 501 where the CSV, the API and the artefact folder
    say 500; a value whose iteration errored is not plotted, so positions drift further."""
    chart = svg.series_plot("t", [10.0, 12.0, 11.0], "ms", indexes=[0, 1, 3])
    ticks_below = [t for t in texts(chart) if t.isdigit() and t in {"0", "1", "2", "3"}]
    assert ticks_below == ["0", "1", "3"]


def test_twenty_values_are_twenty_dots_not_a_twenty_bin_histogram() -> None:
    values = [100.0 + i % 7 for i in range(20)]
    chart = svg.distribution("d", [("base", values), ("new", [v * 1.1 for v in values])], "ms")
    assert chart.count('class="dot strip"') == 40 and "<rect" not in chart
    assert "n=20" in texts(chart)
    many = svg.distribution("d", [("values", [float(i % 50) for i in range(500)])])
    assert 'class="box"' in many and many.count("<circle") < 50


def test_base_and_new_share_one_value_axis() -> None:
    chart = svg.distribution("d", [("base", [10.0, 11.0]), ("new", [30.0, 31.0])], "ms")
    axis = [float(t.replace(",", "")) for t in texts(chart) if re.fullmatch(r"[\d,.]+", t)]
    assert min(axis) <= 10 and max(axis) >= 31
    base_plot = svg.series_plot("b", [10.0, 11.0], "ms", shared=[30.0, 31.0])
    assert max(float(t) for t in texts(base_plot) if re.fullmatch(r"[\d.]+", t)) >= 31


def test_a_history_band_never_runs_below_zero_for_a_time() -> None:
    values = [5.0, 40.0, 3.0, 35.0, 8.0, 30.0]
    low = [-49.0] * 6
    high = [90.0] * 6
    chart = svg.history_plot("h", values, (low, high), [4], [f"r{i}" for i in range(6)], "ms")
    numbers = [float(t) for t in texts(chart) if re.fullmatch(r"-?[\d.]+", t)]
    assert min(numbers) == 0.0, numbers
    assert "build" in texts(chart) and "r0" in texts(chart)
    assert chart.count('class="alert"') == 1


def test_the_interval_chart_reads_in_percent() -> None:
    chart = svg.intervals("i", [("m", 1.02, 1.05, 1.08), ("n", -math.inf, 1.0, math.inf)], 0.01)
    assert "5%" in texts(chart) and "0%" in texts(chart)


def test_a_change_from_zero_is_reported_in_absolute_terms() -> None:
    """From a level of 0 no relative change exists: the report said "+200.0%" for 0 to 2."""
    from labd.report.html import history_section

    values = [0.0] * 30 + [2.0] * 10
    builds = [f"r{i}" for i in range(40)]
    section = history_section("s/t/errors/pixel", {"values": values, "builds": builds}, {})
    assert "+2 (absolute: the level before was 0) at r30" in section
    assert "%" not in section.split("</p>")[0]


def test_a_change_is_named_a_regression_or_an_improvement_by_the_metric_direction() -> None:
    from labd.report.html import history_section

    series = {"values": [10.0] * 30 + [12.0] * 10, "builds": [f"r{i}" for i in range(40)]}
    assert "a regression, up +20.0% at r30" in history_section("s/t/load_ms/pixel", series, {})
    series["higher_is_better"] = True
    assert "an improvement, up +20.0% at r30" in history_section("s/t/fps/pixel", series, {})
