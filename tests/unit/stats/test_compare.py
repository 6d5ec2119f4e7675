"""A/B verdicts on data with a known truth."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from labd.stats.comparison import compare, hodges_lehmann, interval, welch


def one(base: object, new: object, **kw: object) -> object:
    (result,) = compare({"m": (base, new, False)}, **kw)  # type: ignore[arg-type]
    return result


def test_clear_regression_and_improvement_and_direction() -> None:
    rng = np.random.default_rng(1)
    base = rng.normal(100, 1, 30)
    slower = rng.normal(103, 1, 30)
    assert one(base, slower).verdict == "regression"  # type: ignore[attr-defined]
    assert one(slower, base).verdict == "improvement"  # type: ignore[attr-defined]
    (higher,) = compare({"fps": (base, slower, True)})
    assert higher.verdict == "improvement"


def test_no_change_is_backed_by_an_interval_inside_the_effect() -> None:
    rng = np.random.default_rng(2)
    r = one(rng.normal(100, 0.5, 50), rng.normal(100, 0.5, 50))
    assert r.verdict == "no change"  # type: ignore[attr-defined]
    assert 0.99 <= r.ratio_ci_low <= r.ratio_ci_high <= 1.01  # type: ignore[attr-defined]


def test_too_noisy_to_tell_is_inconclusive_not_no_change() -> None:
    rng = np.random.default_rng(3)
    r = one(rng.normal(100, 10, 5), rng.normal(100, 10, 5))
    assert r.verdict == "inconclusive"  # type: ignore[attr-defined]
    assert "run more iterations" in r.reason  # type: ignore[attr-defined]


def test_welch_interval_matches_scipy() -> None:
    from scipy import stats

    rng = np.random.default_rng(4)
    a, b = rng.normal(10, 1, 12), rng.normal(11, 2, 17)
    iv = welch(a, b, 0.05)
    ref = stats.ttest_ind(b, a, equal_var=False)
    assert iv.p_value == pytest.approx(ref.pvalue)
    ci = ref.confidence_interval(0.95)
    assert (iv.low, iv.high) == pytest.approx((ci.low, ci.high))


def test_hodges_lehmann_shift_and_ratio_of_a_multiplicative_change() -> None:
    rng = np.random.default_rng(5)
    base = rng.lognormal(3, 0.3, 40)
    iv = hodges_lehmann(base, base * 1.05, 0.05)
    assert iv.ratio == pytest.approx(1.05)
    assert iv.ratio_low <= 1.05 <= iv.ratio_high


def test_heavy_tails_choose_the_robust_method() -> None:
    rng = np.random.default_rng(6)
    base = 100 + rng.standard_t(1.5, 40)
    assert interval(base, base + 5).method == "hodges-lehmann"
    assert interval(rng.normal(100, 1, 40), rng.normal(100, 1, 40)).method == "welch"


def test_spreads_far_apart_keep_false_verdicts_at_their_rate() -> None:
    """Same median, a new sample of 10 values 100 times as spread as the baseline's 50 (two
    of them outliers): the Hodges-Lehmann interval assumes one shape and called 36% of such
    pairs a regression or an improvement (the automatic choice 10%), against 5% asked."""
    rng = np.random.default_rng(11)
    verdicts = []
    for _ in range(200):
        base = np.r_[rng.normal(100, 0.1, 48), [100.9, 99.1]]
        result = one(base, rng.normal(100, 10, 10))
        verdicts.append(result.verdict)  # type: ignore[attr-defined]
    assert result.method == "bootstrap"  # type: ignore[attr-defined]
    assert sum(v in ("regression", "improvement") for v in verdicts) <= 12  # 6%


def test_an_interval_past_the_effect_without_significance_says_so() -> None:
    """m1's interval lay wholly above +0.5% and reached past +1%, its p-value adjusted for
    three metrics 0.067: it was "wider than +-1%", as if more iterations would narrow it into
    the band."""
    rng = np.random.default_rng(13)
    samples = {f"m{i}": (rng.normal(100, 1, 20), rng.normal(100, 1, 20), False) for i in range(2)}
    samples["m2"] = (rng.normal(100, 3, 20), rng.normal(103.5, 6, 20), False)
    (r,) = [r for r in compare(samples) if r.metric == "m2"]
    assert r.verdict == "inconclusive" and r.ratio_ci_low > 1 and r.ratio_ci_high > 1.01
    assert r.reason.startswith("the change is not significant (p = 0.0664 adjusted for 3 metrics")
    tiny = one([10.0, 10.1], [11.0, 11.2], method="bootstrap")
    assert tiny.verdict == "inconclusive"  # type: ignore[attr-defined]
    assert tiny.reason.startswith("the change is not significant (p = 0.333")  # type: ignore[attr-defined]


def test_values_on_a_few_levels_are_compared_by_their_means() -> None:
    """Memory in pages, frame counts: 30 values on two or three levels gave the shift
    +9.09% [+0.00%, +10.00%], inconclusive beside a p-value of 0.0003, and 300 of them a
    zero-width interval at +9.09%: neither the means' change (+6.35%) nor the medians'."""
    base = [10.0] * 15 + [11.0] * 15
    new = [10.0] * 5 + [11.0] * 15 + [12.0] * 10
    for scale in (1, 10):
        r = one(base * scale, new * scale)
        assert r.method == "welch" and r.verdict == "regression"  # type: ignore[attr-defined]
        assert r.ratio == pytest.approx(11.1667 / 10.5, rel=1e-4)  # type: ignore[attr-defined]
        assert r.ratio_ci_low < r.ratio < r.ratio_ci_high  # type: ignore[attr-defined]
    # Most values on one level: the quartiles are equal, every other level was a "far
    # outlier", and the medians' [+0.00%, +0.00%] called a rise of the means by 3% "no change".
    mostly = one([10.0] * 190 + [11.0] * 10, [10.0] * 130 + [11.0] * 70)
    assert mostly.method == "welch" and mostly.verdict == "regression"  # type: ignore[attr-defined]
    constant = one([10.0] * 50, [10.0] * 38 + [11.0] * 12)
    assert constant.verdict == "regression"  # type: ignore[attr-defined]
    far = one([10.0] * 40 + [11.0] * 10, [10.0] * 38 + [11.0] * 11 + [500.0])  # a mean follows it
    assert far.method != "welch"  # type: ignore[attr-defined]
    rng = np.random.default_rng(12)
    verdicts = [
        one(np.round(rng.normal(10.5, 0.7, 30)), np.round(rng.normal(10.5, 0.7, 30))).verdict  # type: ignore[attr-defined]
        for _ in range(200)
    ]
    assert sum(v in ("regression", "improvement") for v in verdicts) <= 16  # 5% asked


def test_bootstrap_on_request() -> None:
    rng = np.random.default_rng(7)
    r = one(rng.normal(100, 1, 30), rng.normal(105, 1, 30), method="bootstrap")
    assert r.method == "bootstrap" and r.verdict == "regression"  # type: ignore[attr-defined]


def test_fdr_control_across_metrics_can_be_turned_off() -> None:
    rng = np.random.default_rng(8)
    samples = {f"m{i}": (rng.normal(100, 1, 20), rng.normal(100, 1, 20), False) for i in range(10)}
    samples["real"] = (rng.normal(100, 1, 20), rng.normal(100.9, 1, 20), False)
    with_fdr = {r.metric: r for r in compare(samples)}
    without = {r.metric: r for r in compare(samples, fdr=False)}
    assert with_fdr["real"].p_adjusted >= without["real"].p_adjusted == without["real"].p_value


def test_degenerate_inputs_get_a_defined_verdict() -> None:
    assert one([5.0], [5.0, 6.0]).verdict == "inconclusive"  # type: ignore[attr-defined]
    same = one([3.0] * 10, [3.0] * 10)
    assert same.verdict == "no change" and "zero variance" in same.reason  # type: ignore[attr-defined]
    worse = one([3.0] * 10, [4.0] * 10)
    assert worse.verdict == "regression"  # type: ignore[attr-defined]
    row = one([1.0, 1.0, 1.0], [1.0, 2.0, 1.0]).as_dict()  # type: ignore[attr-defined]
    assert all(v is None or not isinstance(v, float) or math.isfinite(v) for v in row.values())


def test_a_baseline_mean_of_zero_is_inconclusive_not_a_crash() -> None:
    """A metric whose values sit around 0 (a signed offset, a count that stays 0 in one
    build) has no relative change: Welch's ratio interval once divided by zero there."""
    base = [-1.0, 1.0] * 10
    new = [-1.0, 1.5] * 10
    for method in ("welch", "auto", "hodges-lehmann"):
        (result,) = compare({"m": (base, new, False)}, method=method)  # type: ignore[arg-type]
        assert result.verdict in ("inconclusive", "no change"), (method, result)
    (welch_result,) = compare({"m": (base, new, False)}, method="welch")
    assert welch_result.reason == ZERO_BASELINE.format("mean")
    # Its median is 0 too: Hodges-Lehmann once read a shift of 0.5 as +50%, and with enough
    # iterations called it a regression (these values on a few levels go to Welch's means).
    for n in (20, 200):
        values = ([-1.0, 0.0, 1.0] * n, [-0.5, 0.5, 1.5] * n, False)
        for method in ("hodges-lehmann", "auto"):
            (around,) = compare({"m": values}, method=method)  # type: ignore[arg-type]
            assert around.verdict == "inconclusive", around
            location = "median" if method == "hodges-lehmann" else "mean"
            assert around.reason == ZERO_BASELINE.format(location)


ZERO_BASELINE = "the baseline's {} is 0 or not surely away from it: a relative change is undefined"


def test_a_baseline_near_zero_gives_the_absolute_change_not_an_unbounded_percentage() -> None:
    """A tester's baseline of mean 1e-5 with noise of 1e-3 against 0.01: the change read
    "+79900.00% [-inf%, +inf%]" (Welch's), or +3317%, a regression (the bootstrap's). Within
    its own uncertainty of 0 the baseline has no relative change: the ratio is undefined (null
    in JSON) and the absolute change stands."""
    base = [0.001, -0.002, 0.0005, 0.001, -0.001, 0.0001, 0.002, -0.0015]
    new = [0.011, 0.008, 0.0105, 0.011, 0.009, 0.010, 0.012, 0.0085]
    for method in ("welch", "bootstrap", "hodges-lehmann", "auto"):
        (result,) = compare({"m": (base, new, False)}, method=method)  # type: ignore[arg-type]
        assert math.isnan(result.ratio) and math.isnan(result.ratio_ci_low), (method, result)
        assert result.verdict == "inconclusive"
        assert result.reason == ZERO_BASELINE.format(result.location)
        assert result.ci_low > 0.005 and result.ci_high < 0.015  # the absolute change, bounded
        assert result.as_dict()["ratio_ci_high"] is None


def test_a_count_that_leaves_zero_is_a_change() -> None:
    """Dropped frames 0 in every iteration, then 2 in every one: a regression, not "no
    change" (the relative change is unbounded, the absolute one exact)."""
    worse = one([0.0] * 10, [2.0] * 10)
    assert worse.verdict == "regression" and "from 0 to 2" in worse.reason  # type: ignore[attr-defined]
    assert worse.estimate == 2.0  # type: ignore[attr-defined]
    better = one([3.0] * 10, [0.0] * 10)
    assert better.verdict == "improvement"  # type: ignore[attr-defined]
    # Not constant after: a tester's 0 -> 1, 2, 3 was "inconclusive" where 0 -> 2 was a
    # regression, stronger evidence judged weaker. A noisy change stays inconclusive.
    for method in ("auto", "welch", "hodges-lehmann", "bootstrap"):
        (spread,) = compare({"m": ([0.0] * 30, [1.0, 2.0, 3.0] * 10, False)}, method=method)  # type: ignore[arg-type]
        assert spread.verdict == "regression", (method, spread)
        assert spread.reason == "the baseline is a constant 0: any change from it is unbounded"
    (unsure,) = compare({"m": ([0.0] * 10, [0.0] * 9 + [1.0], False)})
    assert unsure.verdict == "inconclusive"
    # Ties: Hodges-Lehmann's interval [0, 1] touches 0 though the change is clear (p 1e-5);
    # values on two levels go to the means' interval, clear of 0.
    (tied,) = compare({"m": ([0.0] * 30, [0.0, 1.0] * 15, False)}, method="hodges-lehmann")
    assert tied.verdict == "regression" and tied.ci_low == 0
    (tied,) = compare({"m": ([0.0] * 30, [0.0, 1.0] * 15, False)})
    assert tied.verdict == "regression" and tied.method == "welch" and tied.ci_low > 0
    (fewer,) = compare({"m": ([0.0] * 30, [0.0, -2.0] * 15, True)})  # higher is better
    assert fewer.verdict == "regression"


@pytest.mark.parametrize("method", ["welch", "hodges-lehmann", "bootstrap", "auto"])
def test_values_below_zero_keep_their_direction(method: str) -> None:
    """A signed metric (an offset in ms) going from -10 to -12 fell by 20%: lower is better,
    so it improved. new / base is +20% there, and Welch and the bootstrap once said
    regression while Hodges-Lehmann said improvement."""
    rng = np.random.default_rng(3)
    base, new = rng.normal(-10, 0.1, 20), rng.normal(-12, 0.1, 20)
    (result,) = compare({"m": (base, new, False)}, method=method)  # type: ignore[arg-type]
    assert result.verdict == "improvement", result
    assert result.ratio_ci_low < result.ratio < result.ratio_ci_high < 1
    assert result.ratio == pytest.approx(0.8, abs=0.01)
    constant = one([-10.0] * 5, [-12.0] * 5)
    assert constant.verdict == "improvement" and constant.ratio == pytest.approx(0.8)  # type: ignore[attr-defined]


def test_json_of_a_comparison_has_no_nan() -> None:
    """Python writes a bare NaN that JSON parsers reject: the coefficient of variation of a
    metric that stays 0 is null."""
    row = one([0.0] * 5, [1.0] * 5).as_dict()  # type: ignore[attr-defined]
    text = json.dumps(row, allow_nan=False)  # raises on NaN or infinity
    assert json.loads(text)["base"]["cov"] is None
