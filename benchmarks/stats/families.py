"""Families of labelled performance histories, each with its own noise generator and labels.

Every family shares the kinds of events a history of builds sees: steps of 1-10% (sustained),
reverts (a step undone 8-20 builds later: two changes), creeps (a drift over 20-40 builds,
labelled where it starts) and single-build spikes (not a change). What differs is the noise:

- tight-gaussian: normal, CoV 0.3-1%;
- wide-gaussian: normal, CoV 2-5%, with half the steps only 1-2.5 noise deviations;
- bimodal: a second mode 2-5% above the first, holding a fixed 10-40% of the builds;
- multimodal: three or four modes 1.5-4% apart with fixed weights;
- heavy-tails: Student t with 2-3 degrees of freedom, 2% far outliers, and bursts of 2-3
  slow builds in a row (an infrastructure hiccup, not a change);
- periodic-drift: a daily cycle (6-24 builds a day) and a weekly one, each 0.5-1.5 noise
  deviations, on normal noise;
- autocorrelated: AR(1) noise, lag-1 correlation 0.3-0.8;
- quantised: values of 20-200 ms rounded to a timer's resolution of 0.5-2 noise deviations;
- level-dependent: the spread grows with the level (a 10% step widens it by 30-110%);
- spread-changes: the spread doubles or halves 1-3 times a history: not regressions.

Labels are where the level changes; nothing else is. Deterministic for a seed and a family.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Rng = np.random.Generator


@dataclass
class Series:
    name: str
    values: np.ndarray
    changes: list[int]  # indices where a real change begins
    family: str


def level_path(
    rng: Rng, n: int, sd: float, events: bool, small: float = 0.0
) -> tuple[np.ndarray, list[int], list[int]]:
    """A multiplicative level (1 = baseline), the labelled change indices and the spikes.
    `sd` is the noise's relative spread: no step is smaller than 1.5 of it, except a share
    `small` of steps drawn at 1-2.5 of it on purpose."""
    level = np.ones(n)
    changes: list[int] = []
    spikes: list[int] = []
    t = int(rng.integers(30, 60))
    while events and t < n - 25:
        kind = rng.choice(["step", "step", "revert", "creep", "spike"])
        size = rng.uniform(0.01, 0.10)
        size = rng.uniform(1.0, 2.5) * sd if rng.random() < small else max(size, 1.5 * sd)
        size *= rng.choice([-1, 1])
        if kind == "step":
            level[t:] *= 1 + size
            changes.append(t)
            t += int(rng.integers(25, 70))
        elif kind == "revert":
            back = t + int(rng.integers(8, 20))
            level[t:back] *= 1 + size
            changes += [t, back]
            t = back + int(rng.integers(25, 60))
        elif kind == "creep":
            length = min(int(rng.integers(20, 40)), n - t)
            level[t : t + length] *= 1 + np.linspace(0, size, length)
            level[t + length :] *= 1 + size
            changes.append(t)
            t += length + int(rng.integers(25, 60))
        else:
            spikes.append(t)
            t += int(rng.integers(15, 40))
    return level, changes, spikes


def _spiked(values: np.ndarray, spikes: list[int], rng: Rng, sd: float) -> np.ndarray:
    for t in spikes:
        values[t] *= 1 + rng.uniform(0.03, 0.15) + 8 * sd
    return values


def tight_gaussian(rng: Rng, n: int, events: bool) -> tuple[np.ndarray, list[int]]:
    cov = rng.uniform(0.003, 0.01)
    level, changes, spikes = level_path(rng, n, cov, events)
    return _spiked(100 * level * (1 + rng.normal(0, cov, n)), spikes, rng, cov), changes


def wide_gaussian(rng: Rng, n: int, events: bool) -> tuple[np.ndarray, list[int]]:
    cov = rng.uniform(0.02, 0.05)
    level, changes, spikes = level_path(rng, n, cov, events, small=0.5)
    return _spiked(100 * level * (1 + rng.normal(0, cov, n)), spikes, rng, cov), changes


def _mixture(rng: Rng, n: int, offsets: np.ndarray, weights: np.ndarray, cov: float) -> np.ndarray:
    mode = rng.choice(offsets.size, n, p=weights)
    return offsets[mode] + rng.normal(0, cov, n)


def bimodal(rng: Rng, n: int, events: bool) -> tuple[np.ndarray, list[int]]:
    cov = rng.uniform(0.003, 0.01)
    gap, weight = rng.uniform(0.02, 0.05), rng.uniform(0.1, 0.4)
    offsets, weights = np.array([0.0, gap]), np.array([1 - weight, weight])
    sd = float(np.sqrt(cov**2 + weight * (1 - weight) * gap**2))
    level, changes, spikes = level_path(rng, n, sd, events)
    noise = _mixture(rng, n, offsets, weights, cov)
    return _spiked(100 * level * (1 + noise), spikes, rng, sd), changes


def multimodal(rng: Rng, n: int, events: bool) -> tuple[np.ndarray, list[int]]:
    cov = rng.uniform(0.002, 0.006)
    count = int(rng.integers(3, 5))
    offsets = np.concatenate([[0.0], np.cumsum(rng.uniform(0.015, 0.04, count - 1))])
    weights = rng.dirichlet(np.full(count, 3.0))
    sd = float(np.sqrt(cov**2 + weights @ (offsets - weights @ offsets) ** 2))
    level, changes, spikes = level_path(rng, n, sd, events)
    noise = _mixture(rng, n, offsets, weights, cov)
    return _spiked(100 * level * (1 + noise), spikes, rng, sd), changes


def heavy_tails(rng: Rng, n: int, events: bool) -> tuple[np.ndarray, list[int]]:
    cov = rng.uniform(0.003, 0.01)
    df = rng.uniform(2.0, 3.0)
    level, changes, spikes = level_path(rng, n, cov, events)
    values = 100 * level * (1 + rng.standard_t(df, n) * cov / np.sqrt(3))
    far = rng.random(n) < 0.02
    values[far] *= 1 + rng.uniform(0.05, 0.3, far.sum())
    for start in np.flatnonzero(rng.random(n) < 0.01):  # bursts of slow builds
        values[start : start + int(rng.integers(2, 4))] *= 1 + rng.uniform(0.05, 0.2)
    return _spiked(values, spikes, rng, cov), changes


def periodic_drift(rng: Rng, n: int, events: bool) -> tuple[np.ndarray, list[int]]:
    cov = rng.uniform(0.003, 0.01)
    per_day = rng.uniform(6, 24)
    t = np.arange(n)
    cycle = rng.uniform(0.5, 1.5) * cov * np.sin(2 * np.pi * t / per_day + rng.uniform(0, 6.3))
    cycle += (
        rng.uniform(0.5, 1.5) * cov * np.sin(2 * np.pi * t / (7 * per_day) + rng.uniform(0, 6.3))
    )
    level, changes, spikes = level_path(rng, n, cov, events)
    values = 100 * level * (1 + cycle + rng.normal(0, cov, n))
    return _spiked(values, spikes, rng, cov), changes


def autocorrelated(rng: Rng, n: int, events: bool) -> tuple[np.ndarray, list[int]]:
    cov, phi = rng.uniform(0.003, 0.01), rng.uniform(0.3, 0.8)
    shocks = rng.normal(0, cov * np.sqrt(1 - phi * phi), n)
    noise = np.empty(n)
    noise[0] = rng.normal(0, cov)
    for i in range(1, n):
        noise[i] = phi * noise[i - 1] + shocks[i]
    level, changes, spikes = level_path(rng, n, cov, events)
    return _spiked(100 * level * (1 + noise), spikes, rng, cov), changes


def quantised(rng: Rng, n: int, events: bool) -> tuple[np.ndarray, list[int]]:
    base, cov = rng.uniform(20, 200), rng.uniform(0.005, 0.02)
    resolution = rng.uniform(0.5, 2.0) * base * cov
    sd = max(cov, resolution / base / 2)
    level, changes, spikes = level_path(rng, n, sd, events)
    values = _spiked(base * level * (1 + rng.normal(0, cov, n)), spikes, rng, sd)
    return np.round(values / resolution) * resolution, changes


def level_dependent(rng: Rng, n: int, events: bool) -> tuple[np.ndarray, list[int]]:
    cov, power = rng.uniform(0.003, 0.01), rng.uniform(3, 8)
    level, changes, spikes = level_path(rng, n, cov, events)
    values = 100 * level * (1 + rng.normal(0, 1, n) * cov * level**power)
    return _spiked(values, spikes, rng, cov), changes


def spread_changes(rng: Rng, n: int, events: bool) -> tuple[np.ndarray, list[int]]:
    cov = rng.uniform(0.003, 0.01)
    level, changes, spikes = level_path(rng, n, cov, events)
    spread = np.full(n, cov)
    for at in np.sort(rng.integers(40, n - 20, int(rng.integers(1, 4)))):
        spread[at:] *= rng.choice([0.5, 2.0]) * rng.uniform(0.8, 1.25)
    spread = np.clip(spread, cov / 3, cov * 3)
    return _spiked(100 * level * (1 + rng.normal(0, 1, n) * spread), spikes, rng, cov), changes


FAMILIES: dict[str, Callable[[Rng, int, bool], tuple[np.ndarray, list[int]]]] = {
    "tight-gaussian": tight_gaussian,
    "wide-gaussian": wide_gaussian,
    "bimodal": bimodal,
    "multimodal": multimodal,
    "heavy-tails": heavy_tails,
    "periodic-drift": periodic_drift,
    "autocorrelated": autocorrelated,
    "quantised": quantised,
    "level-dependent": level_dependent,
    "spread-changes": spread_changes,
}


def generate(family: str, count: int, seed: int, n: int = 300, events: bool = True) -> list[Series]:
    """`count` histories of one family; the same seed gives other draws in each family."""
    rng = np.random.default_rng([seed, zlib.crc32(family.encode())])
    make = FAMILIES[family]
    out = []
    for i in range(count):
        values, changes = make(rng, n, events)
        out.append(Series(f"{family}-{i:04d}", values, changes, family))
    return out
