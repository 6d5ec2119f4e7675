"""An online rank scan: a windowed Mann-Whitney test over every split of the recent builds.

At each build t, every split s of the last `after` builds is tested: the builds from s to t
against the (up to `before`) builds before s, since the last change, by the sum of the signs of
all their pairwise differences (Mann-Whitney's statistic), standardised by its variance under
exchangeable noise. The largest of them is the scan's statistic at t; the split that gives it
dates the change. It looks at ranks only, so noise of any shape (several modes, long tails,
values rounded to a timer's resolution) gives the same false-alarm rate, and a shift of one or
two noise deviations adds up over the builds after it where a CUSUM's allowance never lets it.

Noise whose values depend on each other (daily cycles, autocorrelation) makes the statistic
stray further than exchangeable noise would let it. The scan therefore also asks for more than
`calibrate` times the median of its own statistic over the quiet builds before (its
behaviour on this history's noise), and raises nothing until it has seen enough of them.

After an alert the scan starts afresh at the change's date, not after the alarm: the builds
between the two are the new level's first builds, so the move back of a revert 8-20 builds
later has a reference in time. It raises nothing at a build it has already passed (the alert
stays online), and an alert in the same direction dated within `unfolding_span` builds after the
previous alarm is that change still unfolding (a creep, a cycle's slope), not a new one; nor
is one dated at the first monitored build of a history whose first builds already trend its way.

All splits at all builds come from one pass over the sign matrix of each build against the
`after + before` builds before it, a block of rows at a time: memory is linear in the history.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from labd.stats.alert import Alert, describe_change
from labd.stats.cusum import MEMORY_RHO
from labd.stats.segments import MAD_TO_SD, Values, median, memory, onset, settled, trends

SCAN_THRESHOLD = 3.75  # chosen leave-one-family-out (benchmarks/stats/lofo_bench.py)
HINDSIGHT = 10  # builds after an alarm that help date a creep (as the CUSUM's dating)
BLOCK = 256  # rows of the scan computed at once
FIRST_BLOCK = 64  # rows of a segment's first block (see blocks)
MEMORY_LAG = 5  # builds before a change's date left out of its autocorrelation estimate
# A change among the first builds (first_builds_split): measured on early steps and on noise
# shapes outside the families (docs/detection-rounds.md, eleventh round).
FIRST_SPLIT_Z, FIRST_SPLIT_SIZE, FIRST_SPLIT_SIDE = 4.0, 3.5, 10


def scan_statistics(
    x: NDArray[np.float64],
    lo: int,
    first: int,
    last: int,
    after: int,
    before: int,
    min_after: int,
    min_before: int,
) -> NDArray[np.float64]:
    """z[t - first, a - 1] for builds t in [first, last) and after-lengths a = 1..after: the
    standardised sum of sign(x_i - x_j) over i in [t - a + 1, t], j in the up to `before`
    builds before t - a + 1, none before `lo`. 0 where a side has too few builds."""
    width = after + before
    top = max(lo, first - after + 1)  # rows whose results the diagonal sums below need
    rows = np.arange(top, last)
    lags = np.arange(1, width + 1)
    earlier = rows[:, None] - lags[None, :]
    valid = earlier >= lo
    signs = np.where(valid, np.sign(x[rows][:, None] - x[np.maximum(earlier, 0)]), 0.0)
    # sums[i, m] = signs of row i against lags m .. m + before - 1 (the before-block of a
    # split m builds back), from the cumulative sum along the lags.
    cumulative = np.concatenate([np.zeros((rows.size, 1)), np.cumsum(signs, axis=1)], axis=1)
    m = np.arange(1, after + 1)
    sums = cumulative[:, m + before - 1] - cumulative[:, m - 1]
    # The statistic for after-length a at row t adds sums[t - r, a - r] for r < a: a sum
    # along a diagonal, one shift per after-length.
    diagonal = np.zeros_like(sums)
    diagonal[:, 0] = sums[:, 0]
    for a in range(1, after):
        diagonal[1:, a] = diagonal[:-1, a - 1] + sums[1:, a]
    keep = rows >= first
    t = rows[keep][:, None]
    counts_after = np.broadcast_to(m[None, :], (t.size, after))
    counts_before = np.minimum(before, t - m[None, :] + 1 - lo)
    ok = (counts_before >= min_before) & (counts_after >= min_after)
    variance = counts_after * counts_before * (counts_after + counts_before + 1) / 3.0
    z = np.zeros((t.size, after))
    z[ok] = diagonal[keep][ok] / np.sqrt(variance[ok])
    return z


def blocks(lo: int, n: int) -> list[int]:
    """The first builds of the blocks a segment from `lo` is scanned in: a short one first
    (most segments alarm within a few dozen builds, and a segment is scanned afresh after
    each alarm), then BLOCK builds at a time. The statistics do not depend on the blocks."""
    return [lo, *range(lo + FIRST_BLOCK, n, BLOCK)] if lo + FIRST_BLOCK < n else [lo]


def detect_rank_scan(
    x: Sequence[float],
    threshold: float = SCAN_THRESHOLD,
    calibrate: float = 2.0,
    after: int = 30,
    before: int = 30,
    min_after: int = 4,
    min_before: int = 10,
    quiet_span: int = 160,
    quiet_lag: int = 20,
    quiet_rows: int = 20,
    restart: str = "change",
    unfolding_span: int = 10,
    cache: dict[tuple[int, ...], tuple[NDArray[np.float64], NDArray[np.intp]]] | None = None,
    describe: Callable[[Values, int, int, int, int, str], Alert] = describe_change,
) -> list[Alert]:
    """Alerts where the rank scan's statistic passes `threshold` and `calibrate` times the
    median of its values over the quiet builds `quiet_lag` to `quiet_span` builds before
    (at least `quiet_rows` of them, in this segment or carried from the one before). After an
    alert the scan starts afresh at the change (`restart="change"`) or after the alarm
    (`"alarm"`, the second round's behaviour). Scans of one history with other thresholds
    share the statistics through `cache` (they depend on the segment, not on the bars);
    `describe` makes each alert from describe_change's arguments (the scan reads only its
    direction)."""
    if restart not in ("change", "alarm"):
        raise ValueError(f"restart must be 'change' or 'alarm', not {restart!r}")
    values = np.asarray(x, dtype=float)
    n = values.size
    alerts: list[Alert] = []
    segments: list[tuple[int, int]] = []  # (start, change) of the segments already closed
    lo = 0
    carried: float | None = None  # the quiet median of the segment before
    passed = -1  # the build of the last alarm: nothing is raised again at or before it
    while lo + min_before + min_after <= n:
        best = np.zeros(n - lo)  # the scan's statistic at each build of the segment
        factors: dict[int, float] = {}
        found: tuple[int, int] | None = None
        for first in blocks(lo, n):
            key = (lo, first, after, before, min_after, min_before)
            if cache is not None and key in cache:
                strength, splits = cache[key]
            else:
                z = np.abs(
                    scan_statistics(
                        values,
                        lo,
                        first,
                        min(n, first + (FIRST_BLOCK if first == lo else BLOCK)),
                        after,
                        before,
                        min_after,
                        min_before,
                    )
                )
                strength, splits = z.max(axis=1), z.argmax(axis=1)
                if cache is not None:
                    cache[key] = (strength, splits)
            offset = first - lo
            best[offset : offset + strength.size] = strength
            rows = np.flatnonzero(strength > threshold)
            for row in rows[rows > passed - lo - offset]:  # not a build already passed: an
                r = offset + int(row)  # alert there would not be online
                # Against this history's noise first (the cheaper test): calibrate times the
                # median statistic over the quiet builds before.
                quiet = best[max(0, r - quiet_span) : max(0, r - quiet_lag)]
                quiet = quiet[quiet > 0]
                if quiet.size >= quiet_rows:
                    need = calibrate * median(quiet)
                elif carried is not None:
                    need = calibrate * carried
                else:
                    continue  # nothing yet says how this history's noise behaves
                if best[r] <= need:
                    continue
                # Correlated noise: the long-run deviation of AR(1) noise, from the lag-1
                # autocorrelation of the recent segments before the change this split would
                # date (MEMORY_LAG builds before it: a date can be a few builds late). The
                # change's own builds are not the noise's memory: counted, a step raised the
                # bar against itself. Measured only where the statistic could pass.
                end = max(lo, lo + r - int(splits[row]) - MEMORY_LAG)
                if end not in factors:
                    rho = (
                        memory(values, [*segments, (lo, end)], end)
                        if end - lo >= 10 or segments
                        else 0.0
                    )
                    rho = min(max(rho, 0.0), MEMORY_RHO)
                    factors[end] = math.sqrt((1 + rho) / (1 - rho))
                if strength[row] > threshold * factors[end]:
                    found = (lo + r, int(splits[row]) + 1)
                    break
            if found:
                break
        if found is None:
            break
        t, length = found
        r = t - lo
        quiet = best[max(0, r - quiet_span) : max(0, r - quiet_lag)]
        quiet = quiet[quiet > 0]
        if quiet.size >= quiet_rows:
            carried = float(np.median(quiet))
        # Dated by the split with the strongest evidence, or where a ramp began when a
        # flat-then-straight line fits better (with up to HINDSIGHT builds after the alarm,
        # as the CUSUM dates a creep); never before the builds that set the reference.
        index = onset(values, lo, min(n, t + 1 + HINDSIGHT), t - length + 1)
        index = min(max(index, lo + min_before), t)
        alert = describe(values, lo, index, t + 1, t, "rank")
        unfolding = bool(
            restart == "change"
            and alerts
            and alerts[-1].direction == alert.direction
            and index <= passed + unfolding_span
        )
        # As the CUSUM's: an alarm dated at the first monitored build while the history's
        # first builds already trend its way is a trend the history began with (GDP, CO2).
        inherited = lo == 0 and index == min_before and trends(values[:min_before], alert.direction)
        passed = t
        if not (unfolding or inherited):
            alerts.append(alert)
            segments.append((lo, index))
        # Afresh at the change; after the alarm where nothing new was reported.
        at_change = restart == "change" and not (unfolding or inherited)
        lo = settled(values, index if at_change else t + 1, alert.direction)
    return alerts


def first_builds_split(
    x: Values, builds: int, z_bar: float = FIRST_SPLIT_Z, size: float = FIRST_SPLIT_SIZE
) -> list[Alert]:
    """The one change the first `builds` builds hold, looked for once, when the last of them
    comes: the scan cannot date a change among its own quiet builds (a step at build 15 sets
    the bar it must pass), so a step of several deviations there went undated however long the
    history grew. Every split leaving FIRST_SPLIT_SIDE builds a side (the reference REACH
    gives), by Mann-Whitney's statistic; the strongest stands when it passes `z_bar` and the
    medians differ by `size` noise deviations (each side's MAD, pooled: the step cannot widen
    them, a wander of correlated noise does)."""
    if len(x) < builds:
        return []
    y = np.asarray(x[:builds], dtype=float)
    ranks = stats.rankdata(y)
    splits = np.arange(FIRST_SPLIT_SIDE, builds - FIRST_SPLIT_SIDE + 1)
    after = builds - splits
    rank_sums = np.cumsum(ranks[::-1])[after - 1]  # the ranks of the builds from each split on
    u = rank_sums - after * (after + 1) / 2
    z = (u - splits * after / 2) / np.sqrt(splits * after * (builds + 1) / 12)
    k = int(splits[np.argmax(np.abs(z))])
    if abs(z[k - FIRST_SPLIT_SIDE]) < z_bar:
        return []
    before_level, after_level = median(y[:k]), median(y[k:])
    spreads = (
        median(np.abs(y[:k] - before_level)) * MAD_TO_SD,
        median(np.abs(y[k:] - after_level)) * MAD_TO_SD,
    )
    noise = math.sqrt((k * spreads[0] ** 2 + (builds - k) * spreads[1] ** 2) / builds)
    if abs(after_level - before_level) < size * noise:
        return []
    return [describe_change(y, 0, k, builds, builds - 1, "rank")]
