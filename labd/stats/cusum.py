"""A two-sided CUSUM of robustly standardised values, for small sustained shifts and creeps."""

from __future__ import annotations

from collections.abc import Sequence

from labd.stats.alert import Alert, describe_change
from labd.stats.segments import (
    fresh_start,
    memory,
    noise_scale,
    onset,
    settled,
    trends,
    widen,
)

MEMORY_RHO = 0.5  # chosen by the detection benchmark with NOISE_SPAN (see the README)
HINDSIGHT = 10  # builds after a CUSUM alarm that help date its change (see the README)


def detect_cusum(
    x: Sequence[float],
    threshold: float = 7.0,
    drift: float = 1.1,
    clip: float = 3.5,
    warmup: int = 10,
    min_change: float = 0.0,
) -> list[Alert]:
    """Two-sided CUSUM of values standardised against the running (clipped) mean of the
    current segment, so the reference sharpens as builds accumulate."""
    alerts: list[Alert] = []
    segments: list[tuple[int, int]] = []  # (start, change) of the segments already closed
    n = len(x)
    start = 0
    while start + warmup < n:
        mean, sd = fresh_start(x, start, warmup, segments)
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
                rho = memory(x, segments, index)
                # Dated with hindsight where the history has it: a creep's ramp is clearer
                # some builds on. Never before the builds that set the reference, nor after
                # the alarm.
                dated = onset(x, start, min(n, t + 1 + HINDSIGHT), index)
                index = min(max(dated, start + warmup), t)
                alert = describe_change(x, start, index, t + 1, t, "cusum")
                # On a series that wanders (a random walk, a season) the CUSUM, which
                # assumes independent noise around a level, alarms on the wandering. And
                # where the history's own first builds already trend the way it alarms, it
                # alarms on that trend: no build of it is where a change began.
                inherited = start == 0 and index == warmup and trends(x[:warmup], alert.direction)
                if abs(alert.magnitude) >= min_change and rho <= MEMORY_RHO and not inherited:
                    alerts.append(alert)
                # Start afresh after the alarm: a segment that began at an early-dated
                # change would hold old values and alarm again for the same change.
                start, fired = settled(x, t + 1, alert.direction), True
                break
            if up == 0.0 and down == 0.0:  # only quiet builds refine the reference
                total += total / count + z * sd * stretch
                count += 1
                if count % 10 == 0 and count >= 30:
                    # Enough quiet builds to measure the noise itself: the fresh start's
                    # estimate from a few builds errs on the wide side.
                    sd = noise_scale(x, [*segments, (start, t + 1)], t + 1) or sd
        if not fired:
            break
    return alerts
