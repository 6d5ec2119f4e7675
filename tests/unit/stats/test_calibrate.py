from __future__ import annotations

import numpy as np
import pytest

from labd.stats.calibration import calibrate, distribution_class, enough_iterations


def test_tight_normal_needs_few_iterations_and_wide_needs_more() -> None:
    rng = np.random.default_rng(0)
    tight = calibrate("tight", rng.normal(100, 0.5, 200))
    wide = calibrate("wide", rng.normal(100, 3, 200))
    assert tight.klass == "tight normal" and wide.klass == "wide or near normal"
    assert tight.n is not None and tight.n <= 12
    assert wide.n is None or wide.n > 3 * tight.n
    assert tight.power[tight.n] >= 0.95


def test_power_matches_the_normal_theory_for_welch() -> None:
    """At CoV 1% and a 1% shift, Welch's power at n=20 is about 0.87 by theory."""
    rng = np.random.default_rng(1)
    result = calibrate("c", rng.normal(100, 1, 2000), draws=400)
    assert result.method == "welch"
    assert result.power[20] == pytest.approx(0.87, abs=0.06)


def test_bimodal_pilot_is_non_normal() -> None:
    rng = np.random.default_rng(2)
    pilot = np.concatenate([rng.normal(100, 0.5, 100), rng.normal(110, 0.5, 100)])
    assert distribution_class(pilot) == "non-normal"


def test_adaptive_stopping() -> None:
    rng = np.random.default_rng(3)
    assert enough_iterations(rng.normal(100, 0.2, 10))[0]
    stop, reason = enough_iterations(rng.normal(100, 5, 10))
    assert not stop and "wider than" in reason
    assert enough_iterations(rng.normal(100, 5, 200), max_n=200) == (
        True,
        "reached the maximum of 200 iterations",
    )


def test_a_pilot_too_small_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 5 values"):
        calibrate("x", [1.0, 2.0])


def test_a_large_pilot_is_judged_without_scipys_warning() -> None:
    """Shapiro-Wilk's p-value holds up to 5,000 values; `calibrate` on a 40,000-value pilot
    printed scipy's warning (compare already took 5,000 evenly; every caller does now)."""
    import warnings

    values = np.random.default_rng(5).normal(100, 3, 40_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert calibrate("m", values, effect=0.02, draws=20).klass != "non-normal"
