"""A rank test that confirms an alert before it is reported.

The detectors standardise values by a noise scale: on noise with several modes, long tails or
values rounded to a timer's resolution, a run of values from one side of the distribution looks
like a change to them. Mann-Whitney's test asks instead whether the builds since the change rank
above (or below) the builds before it, whatever the distribution's shape, and uses only the
builds seen when the alert was raised: confirming costs no build of delay.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from labd.stats.alert import Alert

BEFORE = 30  # builds before the change the test compares with (fewer after an earlier change)


def rank_confirmed(x: Sequence[float], alert: Alert, since: int, p_limit: float) -> bool:
    """Whether x[alert.index : alert.raised_at + 1] ranks on the alert's side of the builds
    before it (from `since`, the previous change, at most BEFORE of them) with p < p_limit."""
    before = np.asarray(x[max(since, alert.index - BEFORE) : alert.index], dtype=float)
    after = np.asarray(x[alert.index : alert.raised_at + 1], dtype=float)
    if before.size < 3 or after.size < 1:
        return True  # too few builds to test: the detector's own evidence stands
    side = "greater" if alert.direction == "up" else "less"
    p = float(stats.mannwhitneyu(after, before, alternative=side).pvalue)
    return p < p_limit
