"""Launches as a real logcat shows them: replayed buffers, apps launching at once, epochs
that are no Raptor epoch, and Android's "Displayed" line beside Raptor's marks."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from labd.markers import Iteration, LaunchCollector, parse_line
from labd.markers import iterations as iterations_module
from tests.markers_log import OFFSETS, brief_iteration, threadtime_iteration

RAPTOR_METRICS = {f"coldlaunch.{k}": float(v) for k, v in OFFSETS.items()}
RESTART = "--------- beginning of main"
T = 1434771804212


def collect(lines: list[str]) -> tuple[list[Iteration], LaunchCollector]:
    """The iterations of a log, every one still open at its end included."""
    collector = LaunchCollector()
    done = [it for line in lines if (it := collector.feed(line)) is not None]
    while (last := collector.finish()) is not None:
        done.append(last)
    return done, collector


@pytest.mark.parametrize("make", [brief_iteration, threadtime_iteration])
def test_a_replayed_buffer_of_two_launches_counts_each_once(
    make: Callable[[int], list[str]],
) -> None:
    """The replay of two launches counted them again as iterations 2 and 3 (a tester's find)."""
    buffer = make(T) + make(T + 10_000)
    done, collector = collect([*buffer, RESTART, *buffer])
    assert [(it.index, it.launch_epoch) for it in done] == [(0, T), (1, T + 10_000)]
    assert all(it.metrics == RAPTOR_METRICS and it.problems == [] for it in done)
    assert collector.orphans == 0


def test_a_replay_mid_launch_in_a_mixed_log_resumes_that_launch() -> None:
    """A restart while the second of two launches was open: the replay repeats both, the
    second goes on, a third is new; no launch is repeated, and no empty one appears."""
    first, second, third = (
        brief_iteration(T),
        brief_iteration(T + 10_000),
        brief_iteration(T + 20_000),
    )
    lines = [*first, *second[:5], RESTART, *first, *second[:5], *second[5:], *third]
    done, collector = collect(lines)
    assert [it.launch_epoch for it in done] == [T, T + 10_000, T + 20_000]
    assert all(it.metrics == RAPTOR_METRICS and it.complete for it in done)
    assert all(it.problems == [] for it in done) and collector.orphans == 0


def test_apps_launching_at_once_each_keep_their_own_marks() -> None:
    """app.one's marks were orphans once app.two launched 50 ms later (a tester's find)."""
    one = brief_iteration(T, noise=False, app="app.one")
    two = brief_iteration(T + 50, noise=False, app="app.two")
    lines = [one[0], two[0]] + [
        mark for pair in zip(one[1:], two[1:], strict=True) for mark in pair
    ]
    done, collector = collect(lines)
    assert [(it.app, it.metrics, it.complete) for it in done] == [
        ("app.one", RAPTOR_METRICS, True),
        ("app.two", RAPTOR_METRICS, True),
    ]
    assert collector.orphans == 0


def test_every_launch_still_open_at_the_end_is_reported_with_its_marks() -> None:
    one = brief_iteration(T, noise=False, app="app.one")
    two = brief_iteration(T + 50, noise=False, app="app.two")
    done, _ = collect([one[0], two[0], one[1], two[1], one[2]])
    assert [(it.app, list(it.metrics), it.problems) for it in done] == [
        (
            "app.one",
            ["coldlaunch.navigationLoaded", "coldlaunch.navigationInteractive"],
            ["the log ends before fullyLoaded"],
        ),
        ("app.two", ["coldlaunch.navigationLoaded"], ["the log ends before fullyLoaded"]),
    ]


def test_a_launch_ended_by_the_next_launch_says_so() -> None:
    """It said "the log ends before fullyLoaded" while the log went on."""
    done, _ = collect(brief_iteration(T)[:4] + brief_iteration(T + 10_000))
    assert done[0].problems == ["the app launched again before fullyLoaded"]
    assert done[1].complete is True


def test_a_fractional_epoch_is_no_raptor_epoch_and_is_named() -> None:
    """Raptor's epoch is Date.now(), whole ms; 123.75 was cut to 123 in silence."""
    lines = brief_iteration(T, noise=False)
    fractional = lines[1].replace(f"|{T + 214}", f"|{T + 214}.75")
    assert parse_line(fractional) is None
    lines[1] = fractional
    done, _ = collect(lines)
    assert "coldlaunch.navigationLoaded" not in done[0].metrics
    (problem,) = done[0].problems
    assert problem.endswith(
        f": epoch '{T + 214}.75' has a fraction: Raptor logs whole milliseconds (Date.now()), "
        "so it is no Raptor epoch"
    )


@pytest.mark.parametrize(
    ("epoch", "why"),
    [
        ("1e12", "epoch '1e12' is not whole milliseconds since 1970 (digits only)"),
        ("-5", "epoch '-5' is not whole milliseconds since 1970 (digits only)"),
        ("1" + "0" * 16, "epoch '1" + "0" * 16 + "' is past 10^15 ms since 1970"),
        # int() raised ValueError on 4,300 digits
        ("9" * 5000, "epoch '" + "9" * 40 + "'... (5000 characters) is past 10^15 ms since 1970"),
    ],
)
def test_an_unreadable_mark_names_what_is_wrong(epoch: str, why: str) -> None:
    lines = brief_iteration(T, noise=False)
    lines[1] = lines[1].replace(f"|{T + 214}", f"|{epoch}")
    done, _ = collect(lines)
    assert done[0].problems[0].endswith(f": {why}")


def test_displayed_during_a_raptor_launch_is_one_more_figure_of_it() -> None:
    """Android's line cut the Raptor launch short (its later marks became orphans)."""
    lines = brief_iteration(T, noise=False)
    lines.insert(3, "I/ActivityManager(  873): Displayed clock.gaiamobile.org/.Main: +212ms")
    done, collector = collect(lines)
    assert len(done) == 1 and collector.orphans == 0
    assert done[0].metrics == {**RAPTOR_METRICS, "coldlaunch.displayed": 212.0}
    assert done[0].complete is True


def test_displayed_after_fully_loaded_is_a_native_iteration_of_its_own() -> None:
    lines = [
        *brief_iteration(T, noise=False),
        "I/ActivityManager(  873): Displayed clock.gaiamobile.org/.Main: +212ms",
    ]
    done, _ = collect(lines)
    assert [it.metrics for it in done] == [RAPTOR_METRICS, {"coldlaunch.displayed": 212.0}]


def test_a_replayed_threadtime_launch_line_counts_once() -> None:
    displayed = (
        "11-22 05:00:00.000   873   901 I ActivityTaskManager: Displayed com.a/.Main: +987ms"
    )
    done, _ = collect([displayed, RESTART, displayed])
    assert [it.metrics for it in done] == [{"coldlaunch.displayed": 987.0}]


def test_the_marks_remembered_against_replays_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(iterations_module, "REMEMBERED", 8)
    collector = LaunchCollector()
    for i in range(5):
        for line in brief_iteration(T + i * 10_000):
            collector.feed(line)
    assert len(collector.seen) <= 8 and collector.count == 5


def test_a_mark_whose_name_cannot_name_a_metric_is_left_out_and_named() -> None:
    """A tester's "hero image loaded" failed every iteration of its job (the runner refuses
    the metric name), where `labd markers` read it: the launch keeps its other marks."""
    lines = brief_iteration(T, noise=False)
    lines.insert(2, lines[1].replace("navigationLoaded", "hero image loaded"))
    done, _ = collect(lines)
    assert done[0].metrics == RAPTOR_METRICS
    assert done[0].problems == [
        "'coldlaunch.hero image loaded': not a metric name (letters, digits and _ . : / -, at "
        "most 128 characters); left out"
    ]


def test_a_mark_already_named_coldlaunch_is_not_prefixed_twice() -> None:
    """An app that logs `coldlaunch.heroLoaded` gave `coldlaunch.coldlaunch.heroLoaded`."""
    lines = brief_iteration(T, noise=False)
    lines.insert(2, lines[1].replace("navigationLoaded", "coldlaunch.heroLoaded"))
    done, _ = collect(lines)
    assert done[0].metrics == {
        **RAPTOR_METRICS,
        "coldlaunch.heroLoaded": RAPTOR_METRICS["coldlaunch.navigationLoaded"],
    }
    assert done[0].problems == []
