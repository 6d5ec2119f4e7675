"""Several modes recognised: Silverman's test, calibrated on samples with one mode."""

from __future__ import annotations

import numpy as np

from labd.stats.diagnostics import diagnose
from labd.stats.modality import mode_count, modes


def trimodal(rng: np.random.Generator, n: int) -> np.ndarray:
    """Three modes 1.5% apart (weights 0.5 / 0.3 / 0.2, each 0.3% wide): a CPU that runs at
    one of three frequencies."""
    mode = rng.choice(3, n, p=[0.5, 0.3, 0.2])
    return 100 * (1 + 0.015 * mode + rng.normal(0, 0.003, n))


def test_three_close_modes_are_recognised_in_samples_of_fifty_and_one_mode_is_not() -> None:
    """The kernel mode count with Silverman's bandwidth saw these modes in 2% of samples."""
    rng = np.random.default_rng(11)
    several = sum(mode_count(trimodal(rng, 50)) > 1 for _ in range(60))
    normal = sum(mode_count(100 * (1 + rng.normal(0, 0.01, 50))) > 1 for _ in range(60))
    skewed = sum(mode_count(100 * rng.lognormal(0, 0.3, 50)) > 1 for _ in range(60))
    assert several >= 20
    assert normal <= 8 and skewed <= 8  # a 5% test: about 3 of 60 each


def test_the_finding_names_the_modes_and_the_test_s_p_value() -> None:
    values = trimodal(np.random.default_rng(3), 300)
    count, p = modes(values)
    assert count == 3 and p < 0.01
    (finding,) = [f for f in diagnose(values) if f.check == "multimodal"]
    assert finding.statistic == 3 and finding.p_value == p
    assert "3 distinct levels" in finding.message and "Silverman" in finding.message


def test_few_or_constant_values_have_one_mode() -> None:
    assert modes([1.0] * 30) == (1, 1.0)
    assert modes([1.0, 2.0, 3.0]) == (1, 1.0)


def test_two_values_near_the_float_limits_are_two_modes_and_a_lone_outlier_is_none() -> None:
    """Bandwidths on the raw scale overflowed to infinity here; a mode at the smallest value
    sat on the density grid's edge and was not counted."""
    assert modes([-1e308, 1e308] * 10)[0] == 2
    assert modes([1e300, 1e300, 1.0] * 10)[0] == 2
    assert modes(np.r_[np.zeros(50), [1e9]]) == (1, 1.0)
