"""What names a Perfherder series: the suite's name and its extraOptions. Two different labd
series must never share one, and nothing that names a series is cut to fit: every export is
still checked against Treeherder's schema (`valid`, as in test_perfherder)."""

from __future__ import annotations

import pytest

from labd.config import PerfherderSettings
from labd.errors import UsageError
from labd.perfherder import perfherder
from tests.unit.test_perfherder import it, results, valid


def suite_of(suite: str, test: str, settings: PerfherderSettings | None = None) -> str:
    data = perfherder(results("a", [it(2, 0, 1)], suite=suite, test=test),
                      settings or PerfherderSettings())  # fmt: skip
    name: str = valid(data)["suites"][0]["name"]
    return name


def test_suites_and_tests_holding_dots_never_share_a_series_name() -> None:
    """Suite `numbers.x` with test `y` and suite `numbers` with test `x.y` both exported
    `numbers.x.y`: one series in Perfherder for two labd tests."""
    assert suite_of("numbers.x", "y") != suite_of("numbers", "x.y")
    assert suite_of("numbers", "x.y") == "numbers.x.y"  # a dotless suite: split at the first dot
    assert suite_of("numbers.x", "y") == "numbers.x/y"  # `/` is in no labd name
    assert suite_of("a.b", "c.d") == "a.b/c.d"


def test_ordinary_names_keep_the_series_they_always_had() -> None:
    assert suite_of("web", "news") == "web.news"
    assert suite_of("host", "python-startup") == "host.python-startup"


def unchecked(**options: list[str]) -> PerfherderSettings:
    """Settings the configuration's own check did not see (built in code, or a daemon's
    configuration from before the check): the export must hold the line by itself."""
    return PerfherderSettings.model_construct(**options)


def test_an_extra_option_over_perfherder_s_limit_is_refused_naming_it_never_cut() -> None:
    """Cut to 100 characters, two options differing after the 100th were merged: one series
    for two configurations, without a word."""
    long = "cold-start-" + "x" * 95
    with pytest.raises(UsageError, match=f"extra_options entry '{long}' is 106 characters, over"
                                         " the 100 Perfherder takes"):  # fmt: skip
        perfherder(results("a", [it(2, 0, 1)]), unchecked(extra_options=["cold", long]))
    at_limit = "y" * 100
    data = valid(perfherder(results("a", [it(2, 0, 1)]), unchecked(extra_options=[at_limit])))
    assert data["suites"][0]["extraOptions"] == ["Pixel 7", "3g", at_limit]


def test_a_device_model_over_the_limit_is_refused_too() -> None:
    iterations = [it(2, 0, 1)]
    iterations[0]["fingerprint"]["model"] = "M" * 101
    with pytest.raises(UsageError, match=r"the device model 'M+' is 101 characters"):
        perfherder(results("a", iterations), PerfherderSettings())


def test_more_extra_options_than_perfherder_takes_are_refused_not_dropped() -> None:
    options = [f"option-{n}" for n in range(7)]  # with the model and network: 9
    with pytest.raises(UsageError, match=r"9 extraOptions .* over the 8 Perfherder takes"):
        perfherder(results("a", [it(2, 0, 1)]), unchecked(extra_options=options))
    # The same option twice is one entry (the schema wants each once), not a refusal.
    same = unchecked(extra_options=["Pixel 7", " cold ", "cold"])
    data = valid(perfherder(results("a", [it(2, 0, 1)]), same))
    assert data["suites"][0]["extraOptions"] == ["Pixel 7", "3g", "cold"]
