"""What the detectors share: a segment's level and noise, trends, and where a change began.

A history is cut into segments at the changes found so far; each detector starts afresh at a
change with the level of the new segment's first builds and the noise the recent segments show.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import special, stats

MAD_TO_SD = 1.4826
IQR_TO_SD = 1.349  # the interquartile range of a normal distribution, in deviations
MODES_RATIO = 2.0  # quartiles' spread over the MAD's beyond which values hold several modes
TREND_P, TREND_WINDOW = 0.05, 20  # chosen by the detection benchmark (15/30, 0.01 did worse)
NOISE_SPAN = 60  # builds whose noise the wandering gate and a fresh start's scale pool

# A history as the helpers take it: slices of an array are views, of a list copies.
Values = Sequence[float] | NDArray[np.float64]


@functools.lru_cache(maxsize=4096)
def widen(count: int, z: float) -> float:
    """A normal quantile z as Student's t with the degrees of freedom of `count` values:
    a scale estimated from few values must not be trusted like a known one."""
    if count >= 200:
        return z
    return float(stats.t.ppf(stats.norm.cdf(z), max(count - 1, 1)))


def median(values: np.ndarray) -> float:
    """numpy's median from a partial sort, without its overhead: the detectors take one at
    every alarm and every refresh of a scale, thousands a history."""
    k = values.size // 2
    if values.size == 0:
        return math.nan
    if values.size % 2:
        return float(np.partition(values, k)[k])
    part = np.partition(values, (k - 1, k))
    return float(part[k - 1] + part[k]) / 2


def mean(values: np.ndarray) -> float:
    """numpy's mean (the same pairwise sum, divided by the count) without its overhead."""
    return float(np.add.reduce(values)) / values.size


def interquartile(values: np.ndarray) -> float:
    """The interquartile range as numpy's percentile (linear interpolation) gives it, from a
    partial sort: the detectors take it at every refresh of a scale."""
    n = values.size
    bounds = []
    for q in (0.25, 0.75):
        h = (n - 1) * q
        lo = int(h)
        bounds += [lo, min(lo + 1, n - 1)]
    part = np.partition(values, sorted(set(bounds)))
    q1 = part[bounds[0]] + ((n - 1) * 0.25 - bounds[0]) * (part[bounds[1]] - part[bounds[0]])
    q3 = part[bounds[2]] + ((n - 1) * 0.75 - bounds[2]) * (part[bounds[3]] - part[bounds[2]])
    return float(q3 - q1)


def modes_spread(values: np.ndarray) -> float:
    """The spread the quartiles give (as a normal deviation) where it is more than MODES_RATIO
    times the median absolute deviation's, else 0. For one symmetric mode the two agree; with
    a second mode holding a quarter or more of the values the quartiles span both modes while
    the MAD sees one mode's width."""
    if values.size < 10:
        return 0.0
    spread = interquartile(values) / IQR_TO_SD
    mad = median(np.abs(values - median(values))) * MAD_TO_SD
    return spread if spread > MODES_RATIO * mad else 0.0


def robust_level(x: Values) -> tuple[float, float]:
    """Median and a robust standard deviation: the larger of the MAD's and the one from
    successive differences, so a handful of values cannot claim the noise is tiny."""
    a = np.asarray(x, dtype=float)
    med = median(a)
    sd = median(np.abs(a - med)) * MAD_TO_SD
    if a.size > 2:
        sd = max(sd, median(np.abs(np.diff(a))) * MAD_TO_SD / math.sqrt(2))
    return med, sd or max(abs(med) * 1e-6, 1e-12)


def trends(values: Values, direction: str) -> bool:
    """Whether a straight line through the values slopes in `direction` (p < TREND_P): the
    least-squares slope's t-test in closed form (scipy's linregress costs ten times more)."""
    y = np.asarray(values, dtype=float)
    if y.size < 3:
        return False  # no residual left to test a slope against
    k = np.arange(y.size) - (y.size - 1) / 2
    sxx = float(k @ k)
    centred = y - mean(y)
    slope = float(k @ centred) / sxx
    if slope == 0 or (slope > 0) != (direction == "up"):
        return False
    sse = float(np.add.reduce((centred - slope * k) ** 2))
    if sse <= 0:
        return True  # a perfect line
    t = slope / math.sqrt(sse / (y.size - 2) / sxx)
    return bool(2 * special.stdtr(y.size - 2, -abs(t)) < TREND_P)


def settled(x: Values, start: int, direction: str) -> int:
    """Where to start afresh after an alert: the first window of TREND_WINDOW builds from
    `start` with no trend in the alert's direction. A creep still unfolding after its alert is
    the same change, not the next one; a move back (a revert) is a new one."""
    p = start
    while p + TREND_WINDOW <= len(x) and trends(x[p : p + TREND_WINDOW], direction):
        p += 2
    return p


def recent(x: Values, segments: list[tuple[int, int]], end: int) -> list[np.ndarray]:
    """The values of each segment between changes, (start, end) pairs, that fall within the
    last NOISE_SPAN builds before `end`."""
    since = end - NOISE_SPAN
    return [np.asarray(x[max(a, since) : b], dtype=float) for a, b in segments if b > since]


def memory(x: Values, segments: list[tuple[int, int]], index: int) -> float:
    """The lag-1 autocorrelation of the noise before a change at `index`: the residuals of a
    straight line fitted to each segment (so that neither an earlier change nor an unfinished
    creep counts), pooled over the recent segments. About 0 for independent noise, high for a
    series that wanders or follows a season."""
    lag = energy = 0.0
    for segment in recent(x, segments, index):
        if segment.size < 8:
            continue
        # The residuals of the least-squares line, in closed form (numpy's polyfit costs
        # ten times more and this runs at every refresh of a noise scale).
        k = np.arange(segment.size) - (segment.size - 1) / 2
        centred = segment - mean(segment)
        residual = centred - k * (float(k @ centred) / float(k @ k))
        lag += float(np.add.reduce(residual[1:] * residual[:-1]))
        energy += float(np.add.reduce(residual * residual))
    return lag / energy if energy > 0 else 0.0


def noise_scale(x: Values, segments: list[tuple[int, int]], end: int) -> float:
    """A robust standard deviation from the successive differences within the recent
    segments (0 when there are too few); differences do not see the segments' levels."""
    diffs = [np.diff(segment) for segment in recent(x, segments, end) if segment.size >= 2]
    d = np.concatenate(diffs) if diffs else np.empty(0)
    return median(np.abs(d)) * MAD_TO_SD / math.sqrt(2) if d.size >= 10 else 0.0


def fresh_start(
    x: Values, start: int, warmup: int, segments: list[tuple[int, int]]
) -> tuple[float, float]:
    """Level and noise of a segment from its first `warmup` builds; after a change, the noise
    no smaller than the recent segments show: a change moves the level, not the noise, and a
    few builds that happen to be quiet must not make ordinary noise look like a change."""
    level, sd = robust_level(x[start : start + warmup])
    if segments:
        sd = max(sd, noise_scale(x, [*segments, (start, start + warmup)], start + warmup))
    return level, sd


def onset(x: Values, start: int, end: int, index: int) -> int:
    """Where a change in x[start:end] began, when a ramp explains the values better than a
    step: the bend of the best flat-then-straight line (least squares over every bend), else
    `index`. A creep has no step; the sum that alarmed on it left zero long after it began."""
    y = np.asarray(x[start:end], dtype=float)
    m = y.size
    if m < 8:
        return index
    splits = np.arange(3, m - 2)
    # A step: the squared error of two means, for every split at once.
    c1, c2 = np.cumsum(y), np.cumsum(y * y)
    left = c2[splits - 1] - c1[splits - 1] ** 2 / splits
    right = (c2[-1] - c2[splits - 1]) - (c1[-1] - c1[splits - 1]) ** 2 / (m - splits)
    step_sse = left + right
    # A bend: y = a + b * max(0, i - split), one regressor per split, its sums in closed
    # form from suffix sums (memory linear in the segment, not one row per split).
    centred = y - y.mean()
    tail = (m - 1 - splits).astype(float)  # builds after each split
    sum_r = tail * (tail + 1) / 2
    sum_r2 = tail * (tail + 1) * (2 * tail + 1) / 6
    after_y = np.cumsum(centred[::-1])[::-1]  # sum of centred[i:] for each i
    after_iy = np.cumsum((np.arange(m) * centred)[::-1])[::-1]
    sxy = after_iy[splits + 1] - splits * after_y[splits + 1]
    sxx = sum_r2 - sum_r * sum_r / m
    bend_sse = centred @ centred - np.divide(sxy * sxy, sxx, out=np.zeros_like(sxx), where=sxx > 0)
    best = int(np.argmin(bend_sse))
    return start + int(splits[best]) if bend_sse[best] < step_sse.min() else index
