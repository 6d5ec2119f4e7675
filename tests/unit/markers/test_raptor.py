"""Raptor's logcat marks, parsed line by line and assembled into cold-launch iterations."""

from __future__ import annotations

import pytest

from labd.markers import LaunchCollector, Mark, parse_line
from labd.markers.raptor import Launch, pid_of
from tests.markers_log import (
    OFFSETS,
    SEED_LAUNCH,
    SEED_VISUALLY,
    brief_iteration,
    threadtime_iteration,
)


def collect(
    lines: list[str], app: str | None = None
) -> tuple[list[dict[str, object]], LaunchCollector]:
    collector = LaunchCollector(app)
    done = [it.as_dict() for line in lines if (it := collector.feed(line)) is not None]
    if (last := collector.finish()) is not None:
        done.append(last.as_dict())
    return done, collector


def test_the_seed_lines() -> None:
    launch = parse_line(SEED_LAUNCH)
    assert pid_of(SEED_LAUNCH) == 5582
    assert launch == Mark(
        "verticalhome.gaiamobile.org",
        "mark",
        "appLaunch",
        "clock.gaiamobile.org",
        80081.16972,
        0.0,
        1434771804212,
    )
    visually = parse_line(SEED_VISUALLY)
    assert isinstance(visually, Mark)
    assert (pid_of(SEED_VISUALLY), visually.context, visually.name, visually.epoch) == (
        6118,
        "clock.gaiamobile.org",
        "visuallyLoaded",
        1434771805380,
    )
    # Across processes, through the epoch: 1168 ms from the tap to visually loaded.
    done, _ = collect([SEED_LAUNCH, SEED_VISUALLY])
    assert done[0]["metrics"] == {"coldlaunch.visuallyLoaded": 1168.0}
    assert done[0]["complete"] is False


@pytest.mark.parametrize("make", [brief_iteration, threadtime_iteration])
def test_iterations_in_both_logcat_formats(make) -> None:  # type: ignore[no-untyped-def]
    lines = make(1434771804212) + make(1434771900000)
    done, _ = collect(lines)
    assert len(done) == 2
    for it in done:
        assert it["complete"] is True
        assert it["app"] == "clock.gaiamobile.org"
        assert it["metrics"] == {f"coldlaunch.{k}": float(v) for k, v in OFFSETS.items()}
    assert pid_of(lines[-1]) in (6118, 7001)


def test_measures_and_the_context_override() -> None:
    lines = brief_iteration(1000, noise=False)
    lines.insert(
        2,
        "I/PerformanceTiming( 6118): Performance Entry: clock.gaiamobile.org|measure|alarmsLoaded|5.0|123.456000|1100",
    )
    lines.insert(
        3,
        "I/PerformanceTiming( 9000): Performance Entry: sms.gaiamobile.org|mark|visuallyLoaded|1.0|0.0|1100",
    )
    done, collector = collect(lines)
    assert done[0]["metrics"]["coldlaunch.alarmsLoaded"] == pytest.approx(123.456)
    assert "coldlaunch.visuallyLoaded" in done[0]["metrics"]  # the clock's, not the sms app's
    assert done[0]["metrics"]["coldlaunch.visuallyLoaded"] == 798.0
    assert collector.orphans == 1  # the sms app's mark belongs to no launch


def test_native_launch_lines() -> None:
    lines = [
        "I/ActivityManager(  873): Displayed com.android.settings/.Settings: +1s234ms",
        "11-22 05:00:00.000   873   901 I ActivityTaskManager: Fully drawn com.android.settings/.Settings: +1s500ms",
        "11-22 05:00:09.000   873   901 I ActivityTaskManager: Displayed com.android.settings/.Settings: +987ms (total +1s2ms)",
    ]
    assert pid_of(lines[0]) == 873
    assert parse_line(lines[0]) == Launch(
        "displayed", "com.android.settings/.Settings", "com.android.settings", 1234.0
    )
    done, _ = collect(lines, app="com.android.settings")
    assert [it["metrics"] for it in done] == [
        {"coldlaunch.displayed": 1234.0, "coldlaunch.fullyDrawn": 1500.0},
        {"coldlaunch.displayed": 987.0},
    ]


def test_what_real_logs_do() -> None:
    first = brief_iteration(10_000)
    second = brief_iteration(20_000)
    lines = [
        *first[:4],
        "--------- beginning of main",  # logcat restarted: it dumps its buffer again
        *first,
        "I/PerformanceTiming( 6118): Performance Entry: clock.gaiamobile.org|mark|fullyLo",  # truncated
        "\x00\x01garbage \ufffd\ufffd Performance Entry: |||",
        "I/PerformanceTiming( 6118): Performance Entry: clock.gaiamobile.org|mark|x|1|0|not-a-number",
        *second[:3],
        "I/PerformanceTiming( 6118): Performance Entry: clock.gaiamobile.org|measure|db|1|12.5ms|20010",
        # the wall clock jumped back by an hour mid-iteration
        "I/PerformanceTiming( 6118): Performance Entry: clock.gaiamobile.org|mark|visuallyLoaded|1|0|16400000",
        *second[5:],
    ]
    done, _ = collect(lines)
    assert len(done) == 2
    assert done[0]["metrics"] == {f"coldlaunch.{k}": float(v) for k, v in OFFSETS.items()}
    assert done[1]["metrics"]["coldlaunch.fullyLoaded"] == 802.0
    assert done[1]["problems"] == [
        "db: duration '12.5ms' is not a number; left out",
        "visuallyLoaded: 16380000 ms from the launch (a clock jump?); left out",
    ]


def test_a_wrapped_buffer_loses_the_launch() -> None:
    lines = brief_iteration(10_000)[3:] + brief_iteration(20_000)
    done, collector = collect(lines)
    assert len(done) == 1 and done[0]["launch_epoch"] == 20_000
    assert collector.orphans == 4


@pytest.mark.parametrize(
    ("duration", "problem"),
    [
        ("nan", "nan is not a finite number"),
        ("inf", "inf is not a finite number"),
        ("-inf", "-inf is not a finite number"),
        ("1e400", "inf is not a finite number"),  # too large for a float
        ("1e300", "1e+300 is out of range: magnitudes from 1e-100 to 1e+100 (or 0)"),
        ("-5", "below zero"),
    ],
)
def test_a_duration_that_is_no_time_is_a_garbled_line_left_out_with_its_reason(
    duration: str, problem: str
) -> None:
    line = f"I/PerformanceTiming( 6118): Performance Entry: clock.gaiamobile.org|measure|db|1|{duration}|1100"
    assert parse_line(line) is None
    lines = brief_iteration(1000, noise=False)
    lines.insert(2, line)
    done, _ = collect(lines)
    assert "coldlaunch.db" not in done[0]["metrics"]
    assert done[0]["problems"] == [f"db: duration {duration!r}: {problem}; left out"]
    assert done[0]["metrics"]["coldlaunch.fullyLoaded"] == 802.0  # the rest is measured


def test_a_start_or_a_launch_time_no_float_holds_is_a_garbled_line() -> None:
    start = "I/PerformanceTiming( 6118): Performance Entry: clock.gaiamobile.org|mark|x|nan|0|1100"
    huge = "I/ActivityManager(  873): Displayed com.a/.Main: +" + "9" * 400 + "s"
    assert parse_line(start) is None and parse_line(huge) is None
    assert collect([huge], app="com.a")[0] == []


@pytest.mark.parametrize("epoch", ["inf", "-inf", "nan", "1e308", "1e16", "143477_1804426"])
def test_an_epoch_that_is_no_time_is_named_not_a_crash(epoch: str) -> None:
    """`inf` raised OverflowError out of the collector; nan was dropped without a word; 1e308
    was named as a 309-digit number of ms."""
    line = (
        "I/PerformanceTiming( 6118): Performance Entry: "
        f"clock.gaiamobile.org|mark|visuallyLoaded|1|0|{epoch}"
    )
    assert parse_line(line) is None
    lines = brief_iteration(1000, noise=False)
    lines.insert(2, line)
    done, _ = collect(lines)
    assert done[0]["problems"][0].startswith("an unreadable mark left out: 'clock.gaiamobile")
    assert done[0]["metrics"]["coldlaunch.fullyLoaded"] == 802.0  # the rest is measured


def test_a_mark_logged_again_with_another_time_keeps_the_first_and_says_so() -> None:
    lines = brief_iteration(1000, noise=False)
    (visually,) = [line for line in lines if "|visuallyLoaded|" in line]
    epoch = int(visually.rsplit("|", 1)[1])
    lines.insert(lines.index(visually) + 1, visually.replace(f"|{epoch}", f"|{epoch - 300}"))
    done, _ = collect(lines)
    first = epoch - 1000
    assert done[0]["metrics"]["coldlaunch.visuallyLoaded"] == first
    assert done[0]["problems"] == [
        f"visuallyLoaded: logged again in this launch ({first} ms, then {first - 300} ms); "
        "the first kept"
    ]


def test_a_garbled_launch_mark_is_counted_where_no_launch_can_name_it() -> None:
    """A home screen's appLaunch with an epoch of nan vanished: its marks became orphans and
    nothing said why (a re-tester's find)."""
    lines = brief_iteration(1000, noise=False)
    (launch,) = [line for line in lines if "appLaunch" in line]
    lines[lines.index(launch)] = launch.rsplit("|", 1)[0] + "|nan"
    done, collector = collect(lines)
    assert done == [] and collector.unreadable == 1 and collector.orphans > 0
