"""What a gesture looked like on screen (Eideticker's scrolling and panning measures): from
the frames of a recording, which ones changed, and when input was sent.

- unique frame rate while the content moved, and the time between new frames (percentiles);
- jank: while the content moves (new frames on every frame interval on both sides), a new
  frame that came one or more intervals late (frames repeated). Frame times ignore gaps
  longer than IDLE_MS (the content at rest). A capture that holds unchanged frames (a fifth
  or more) sends every frame: gaps are counted in its frames, whenever the host received
  them. Otherwise (a phone's screenrecord sends a frame only on change) gaps are measured
  in time, and the host's own delays (a stall, then a burst) are told apart from the
  device's as far as arrival times allow: on a loaded host this count is the weak one;
- input to first change: from each input's dispatch to the first new frame after it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

IDLE_MS = 250.0
MAX_JANK_SLOTS = 8
REPEATS_FOR_CONSTANT = 0.2


@dataclass(frozen=True)
class Frame:
    index: int  # in the capture
    t_ms: float  # on the clock the inputs were timed with
    unique: bool  # differs from the frame before


def gesture_metrics(
    frames: list[Frame],
    inputs_ms: list[float],
    variable_rate: bool,
    refresh_hz: float = 60.0,
) -> dict[str, float]:
    """Metrics of the frames from the first input on; {} when no input was sent."""
    if not inputs_ms or not frames:
        return {}
    window = [f for f in frames if f.t_ms >= inputs_ms[0]]
    new = [f for f in window if f.unique]
    values: dict[str, float] = {"unique_frames": float(len(new))}
    delays = _input_to_change(frames, inputs_ms)
    if delays:
        values["input_to_first_change_ms"] = round(float(np.median(delays)), 3)
    if len(new) < 2:
        values |= {"janky_frames": 0.0, "missed_frames": 0.0}
        return values
    times = np.array([f.t_ms for f in new])
    gaps = np.diff(times)
    moving = gaps[gaps <= IDLE_MS]
    if moving.size:
        p50, p90, p99 = np.percentile(moving, [50, 90, 99])
        values |= {"frame_time_p50_ms": round(float(p50), 3),
                   "frame_time_p90_ms": round(float(p90), 3),
                   "frame_time_p99_ms": round(float(p99), 3),
                   "unique_fps": round(1000.0 / float(moving.mean()), 3)}  # fmt: skip
    # A source that sends unchanged frames sends every frame (a capture card, a paced grab):
    # its frame numbers are the truth, whatever the host's arrival times say.
    repeats = sum(not f.unique for f in frames) / len(frames)
    slots = _slots(new, gaps, variable_rate and repeats < REPEATS_FOR_CONSTANT, refresh_hz)
    janky = _janky(slots)
    values["janky_frames"] = float(janky.sum())
    values["missed_frames"] = float((slots[janky] - 1).sum())
    return values


def _janky(slots: np.ndarray) -> np.ndarray:
    """Gaps of 2 to MAX_JANK_SLOTS frame intervals with motion on both sides: the new frame
    before the gap followed one a frame earlier, and the one after it is followed by one a
    frame later. A lone change (a tap's highlight) or the start or end of a movement is not
    jank, nor is a longer pause."""
    long = (slots >= 2) & (slots <= MAX_JANK_SLOTS)
    before = np.concatenate(([False], slots[:-1] == 1))
    after = np.concatenate((slots[1:] == 1, [False]))
    return long & before & after


def _slots(
    new: list[Frame],
    gaps: np.ndarray,
    variable_rate: bool,
    refresh_hz: float,
) -> np.ndarray:
    """How many frame intervals each gap between new frames spans. A variable-rate capture
    is measured in the run's usual interval while moving (the median gap), else in display
    refreshes. Frames only ever arrive late: a host stall shows as a long gap followed by a
    burst of short ones (under half an interval), and the stall and its burst together span
    as many intervals as frames came, unless more time passed than that."""
    if not variable_rate:
        return np.diff(np.array([f.index for f in new]))
    moving = gaps[gaps <= IDLE_MS]
    unit = float(np.median(moving)) if moving.size else 1000.0 / refresh_hz
    slots = np.maximum(1, np.round(gaps / unit)).astype(int)
    i = 0
    while i < len(gaps):
        if gaps[i] >= unit / 2 or i == 0:
            i += 1
            continue
        end = i
        while end < len(gaps) and gaps[end] < unit / 2:
            end += 1
        group = slice(i - 1, end)  # the stall and its burst
        count = end - (i - 1)
        total = max(count, round(float(gaps[group].sum()) / unit))
        slots[group] = 1
        slots[i - 1] += total - count
        i = end
    return slots


def _input_to_change(frames: list[Frame], inputs_ms: list[float]) -> list[float]:
    """Per input, the first new frame after it and before the next input."""
    delays = []
    bounds = [*inputs_ms[1:], math.inf]
    changes = [f.t_ms for f in frames if f.unique]
    at = 0
    for sent, next_sent in zip(inputs_ms, bounds, strict=True):
        while at < len(changes) and changes[at] <= sent:
            at += 1
        if at < len(changes) and changes[at] < next_sent:
            delays.append(changes[at] - sent)
    return delays
