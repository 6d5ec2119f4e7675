"""Gesture metrics from frames: jank is a late frame while moving, not arrival jitter, a lone
change or a pause; input-to-change is measured per input."""

from __future__ import annotations

import pytest

from labd.capture.motion import Frame, gesture_metrics

INTERVAL = 1000 / 60


def frames_of(pattern: str, times: list[float] | None = None) -> list[Frame]:
    """'U' a new frame, '.' a repeat, one per interval (or at the given times)."""
    return [
        Frame(i, times[i] if times else i * INTERVAL, c == "U") for i, c in enumerate(pattern)
    ]


def test_repeated_frames_while_moving_are_jank_and_the_rest_is_not() -> None:
    moving = "UUUUU.UUUUU..UUUU"  # two late frames: one interval missed, then two
    rest = "." * 30 + "U" + "." * 5 + "U" + "." * 30  # a tap's highlight on and off
    values = gesture_metrics(frames_of(moving + rest), [0.0], variable_rate=False)
    assert values["janky_frames"] == 2
    assert values["missed_frames"] == 3
    assert values["frame_time_p50_ms"] == pytest.approx(INTERVAL, abs=1e-3)
    assert values["unique_frames"] == moving.count("U") + 2


def test_frames_that_arrive_in_bunches_are_not_jank() -> None:
    """A variable-rate capture where every other frame reaches the host late, together with
    the next (2 ms apart), and one stall of seven frames that then arrive at once."""
    times = [k * INTERVAL + (INTERVAL - 2 if k % 2 == 0 else 0) for k in range(40)]
    times += [times[-1] + 7 * INTERVAL + k for k in range(7)]  # a stall, then a burst
    times += [times[-1] + INTERVAL * (k + 1) for k in range(10)]
    smooth = gesture_metrics(frames_of("U" * len(times), times), [0.0], variable_rate=True)
    assert smooth["unique_fps"] == pytest.approx(60, rel=0.05)
    assert smooth["janky_frames"] == 0
    times[21:] = [v + INTERVAL for v in times[21:]]  # one frame really late
    late = gesture_metrics(frames_of("U" * len(times), times), [0.0], variable_rate=True)
    assert late["janky_frames"] == 1 and late["missed_frames"] == 1


def test_a_source_that_sends_every_frame_is_counted_in_frames_not_arrival_times() -> None:
    pattern = "U" * 30 + "." * 30  # moving, then at rest: the source sent unchanged frames
    times = [i * INTERVAL + (25 if i % 3 == 0 else 0) for i in range(60)]  # host jitter
    values = gesture_metrics(frames_of(pattern, times), [0.0], variable_rate=True)
    assert values["janky_frames"] == 0


def test_input_to_first_change_is_the_median_over_inputs() -> None:
    pattern = "." * 10 + "UUU" + "." * 20 + "UU" + "." * 10
    frames = frames_of(pattern)
    inputs = [5 * INTERVAL, 28 * INTERVAL, 40 * INTERVAL]  # the last changes nothing
    values = gesture_metrics(frames, inputs, variable_rate=False)
    assert values["input_to_first_change_ms"] == pytest.approx(5 * INTERVAL, abs=1e-3)
    assert gesture_metrics(frames, [], variable_rate=False) == {}
