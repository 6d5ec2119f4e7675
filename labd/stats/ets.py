"""Exponential smoothing with a prediction interval (Larres et al.): large changes at once."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from labd.stats.alert import Alert, describe_change
from labd.stats.segments import NOISE_SPAN, fresh_start, modes_spread, robust_level, settled, widen

ETS_Z = 3.25  # prediction deviations that make an ETS candidate (docs/detection-rounds.md)


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
        level, sd = fresh_start(x, start, warmup, segments)
        var = sd * sd
        candidate: list[int] = []
        side = 0
        restarted = False
        floor = 0.0
        for t in range(start + warmup, n):
            error = x[t] - level
            if (t - start) % 10 == 0:
                floor = _modes_floor(x, start, t)
            sd = max(math.sqrt(var), floor)
            seen = t - start
            # A candidate needs z standard deviations; confirming builds need z_confirm on
            # the same side, against the level from before the candidate, and must sit
            # nearer the candidate than that level (a spike's neighbour does not) unless
            # they are candidates themselves (a step whose first build spiked: 52, 793, 401).
            beyond = abs(error) > widen(seen, z) * sd
            moved = beyond
            if candidate:
                near = abs(x[t] - x[candidate[0]]) < abs(error)
                same = side == (1 if error > 0 else -1)
                moved = same and (beyond or (near and abs(error) > widen(seen, z_confirm) * sd))
                if not moved:
                    candidate.clear()
                    moved = beyond  # a failed confirmation may itself start a change
            if moved:
                side = 1 if error > 0 else -1
                candidate.append(t)
                if len(candidate) > confirm:
                    begin = _first_of_new_level(x, candidate, level)
                    alert = describe_change(x, start, begin, t + 1, t, "ets")
                    if abs(alert.magnitude) >= min_change:
                        alerts.append(alert)
                    segments.append((start, begin))
                    start, restarted = settled(x, begin, alert.direction), True
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


def _modes_floor(x: Sequence[float], start: int, t: int) -> float:
    """The narrowest band deviation before build t (refreshed every 10 builds): with several
    modes, what the quartiles of the segment's last NOISE_SPAN builds say, or a run of builds
    from a second mode passes for a change; else 0."""
    return modes_spread(np.asarray(x[max(start, t - NOISE_SPAN) : t], dtype=float))


def _first_of_new_level(x: Sequence[float], candidate: list[int], level: float) -> int:
    """Where a confirmed change began: the first candidate nearer the new level (the
    candidates' median) than the old one. A slow build just before a step is outside a
    quiet series' interval too, and is confirmed by the step, but it is not the change."""
    new_level = float(np.median([x[c] for c in candidate]))
    return next((c for c in candidate if abs(x[c] - new_level) < abs(x[c] - level)), candidate[0])


def ets_one_step(x: Sequence[float], alpha: float, level0: float) -> np.ndarray:
    """The one-step-ahead forecasts of simple exponential smoothing (for tests against
    statsmodels, which fits the same model)."""
    forecasts = np.empty(len(x))
    level = level0
    for t, value in enumerate(x):
        forecasts[t] = level
        level += alpha * (value - level)
    return forecasts


def prediction_band(
    x: Sequence[float], alpha: float = 0.2, z: float = ETS_Z, warmup: int = 10
) -> tuple[list[float], list[float]]:
    """The exponential-smoothing prediction interval before each build (NaN while warming
    up), for plots: values outside it are what `ets` treats as candidates."""
    n = len(x)
    low, high = [math.nan] * n, [math.nan] * n
    if n <= warmup:
        return low, high
    level, sd = robust_level(x[:warmup])
    var = sd * sd
    floor = 0.0
    for t in range(warmup, n):
        if t % 10 == 0:  # as detect_ets
            floor = _modes_floor(x, 0, t)
        width = widen(t, z) * max(math.sqrt(var), floor)
        low[t], high[t] = level - width, level + width
        error = x[t] - level
        if abs(error) <= width:  # outliers do not widen the band (the seed's Figure 5b)
            level += alpha * error
            var += 0.05 * (min(error * error, 16 * var) - var)
    return low, high
