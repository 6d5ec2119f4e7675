"""A guard against slow cycles: rank-scan alerts that keep undoing each other are a cycle.

A weekly cycle of one or two noise deviations makes a level test alarm every half period: up,
down, up, each undoing the one before. An alert raised cannot be taken back, so the first two
stand; but once two alerts have undone each other at a cycle's pace, a third that undoes the
second, about as far apart again, continues the cycle and is not reported. A revert (a step
undone 8-20 builds later) is two changes and stays two: the guard needs the pattern twice,
half periods of at least MIN_HALF builds, and rank-scan alerts (a step ETS raised within a few
builds is no slow cycle's excursion).
"""

from __future__ import annotations

from collections.abc import Sequence

from labd.stats.alert import Alert

MIN_HALF = 20  # builds: a weekly cycle's half period is longer than a revert
RETURN_TOLERANCE = 0.5  # an undoing move within this share of the move it undoes
PACE_RATIO = 2.0  # half periods this far apart (either way) still keep one pace


def undoes(earlier: Alert, later: Alert) -> bool:
    """Whether `later` moves back by about `earlier`'s move, at least MIN_HALF builds on,
    both found by the rank scan."""
    if earlier.method != "rank" or later.method != "rank":
        return False
    if later.direction == earlier.direction or later.index - earlier.index < MIN_HALF:
        return False
    return abs(later.magnitude + earlier.magnitude) <= RETURN_TOLERANCE * abs(earlier.magnitude)


def cycle_filtered(alerts: Sequence[Alert]) -> list[Alert]:
    """The alerts that do not continue a cycle. Each verdict uses only the alerts raised by
    the time the alert itself was (suppressed ones too: a cycle goes on, reported or not)."""
    seen: list[Alert] = []
    kept: list[Alert] = []
    for alert in sorted(alerts, key=lambda a: a.index):
        prior = last_two_raised(seen, alert.raised_at)
        cycling = False
        if len(prior) >= 2:
            second, last = prior[-2], prior[-1]
            gaps = (last.index - second.index, alert.index - last.index)
            cycling = (
                undoes(second, last) and undoes(last, alert) and max(gaps) <= PACE_RATIO * min(gaps)
            )
        if not cycling:
            kept.append(alert)
        seen.append(alert)
    return kept


def last_two_raised(seen: Sequence[Alert], by: int) -> list[Alert]:
    """The last two of `seen` (in their order) raised by build `by`: from the end, as most
    are (a long history has thousands of alerts, and each verdict needs only two)."""
    found: list[Alert] = []
    for a in reversed(seen):
        if a.raised_at <= by:
            found.insert(0, a)
            if len(found) == 2:
                break
    return found
