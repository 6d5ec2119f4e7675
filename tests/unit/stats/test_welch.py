"""The closed forms the detector uses, against scipy as the reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from labd.stats.detection import detect
from labd.stats.segments import TREND_P
from labd.stats.segments import trends as _trends
from labd.stats.welch import welch_t


@pytest.mark.parametrize(("n_base", "n_new"), [(2, 2), (30, 2), (5, 40), (30, 30)])
def test_welch_matches_scipy(n_base: int, n_new: int) -> None:
    rng = np.random.default_rng(n_base * 100 + n_new)
    for _ in range(20):
        base = rng.normal(100, rng.uniform(0.1, 3), n_base)
        new = rng.normal(101, rng.uniform(0.1, 3), n_new)
        ours = welch_t(base, new, alpha=0.05)
        ref = stats.ttest_ind(new, base, equal_var=False)
        ci = ref.confidence_interval(0.95)
        assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-15)
        assert (ours.low, ours.high) == pytest.approx((ci.low, ci.high), rel=1e-9)


def test_a_trend_is_judged_as_scipy_would() -> None:
    rng = np.random.default_rng(4)
    for _ in range(300):
        y = np.linspace(0, rng.normal(0, 2), 20) + rng.normal(0, 1, 20)
        fit = stats.linregress(np.arange(20), y)
        for direction in ("up", "down"):
            sloped = (fit.slope > 0) == (direction == "up")
            assert _trends(y, direction) == (sloped and fit.pvalue < TREND_P)
    assert _trends([1.0, 2.0, 3.0], "up") and not _trends([1.0, 2.0, 3.0], "down")
    assert not _trends([5.0] * 20, "up") and not _trends([5.0] * 20, "down")
    assert not _trends([1.0, 2.0], "up") and not _trends([1.0], "up")  # too few to test


@pytest.mark.parametrize("scale", [1e-99, 1e-80, 1e78, 1e99])
def test_welch_holds_over_the_accepted_range(scale: float) -> None:
    """Values from 1e-100 to 1e100 are accepted: the degrees of freedom square the
    variances, which once overflowed at 1e78 (an unbounded interval for a clear 20% step)."""
    rng = np.random.default_rng(7)
    base, new = rng.normal(10, 0.1, 20), rng.normal(12, 0.1, 20)
    at_one, scaled = welch_t(base, new), welch_t(base * scale, new * scale)
    assert scaled.p_value == pytest.approx(at_one.p_value, rel=1e-9)
    assert (scaled.low / scale, scaled.high / scale) == pytest.approx((at_one.low, at_one.high))
    assert scaled.var_base / scale**2 == pytest.approx(at_one.var_base)


def test_welch_survives_spreads_that_underflow_on_the_common_scale() -> None:
    """1e-100 beside 1e100 (both accepted): the base's rounding wobble underflowed to a zero
    standard error and divided by it (detect crashed with ZeroDivisionError)."""
    base, new = np.full(30, 1e-100), np.full(2, 1e100)
    assert base.std() > 0  # the mean of 30 copies rounds: a wobble of about 1e-116
    test = welch_t(base, new)
    assert test.p_value == 0.0
    assert test.low == test.high == pytest.approx(1e100)
    assert math.isfinite(test.quantile)
    same = welch_t(np.full(30, 1e-100), np.full(30, 1e-100) * (1 + 1e-15))
    assert math.isfinite(same.p_value)


def test_detect_reports_a_step_across_the_whole_accepted_range() -> None:
    alerts = detect([1e-100] * 30 + [1e100] * 30)
    assert [(a.index, a.direction) for a in alerts] == [(30, "up")]
    assert alerts[0].confidence == 1.0
