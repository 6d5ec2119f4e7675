"""A vote: a more sensitive rank scan whose alerts stand only when the CUSUM agrees.

A shift of one or two noise deviations in wide noise ranks clearly only after 10-15 builds;
a lower bar for the rank scan finds more of them, and alone it would also follow every slow
cycle and long tail. Its alerts are kept only when a second, different detector (the CUSUM of
robustly standardised values, with the long-run scale and the interquartile floor) finds a
change the same way within `within` builds of its date: the two err on different builds, so
they rarely agree on noise (the voting ensembles of the Mozilla study, "Exploring Statistical
Change Point Detection Techniques for Performance Anomaly Detection at Mozilla", 2026). An
agreed alert is raised when both have raised theirs: the vote stays online.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from labd.stats.alert import Alert, describe_change, sketch_change
from labd.stats.cusum import detect_cusum
from labd.stats.rankscan import detect_rank_scan
from labd.stats.segments import Values

VOTE_THRESHOLD = 3.0  # the sensitive scan's bar, chosen leave-one-family-out
VOTE_WITHIN = 5  # builds between the two dates (the benchmarks' matching margin)


def same_change(alert: Alert, taken: Sequence[Alert], gap: int) -> bool:
    """Whether `alert` is a change already taken: dated within `gap` builds of one, or its
    evidence (from its date to the build that raised it) holds one."""
    return Taken(taken).holds(alert, gap)


class Taken:
    """The dates of the changes taken, sorted: whether an alert is one of them is a question
    about one range of dates (a long history has thousands of alerts)."""

    def __init__(self, taken: Sequence[Alert]) -> None:
        self.indices = sorted(b.index for b in taken)

    def holds(self, alert: Alert, gap: int) -> bool:
        """same_change: a taken date within `gap` builds of the alert's, or from its date to
        its alarm, is one in [index - gap, max(index + gap, raised_at)]."""
        first = bisect.bisect_left(self.indices, alert.index - gap)
        last = max(alert.index + gap, alert.raised_at)
        return first < len(self.indices) and self.indices[first] <= last


def voted(
    x: Sequence[float],
    taken: Sequence[Alert],
    gap: int,
    threshold: float = VOTE_THRESHOLD,
    within: int = VOTE_WITHIN,
    calibrate: float = 2.0,
    window: int = 30,
    scans: dict[tuple[int, ...], Any] | None = None,
) -> list[Alert]:
    """The sensitive scan's alerts that are new (not a change in `taken`) and that the CUSUM
    agrees with. `scans` shares the rank statistics with the ensemble's own scan."""
    starts: dict[int, int] = {}  # the build that raised each alert: its segment's start

    def sketch(values: Values, start: int, index: int, end: int, raised: int, method: str) -> Alert:
        starts[raised] = start
        return sketch_change(values, start, index, end, raised, method)

    # Most of the sensitive scan's alerts are changes already taken: each is described in
    # full (its interval and confidence) only once it is a candidate.
    sensitive = detect_rank_scan(
        x,
        threshold=threshold,
        calibrate=calibrate,
        after=window,
        before=window,
        cache=scans,
        describe=sketch,
    )
    values = np.asarray(x, dtype=float)
    already = Taken(taken)
    candidates = [
        describe_change(values, starts[a.raised_at], a.index, a.raised_at + 1, a.raised_at, "rank")
        for a in sensitive
        if not already.holds(a, gap)
    ]
    if not candidates:
        return []  # the CUSUM costs more than the scan: run it only when there is a question
    cusum = detect_cusum(
        x,
        threshold=7.0,
        drift=1.1,
        clip=3.0,
        long_run=True,
        spread=True,
        until=max(a.index for a in candidates) + within,
    )
    # The CUSUM's alerts by direction, in date order: each candidate asks about a few dates.
    dated: dict[str, tuple[list[int], list[int]]] = {"up": ([], []), "down": ([], [])}
    for b in sorted(cusum, key=lambda b: b.index):
        dated[b.direction][0].append(b.index)
        dated[b.direction][1].append(b.raised_at)
    agreed = []
    for alert in candidates:
        indices, raised = dated[alert.direction]
        near = raised[
            bisect.bisect_left(indices, alert.index - within) : bisect.bisect_right(
                indices, alert.index + within
            )
        ]
        if near:
            agreed.append(dataclasses.replace(alert, raised_at=max(alert.raised_at, min(near))))
    return agreed
