"""Regression detection over a history: the ordered results of one (test, metric, device class).

Every method sees the history one build at a time, as CI does, so each alert says both where
the change began (`index`) and when the method could first tell (`raised_at`):

- `ets`: exponential smoothing with a prediction interval (Larres et al.). A value outside
  the interval is a candidate; the next value confirms it (`confirm` builds; 0 flags at once).
  A candidate that is not confirmed is a single-build outlier: it is neither reported nor
  allowed to move the level or widen later intervals (the seed's Figure 5b).
- `cusum`: a two-sided CUSUM of robustly standardised values, each clipped so that one outlier
  cannot raise an alert alone; it accumulates small sustained shifts and slow creeps that a
  one-value test never sees. The change is dated where the sum last left zero, or, where a
  ramp fits better than a step (with up to 10 builds after the alarm, where the history has
  them), where the ramp began. An alarm on a series whose values wander (strong
  autocorrelation before the change) is not reported, nor one on a trend the history began
  with.
- `ets+cusum` (the default, chosen by measurement): both, a CUSUM alert near an ETS alert
  counting as the same change.
- `talos`: the windowed Welch t-test Talos used (back window 30, fore window 5, t > 9), kept
  as the baseline every other method must beat.

After an alert each method starts afresh at the change, so a change is reported once. A fresh
start takes its level from its first builds but keeps the noise the series has shown: a change
moves the level, not the noise.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import special, stats

from labd.stats.welch import welch_t

METHODS = ("ets+cusum", "ets", "cusum", "talos")
DEFAULT_METHOD = "ets+cusum"  # chosen by benchmarks/stats/detection_bench.py
MAD_TO_SD = 1.4826
TREND_P, TREND_WINDOW = 0.05, 20  # chosen by the detection benchmark (15/30, 0.01 did worse)
NOISE_SPAN = 60  # builds whose noise the wandering gate and a fresh start's scale pool
MEMORY_RHO = 0.5  # chosen by the detection benchmark with NOISE_SPAN (see the README)
HINDSIGHT = 10  # builds after a CUSUM alarm that help date its change (see the README)
ETS_Z = 3.25  # prediction standard deviations that make an ETS candidate (see the README)


@dataclass(frozen=True)
class Alert:
    index: int  # first build of the change, from 0
    raised_at: int  # newest build seen when the alert was first raised
    direction: str  # "up" or "down" (of the value; whether that is worse depends on the metric)
    magnitude: float  # relative change of the level, e.g. 0.05 for +5%
    magnitude_low: float
    magnitude_high: float
    confidence: float  # 1 - p of the before/after comparison
    method: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@functools.lru_cache(maxsize=4096)
def _widen(count: int, z: float) -> float:
    """A normal quantile z as Student's t with the degrees of freedom of `count` values:
    a scale estimated from few values must not be trusted like a known one."""
    if count >= 200:
        return z
    return float(stats.t.ppf(stats.norm.cdf(z), max(count - 1, 1)))


def _robust_level(x: Sequence[float]) -> tuple[float, float]:
    """Median and a robust standard deviation: the larger of the MAD's and the one from
    successive differences, so a handful of values cannot claim the noise is tiny."""
    a = np.asarray(x, dtype=float)
    med = float(np.median(a))
    sd = float(np.median(np.abs(a - med))) * MAD_TO_SD
    if a.size > 2:
        sd = max(sd, float(np.median(np.abs(np.diff(a)))) * MAD_TO_SD / math.sqrt(2))
    return med, sd or max(abs(med) * 1e-6, 1e-12)


def _trends(values: Sequence[float], direction: str) -> bool:
    """Whether a straight line through the values slopes in `direction` (p < TREND_P): the
    least-squares slope's t-test in closed form (scipy's linregress costs ten times more)."""
    y = np.asarray(values, dtype=float)
    if y.size < 3:
        return False  # no residual left to test a slope against
    k = np.arange(y.size) - (y.size - 1) / 2
    sxx = float(k @ k)
    slope = float(k @ (y - y.mean())) / sxx
    if slope == 0 or (slope > 0) != (direction == "up"):
        return False
    sse = float(np.sum((y - y.mean() - slope * k) ** 2))
    if sse <= 0:
        return True  # a perfect line
    t = slope / math.sqrt(sse / (y.size - 2) / sxx)
    return bool(2 * special.stdtr(y.size - 2, -abs(t)) < TREND_P)


def _settled(x: Sequence[float], start: int, direction: str) -> int:
    """Where to start afresh after an alert: the first window of TREND_WINDOW builds from
    `start` with no trend in the alert's direction. A creep still unfolding after its alert is
    the same change, not the next one; a move back (a revert) is a new one."""
    p = start
    while p + TREND_WINDOW <= len(x) and _trends(x[p : p + TREND_WINDOW], direction):
        p += 2
    return p


def _recent(x: Sequence[float], segments: list[tuple[int, int]], end: int) -> list[np.ndarray]:
    """The values of each segment between changes, (start, end) pairs, that fall within the
    last NOISE_SPAN builds before `end`."""
    since = end - NOISE_SPAN
    return [np.asarray(x[max(a, since) : b], dtype=float) for a, b in segments if b > since]


def _memory(x: Sequence[float], segments: list[tuple[int, int]], index: int) -> float:
    """The lag-1 autocorrelation of the noise before a change at `index`: the residuals of a
    straight line fitted to each segment (so that neither an earlier change nor an unfinished
    creep counts), pooled over the recent segments. About 0 for independent noise, high for a
    series that wanders or follows a season."""
    lag = energy = 0.0
    for segment in _recent(x, segments, index):
        if segment.size < 8:
            continue
        k = np.arange(segment.size)
        residual = segment - np.polyval(np.polyfit(k, segment, 1), k)
        lag += float((residual[1:] * residual[:-1]).sum())
        energy += float((residual * residual).sum())
    return lag / energy if energy > 0 else 0.0


def _noise_scale(x: Sequence[float], segments: list[tuple[int, int]], end: int) -> float:
    """A robust standard deviation from the successive differences within the recent
    segments (0 when there are too few); differences do not see the segments' levels."""
    diffs = [np.diff(segment) for segment in _recent(x, segments, end) if segment.size >= 2]
    d = np.concatenate(diffs) if diffs else np.empty(0)
    return float(np.median(np.abs(d))) * MAD_TO_SD / math.sqrt(2) if d.size >= 10 else 0.0


def _fresh_start(
    x: Sequence[float], start: int, warmup: int, segments: list[tuple[int, int]]
) -> tuple[float, float]:
    """Level and noise of a segment from its first `warmup` builds; after a change, the noise
    no smaller than the recent segments show: a change moves the level, not the noise, and a
    few builds that happen to be quiet must not make ordinary noise look like a change."""
    level, sd = _robust_level(x[start : start + warmup])
    if segments:
        sd = max(sd, _noise_scale(x, [*segments, (start, start + warmup)], start + warmup))
    return level, sd


def _onset(x: Sequence[float], start: int, end: int, index: int) -> int:
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


def describe_change(
    x: Sequence[float], start: int, index: int, end: int, raised_at: int, method: str
) -> Alert:
    """An alert for a change at `index`, comparing x[start:index] with x[index:end]."""
    before = np.asarray(x[max(start, index - 30) : index], dtype=float)
    after = np.asarray(x[index:end], dtype=float)
    base = float(np.median(before))
    scale = abs(base) or 1.0
    diff = float(np.median(after)) - base
    if before.size >= 2 and after.size >= 2 and (before.std() > 0 or after.std() > 0):
        test = welch_t(before, after)
        low, high, p = test.low, test.high, test.p_value
    else:
        low = high = diff
        p = 0.0 if diff else 1.0
    return Alert(
        index=index,
        raised_at=raised_at,
        direction="up" if diff > 0 else "down",
        magnitude=diff / scale,
        magnitude_low=low / scale,
        magnitude_high=high / scale,
        confidence=1 - p if math.isfinite(p) else 0.0,
        method=method,
    )


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
        mean, sd = _fresh_start(x, start, warmup, segments)
        total, count = mean * warmup, warmup
        up = down = 0.0
        up_from = down_from = start + warmup
        fired = False
        for t in range(start + warmup, n):
            widen = _widen(count, 1.96) / 1.96
            z = max(-clip, min(clip, (x[t] - total / count) / (sd * widen)))
            if up == 0.0:
                up_from = t
            if down == 0.0:
                down_from = t
            up = max(0.0, up + z - drift)
            down = max(0.0, down - z - drift)
            if up > threshold or down > threshold:
                index = up_from if up > threshold else down_from
                segments.append((start, index))
                memory = _memory(x, segments, index)
                # Dated with hindsight where the history has it: a creep's ramp is clearer
                # some builds on. Never before the builds that set the reference, nor after
                # the alarm.
                onset = _onset(x, start, min(n, t + 1 + HINDSIGHT), index)
                index = min(max(onset, start + warmup), t)
                alert = describe_change(x, start, index, t + 1, t, "cusum")
                # On a series that wanders (a random walk, a season) the CUSUM, which
                # assumes independent noise around a level, alarms on the wandering. And
                # where the history's own first builds already trend the way it alarms, it
                # alarms on that trend: no build of it is where a change began.
                inherited = start == 0 and index == warmup and _trends(x[:warmup], alert.direction)
                if abs(alert.magnitude) >= min_change and memory <= MEMORY_RHO and not inherited:
                    alerts.append(alert)
                # Start afresh after the alarm: a segment that began at an early-dated
                # change would hold old values and alarm again for the same change.
                start, fired = _settled(x, t + 1, alert.direction), True
                break
            if up == 0.0 and down == 0.0:  # only quiet builds refine the reference
                total += total / count + z * sd * widen
                count += 1
                if count % 10 == 0 and count >= 30:
                    # Enough quiet builds to measure the noise itself: the fresh start's
                    # estimate from a few builds errs on the wide side.
                    sd = _noise_scale(x, [*segments, (start, t + 1)], t + 1) or sd
        if not fired:
            break
    return alerts


def detect_ets(
    x: Sequence[float],
    alpha: float = 0.2,
    z: float = ETS_Z,
    confirm: int = 1,
    warmup: int = 10,
    min_change: float = 0.0,
    variance_rate: float = 0.05,
    z_confirm: float = 2.0,
) -> list[Alert]:
    """Simple exponential smoothing; alert when `confirm` + 1 values in a row fall outside the
    prediction interval on the same side."""
    alerts: list[Alert] = []
    segments: list[tuple[int, int]] = []  # (start, change) of the segments already closed
    n = len(x)
    start = 0
    while start + warmup < n:
        level, sd = _fresh_start(x, start, warmup, segments)
        var = sd * sd
        candidate: list[int] = []
        side = 0
        restarted = False
        for t in range(start + warmup, n):
            error = x[t] - level
            sd = math.sqrt(var)
            seen = t - start
            # A candidate needs z standard deviations; confirming builds need z_confirm on
            # the same side, against the level from before the candidate, and must sit
            # nearer the candidate than that level (a spike's neighbour does not).
            if candidate:
                near = abs(x[t] - x[candidate[0]]) < abs(error)
                same = side == (1 if error > 0 else -1)
                moved = abs(error) > _widen(seen, z_confirm) * sd and same and near
            else:
                moved = abs(error) > _widen(seen, z) * sd
            if moved:
                side = 1 if error > 0 else -1
                candidate.append(t)
                if len(candidate) > confirm:
                    alert = describe_change(x, start, candidate[0], t + 1, t, "ets")
                    if abs(alert.magnitude) >= min_change:
                        alerts.append(alert)
                    segments.append((start, candidate[0]))
                    start, restarted = _settled(x, candidate[0], alert.direction), True
                    break
                continue  # a candidate does not move the level until it is confirmed
            candidate.clear()
            level += alpha * error
            # The error variance moves slower than the level: one quiet stretch must not
            # make the interval so narrow that ordinary noise falls outside it.
            var += variance_rate * (min(error * error, 16 * var) - var)
        if not restarted:
            break
    return alerts


def ets_one_step(x: Sequence[float], alpha: float, level0: float) -> np.ndarray:
    """The one-step-ahead forecasts of simple exponential smoothing (for tests against
    statsmodels, which fits the same model)."""
    forecasts = np.empty(len(x))
    level = level0
    for t, value in enumerate(x):
        forecasts[t] = level
        level += alpha * (value - level)
    return forecasts


def detect_talos(
    x: Sequence[float], back: int = 30, fore: int = 5, threshold: float = 9.0, min_back: int = 12
) -> list[Alert]:
    """Talos: Welch t between the back window and the fore window starting at each build;
    an alert at a local maximum of t above the threshold, once the fore window is full."""
    a = np.asarray(x, dtype=float)
    n = a.size
    t_values = np.zeros(n)
    for i in range(min_back, n - fore + 1):
        b, f = a[max(0, i - back) : i], a[i : i + fore]
        se = math.sqrt(b.var(ddof=1) / b.size + f.var(ddof=1) / f.size)
        t_values[i] = abs(f.mean() - b.mean()) / se if se > 0 else 0.0
    alerts: list[Alert] = []
    last = -fore
    for i in range(n):
        if t_values[i] <= threshold or i - last < fore:
            continue
        window = t_values[max(0, i - fore + 1) : i + fore]
        if t_values[i] < window.max():
            continue
        alerts.append(
            describe_change(x, max(0, i - back), i, min(n, i + fore), i + fore - 1, "talos")
        )
        last = i
    return alerts


def detect_ets_cusum(x: Sequence[float], gap: int = 12) -> list[Alert]:
    """ETS for the large changes it flags within a build, CUSUM for the small sustained
    shifts and creeps it cannot see; a CUSUM alert within `gap` builds of an ETS one is the
    same change. (Its settings were chosen by the detection benchmark; the README says how.)"""
    fast = detect_ets(x)
    slow = [a for a in detect_cusum(x) if all(abs(a.index - b.index) > gap for b in fast)]
    return sorted(fast + slow, key=lambda a: a.index)


def detect(x: Sequence[float], method: str = DEFAULT_METHOD, **options: Any) -> list[Alert]:
    """Alerts in one history by the named method."""
    if method not in METHODS:
        raise ValueError(f"unknown detection method {method!r} (one of {', '.join(METHODS)})")
    values = [float(v) for v in x]
    if len(values) < 2 or min(values) == max(values):
        return []
    methods: dict[str, Callable[..., list[Alert]]] = {
        "ets+cusum": detect_ets_cusum,
        "cusum": detect_cusum,
        "ets": detect_ets,
        "talos": detect_talos,
    }
    return methods[method](values, **options)


def prediction_band(
    x: Sequence[float], alpha: float = 0.2, z: float = ETS_Z, warmup: int = 10
) -> tuple[list[float], list[float]]:
    """The exponential-smoothing prediction interval before each build (NaN while warming
    up), for plots: values outside it are what `ets` treats as candidates."""
    n = len(x)
    low, high = [math.nan] * n, [math.nan] * n
    if n <= warmup:
        return low, high
    level, sd = _robust_level(x[:warmup])
    var = sd * sd
    for t in range(warmup, n):
        width = _widen(t, z) * math.sqrt(var)
        low[t], high[t] = level - width, level + width
        error = x[t] - level
        if abs(error) <= width:  # outliers do not widen the band (the seed's Figure 5b)
            level += alpha * error
            var += 0.05 * (min(error * error, 16 * var) - var)
    return low, high
