"""Large samples and long histories: the same answers as the all-pairs and all-resamples
computations, from memory linear in the input."""

from __future__ import annotations

import numpy as np
import pytest

from labd.stats import bootstrap, pairwise
from labd.stats.comparison import _rank_bound, hodges_lehmann
from labd.stats.detection import detect_cusum
from labd.stats.summary import median_ci


@pytest.fixture
def selection_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every input takes the selection path, gathering only a few candidates at the end."""
    monkeypatch.setattr(pairwise, "OUTRIGHT_LIMIT", 0)
    monkeypatch.setattr(pairwise, "GATHER_LIMIT", 40)


@pytest.mark.usefixtures("selection_only")
def test_pairwise_order_statistics_equal_sorting_every_difference() -> None:
    rng = np.random.default_rng(0)
    for trial in range(200):
        m, n = (int(v) for v in rng.integers(1, 70, 2))
        # Rounded values: many ties, the case a selection gets wrong most easily.
        new = np.round(rng.normal(0, 1, m), int(rng.integers(0, 3)))
        base = np.round(rng.normal(0.2, 2, n), int(rng.integers(0, 2)))
        diffs = np.subtract.outer(new, base).ravel()
        ranks = sorted({0, diffs.size - 1, int(rng.integers(diffs.size))})
        assert pairwise.pairwise_quantiles(new, base, ranks) == list(np.sort(diffs)[ranks]), trial
        assert pairwise.pairwise_median(new, base) == np.median(diffs), trial


def test_long_runs_of_tied_values_are_selected_exactly() -> None:
    """Integer memory figures and coarse timers tie by the thousand: `labd compare` spun for
    ever on 2,100 values a side (a correction of one step at a time, 64 at most, stopped short
    of a run of ties and the counts went wrong). The same answers as sorting every difference."""
    rng = np.random.default_rng(4)
    for levels, step in ((3, 4.0), (7, 0.1), (2, 1e-3)):
        base = 7900 + step * rng.integers(0, levels, 2100)
        new = 7900 + step * rng.integers(1, levels + 1, 2200)
        assert base.size * new.size > pairwise.OUTRIGHT_LIMIT  # the selection path
        diffs = np.subtract.outer(new, base).ravel()
        ranks = [0, 123_456, diffs.size // 2, diffs.size - 1]
        assert pairwise.pairwise_quantiles(new, base, ranks) == list(np.sort(diffs)[ranks])
        assert pairwise.pairwise_median(new, base) == np.median(diffs)


@pytest.mark.usefixtures("selection_only")
def test_hodges_lehmann_interval_is_unchanged_by_the_selection() -> None:
    rng = np.random.default_rng(1)
    base, new = rng.lognormal(3, 0.3, 45), rng.lognormal(3.05, 0.3, 38)
    got = hodges_lehmann(base, new, 0.05)
    diffs = np.sort(np.subtract.outer(new, base).ravel())
    logs = np.sort(np.subtract.outer(np.log(new), np.log(base)).ravel())
    k = _rank_bound(38, 45, 0.05)
    assert (got.low, got.high, got.estimate) == (diffs[k], diffs[-1 - k], np.median(diffs))
    assert got.ratio_low == pytest.approx(np.exp(logs[k]), rel=1e-15)
    assert got.ratio == pytest.approx(np.exp(np.median(logs)), rel=1e-15)


def test_bootstrap_medians_drawn_a_block_at_a_time_are_the_same_draws() -> None:
    values = np.random.default_rng(2).normal(100, 3, 1500)
    rng = np.random.default_rng(0)
    whole = np.median(values[rng.integers(0, values.size, (2000, values.size))], axis=1)
    blocks = bootstrap.median_resamples(values, np.random.default_rng(0))
    assert np.array_equal(whole, blocks)


@pytest.mark.parametrize("n", [20_001, 20_000])
def test_exact_bootstrap_distribution_of_the_median_matches_resampling(n: int) -> None:
    rng = np.random.default_rng(3)
    # Two modes: the median's bootstrap distribution is far from normal's textbook width.
    values = np.where(rng.random(n) < 0.45, rng.normal(100, 1, n), rng.normal(103, 1, n))
    exact = bootstrap.median_resamples(values, np.random.default_rng(4), 4000)
    pick = np.random.default_rng(5)
    resampled = np.median(values[pick.integers(0, n, (400, n))], axis=1)
    assert np.median(exact) == pytest.approx(np.median(resampled), abs=0.01)
    assert exact.std() == pytest.approx(resampled.std(), rel=0.15)
    low, high = median_ci(values)
    assert low < np.median(values) < high
    assert high - low == pytest.approx(3.92 * resampled.std(), rel=0.2)


def test_a_step_after_a_very_long_quiet_stretch_is_dated_where_it_began() -> None:
    # 200,000 builds that only flicker, then a step: dating it weighs a bend at every build of
    # the segment, which must not take one row per build (200,000 x 200,000 values).
    x = 100 + 0.01 * (-1.0) ** np.arange(200_030)
    x[200_000:] += 5
    (alert,) = detect_cusum(list(x))
    assert alert.index == 200_000 and alert.direction == "up"
