"""REACH, what `labd detect` says a method can see: no change dated before `first_dated`, no
alert on a history shorter than `fewest_builds`, and both tight (a history reaches each)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from labd.stats.detection import METHODS, REACH, detect


def extremes(lengths: range, seed: int = 0) -> Iterator[np.ndarray]:
    """Histories the detectors raise on soonest: steps far beyond the noise (or a warm-up
    with none) at every build, spikes, and random walks."""
    rng = np.random.default_rng(seed)
    for n in lengths:
        for step in range(n):
            for noise in (0.0, 0.01, 1.0):
                for size in (50.0, -1e3):
                    x = 100 + rng.normal(0, noise, n)
                    x[step:] += size
                    yield x
        yield 100 + rng.normal(0, 1, n).cumsum() * 10


def test_every_method_has_its_reach() -> None:
    assert set(REACH) == set(METHODS)
    assert all(0 < r.first_dated < r.fewest_builds for r in REACH.values())


@pytest.mark.parametrize("method", METHODS)
def test_no_alert_outside_the_reach(method: str) -> None:
    reach = REACH[method]
    lengths = range(reach.first_dated, reach.fewest_builds)
    if method == "rank":  # far to reach: the longest history short of it
        lengths = range(reach.fewest_builds - 1, reach.fewest_builds)
    for x in extremes(lengths):
        assert detect(x, method) == [], (method, x.size)
    for x in extremes(range(reach.fewest_builds, reach.fewest_builds + 4), seed=1):
        assert all(a.index >= reach.first_dated for a in detect(x, method)), method


@pytest.mark.parametrize("method", METHODS)
def test_the_reach_is_tight(method: str) -> None:
    reach = REACH[method]
    rng = np.random.default_rng(2)
    shortest = dated = False
    for step in range(reach.first_dated - 2, reach.fewest_builds):
        for n in (reach.fewest_builds, reach.fewest_builds + 30):
            x = 100 + rng.normal(0, 1, n)
            x[step:] += 50
            alerts = detect(x, method)
            shortest = shortest or (n == reach.fewest_builds and bool(alerts))
            dated = dated or any(a.index == reach.first_dated for a in alerts)
    # The rank scan alone calibrates on its statistic over quiet builds, which a change that
    # early leaves none of: its first_dated is the bound its splits set, seldom reached.
    assert shortest and (dated or method == "rank"), method
