"""Labelled performance histories with a known truth, for the detection benchmark.

Each series is one (test, metric, device class) over builds: a level around 100 with noise of
one shape (normal, log-normal, bimodal, heavy-tailed) and CoV 0.5-2%, and events: step changes
of 1-10% (sustained), reverts (a step that is undone some builds later: two changes), creeps
(a slow drift over 20-40 builds, labelled at its start), single-build spikes and outliers
(not changes). Deterministic for a seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SHAPES = ("normal", "lognormal", "bimodal", "heavy")


@dataclass
class Series:
    name: str
    values: np.ndarray
    changes: list[int]  # indices where a real change begins
    shape: str


def noise(rng: np.random.Generator, shape: str, n: int, cov: float) -> np.ndarray:
    if shape == "normal":
        return rng.normal(0, cov, n)
    if shape == "lognormal":
        return rng.lognormal(0, cov, n) - np.exp(cov * cov / 2)
    if shape == "bimodal":
        return rng.normal(0, cov * 0.6, n) + np.where(rng.random(n) < 0.3, 1.6 * cov, 0.0)
    return rng.standard_t(3, n) * cov / np.sqrt(3)  # heavy tails, same spread


def make_series(rng: np.random.Generator, index: int, n: int = 300, events: bool = True) -> Series:
    shape = SHAPES[index % len(SHAPES)]
    cov = rng.uniform(0.005, 0.02)
    level = np.ones(n)
    changes: list[int] = []
    t = int(rng.integers(30, 60))
    while events and t < n - 25:
        kind = rng.choice(["step", "step", "revert", "creep", "spike"])
        size = rng.uniform(0.01, 0.10) * rng.choice([-1, 1])
        size = max(abs(size), 1.5 * cov) * np.sign(size)  # changes a run of builds can show
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
            ramp = np.linspace(0, size, length)
            level[t : t + length] *= 1 + ramp
            level[t + length :] *= 1 + size
            changes.append(t)
            t += length + int(rng.integers(25, 60))
        else:  # a single-build spike: not a change
            level[t] *= 1 + 3 * abs(size) + 8 * cov
            t += int(rng.integers(15, 40))
    values = 100 * level * (1 + noise(rng, shape, n, cov))
    outliers = rng.random(n) < 0.01  # stray outliers, not changes
    values[outliers] *= 1 + rng.uniform(0.05, 0.2, outliers.sum())
    return Series(f"s{index:04d}-{shape}", values, changes, shape)


def generate(count: int, seed: int = 2026, n: int = 300, events: bool = True) -> list[Series]:
    rng = np.random.default_rng(seed)
    return [make_series(rng, i, n, events) for i in range(count)]
