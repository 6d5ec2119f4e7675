"""A two-sided CUSUM of robustly standardised values, for small sustained shifts and creeps."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from labd.stats.alert import Alert, describe_change
from labd.stats.segments import (
    IQR_TO_SD,
    NOISE_SPAN,
    Values,
    fresh_start,
    interquartile,
    memory,
    noise_scale,
    onset,
    settled,
    trends,
    widen,
)

MEMORY_RHO = 0.5  # chosen by the detection benchmark with NOISE_SPAN (docs/detection-rounds.md)
HINDSIGHT = 10  # builds after a CUSUM alarm that help date its change (docs/detection-rounds.md)


def detect_cusum(
    x: Sequence[float],
    threshold: float = 7.0,
    drift: float = 1.1,
    clip: float = 3.5,
    warmup: int = 10,
    min_change: float = 0.0,
    long_run: bool = False,
    spread: bool = False,
    until: int | None = None,
) -> list[Alert]:
    """Two-sided CUSUM of values standardised against the running (clipped) mean of the
    current segment, so the reference sharpens as builds accumulate.

    With `long_run`, the noise scale is widened by the lag-1 autocorrelation the recent
    segments show (the long-run deviation of AR(1) noise): a sum of correlated values strays
    further than one of independent ones. With `spread`, the scale is no smaller than the
    interquartile range of the segment says: with several modes, the MAD and the successive
    differences see one mode's width, not the whole spread. With `until`, the sum stops once a
    segment starts after that build: every alert the whole run dates at or before it is found
    (a later segment dates none there), for a vote that asks about a few dates."""
    alerts: list[Alert] = []
    segments: list[tuple[int, int]] = []  # (start, change) of the segments already closed
    n = len(x)
    # The loop below reads one value at a time (fastest from a list); the helpers take slices
    # (views of an array, no copies).
    values = np.asarray(x, dtype=float)
    start = 0
    last = n if until is None else until
    while start + warmup < n and start <= last:
        mean, sd = fresh_start(values, start, warmup, segments)
        base_sd = sd
        if long_run or spread:
            sd = _widened(values, segments, start, start + warmup, sd, long_run, spread)
        total, count = mean * warmup, warmup
        up = down = 0.0
        up_from = down_from = start + warmup
        fired = False
        for t in range(start + warmup, n):
            stretch = widen(count, 1.96) / 1.96
            z = max(-clip, min(clip, (x[t] - total / count) / (sd * stretch)))
            if up == 0.0:
                up_from = t
            if down == 0.0:
                down_from = t
            up = max(0.0, up + z - drift)
            down = max(0.0, down - z - drift)
            if up > threshold or down > threshold:
                index = up_from if up > threshold else down_from
                segments.append((start, index))
                rho = memory(values, segments, index)
                # Dated with hindsight where the history has it: a creep's ramp is clearer
                # some builds on. Never before the builds that set the reference, nor after
                # the alarm.
                dated = onset(values, start, min(n, t + 1 + HINDSIGHT), index)
                index = min(max(dated, start + warmup), t)
                alert = describe_change(values, start, index, t + 1, t, "cusum")
                # On a series that wanders (a random walk, a season) the CUSUM, which
                # assumes independent noise around a level, alarms on the wandering. And
                # where the history's own first builds already trend the way it alarms, it
                # alarms on that trend: no build of it is where a change began.
                inherited = (
                    start == 0 and index == warmup and trends(values[:warmup], alert.direction)
                )
                if abs(alert.magnitude) >= min_change and rho <= MEMORY_RHO and not inherited:
                    alerts.append(alert)
                # Start afresh after the alarm: a segment that began at an early-dated
                # change would hold old values and alarm again for the same change.
                start, fired = settled(values, t + 1, alert.direction), True
                break
            if up == 0.0 and down == 0.0:  # only quiet builds refine the reference
                total += total / count + z * sd * stretch
                count += 1
                if count % 10 == 0 and count >= 30:
                    # Enough quiet builds to measure the noise itself: the fresh start's
                    # estimate from a few builds errs on the wide side.
                    base_sd = noise_scale(values, [*segments, (start, t + 1)], t + 1) or base_sd
                    sd = base_sd
                    if long_run or spread:
                        sd = _widened(values, segments, start, t + 1, sd, long_run, spread)
        if not fired:
            break
    return alerts


def _widened(
    x: Values,
    segments: list[tuple[int, int]],
    start: int,
    end: int,
    sd: float,
    long_run: bool,
    spread: bool,
) -> float:
    if spread:
        recent_values = np.asarray(x[max(start, end - NOISE_SPAN) : end], dtype=float)
        if recent_values.size >= 10:
            sd = max(sd, interquartile(recent_values) / IQR_TO_SD)
    if long_run:
        rho = min(max(memory(x, [*segments, (start, end)], end), 0.0), MEMORY_RHO)
        sd *= math.sqrt((1 + rho) / (1 - rho))
    return sd
