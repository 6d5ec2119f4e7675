"""Detection on noise of the shapes real performance data take: two modes, correlated
neighbours, bursts of slow builds. Noise alone must stay quiet; a real step must still show."""

from __future__ import annotations

import numpy as np

from labd.stats.detection import detect


def bimodal(rng: np.random.Generator, n: int) -> np.ndarray:
    """A second mode 3% above the first, holding 30% of the builds (a fixed mix)."""
    return 100 * (1 + rng.normal(0, 0.004, n) + 0.03 * (rng.random(n) < 0.3))


def autocorrelated(rng: np.random.Generator, n: int, phi: float = 0.6) -> np.ndarray:
    noise = np.empty(n)
    noise[0] = 0.0
    for i in range(1, n):
        noise[i] = phi * noise[i - 1] + rng.normal(0, 0.005 * np.sqrt(1 - phi * phi))
    return 100 * (1 + noise)


def alerts_per_1000(make: object, histories: int = 20, n: int = 500) -> float:
    rng = np.random.default_rng(11)
    found = sum(len(detect(make(rng, n))) for _ in range(histories))  # type: ignore[operator]
    return 1000 * found / (histories * n)


def test_the_second_mode_of_bimodal_noise_is_not_a_change() -> None:
    assert alerts_per_1000(bimodal) <= 2.0


def test_correlated_noise_wandering_is_not_a_change() -> None:
    assert alerts_per_1000(autocorrelated) <= 2.0


def test_bursts_of_three_slow_builds_are_not_changes() -> None:
    rng = np.random.default_rng(12)
    raised = 0
    for _ in range(20):
        x = 100 * (1 + rng.normal(0, 0.005, 300))
        for start in (60, 140, 220):
            x[start : start + 3] *= 1.15
        raised += sum(1 for a in detect(x) if any(abs(a.index - s) <= 3 for s in (60, 140, 220)))
    assert raised <= 6  # of 60 bursts


def test_a_step_in_bimodal_noise_is_still_found_where_it_began() -> None:
    found = 0
    for seed in range(20):
        x = bimodal(np.random.default_rng(seed), 200)
        x[100:] *= 1.05
        found += any(abs(a.index - 100) <= 5 and a.direction == "up" for a in detect(x))
    assert found >= 17
