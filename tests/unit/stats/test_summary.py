from __future__ import annotations

import numpy as np
import pytest

from labd.stats import summarize
from labd.stats.aggregate import aggregate
from labd.stats.diagnostics import diagnose, tukey_outliers, warmup_length


def test_summary_figures_and_their_intervals() -> None:
    rng = np.random.default_rng(0)
    values = rng.normal(50, 2, 200)
    s = summarize(values)
    assert s is not None and s.n == 200
    assert s.mean == pytest.approx(values.mean()) and s.median == pytest.approx(np.median(values))
    assert s.mean_ci[0] < 50 < s.mean_ci[1] and s.median_ci[0] < 50 < s.median_ci[1]
    assert s.cov == pytest.approx(values.std(ddof=1) / values.mean())
    assert summarize([]) is None and summarize([float("nan")]) is None


def test_one_value_has_no_spread_and_no_interval() -> None:
    """A job of one iteration showed stddev 0, CoV 0.0% and a zero-width 95% interval: a
    certainty one run cannot give. They are undefined: null in JSON, `-` in tables."""
    s = summarize([1.97])
    assert s is not None and (s.n, s.mean, s.median, s.min, s.max, s.p95) == (1, *[1.97] * 5)
    shown = s.as_dict()
    assert [shown[k] for k in ("stddev", "mad", "cov")] == [None, None, None]
    assert tuple(shown["mean_ci"]) == (None, None)
    assert tuple(shown["median_ci"]) == (None, None)
    two = summarize([1.0, 3.0])
    assert two is not None and two.stddev == pytest.approx(np.sqrt(2)) and two.mad == 1.0


@pytest.mark.parametrize("n", [6, 8, 12])
def test_the_median_s_interval_covers_at_least_95_percent(n: int) -> None:
    """The bootstrap's percentile interval covered the median 92% of the time at 8 values and
    75% at 3 ([min, max], shown as a 95% interval); with fewer than 6 values no interval of
    two order statistics covers 95%: undefined."""
    rng = np.random.default_rng(n)
    covered = 0
    for _ in range(1_000):
        s = summarize(rng.lognormal(0, 1, n))  # the median is 1, whatever the skew
        assert s is not None
        covered += s.median_ci[0] < 1 < s.median_ci[1]
    assert covered >= 940  # 95% less two standard errors of 1,000 draws
    for few in (2, 3, 5):
        s = summarize(rng.normal(0, 1, few))
        assert s is not None and tuple(s.as_dict()["median_ci"]) == (None, None)


def test_a_stored_summary_reads_back_as_it_was_made() -> None:
    """What the database's retention keeps of a job is its summary as JSON; the console
    draws its table from that, undefined figures included."""
    from labd.stats import Summary

    for values in ([1.97], [20.0, 21.5, 19.0, 22.0]):
        made = summarize(values)
        assert made is not None
        back = Summary.from_dict(made.as_dict())
        assert back.as_dict() == made.as_dict() and back.n == made.n


def test_talos_aggregations_as_talos_describes_them() -> None:
    suite = {"a": [10, 1, 2, 3], "b": [20, 4, 5, 6], "c": [30, 100, 7, 8]}
    # new: drop first, median, mean of medians: (2 + 5 + 8) / 3
    assert aggregate(suite, "talos-new") == pytest.approx(5.0)
    # old: drop max, median (a: 2, b: 5, c: 8 ... c drops 100 -> median of 30,7,8 = 8),
    # drop the largest median, mean of the rest: (2 + 5) / 2
    assert aggregate(suite, "talos-old") == pytest.approx(3.5)
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregate(suite, "nope")


def test_outliers_and_warmup_are_reported_never_dropped() -> None:
    rng = np.random.default_rng(1)
    values = rng.normal(100, 1, 30)
    values[:3] += [30, 20, 15]  # warm-up
    values[20] += 25  # a stray outlier
    assert warmup_length(values) == 3
    assert set(tukey_outliers(values)) >= {0, 1, 2, 20}
    findings = {f.check: f for f in diagnose(values)}
    assert {"warmup", "outliers", "non_normal"} <= findings.keys()
    # The first run is in the warm-up: one finding, not "raise warmup by 1" beside "by 3".
    assert "first_run" not in findings
    assert len(values) == 30
    values[1:3] -= [20, 15]  # the first run alone is off
    findings = {f.check: f for f in diagnose(values)}
    assert "warmup" not in findings
    # Not "warmup = 1", which a job with a warm-up run already has (a tester's find).
    assert findings["first_run"].hint.startswith("treat it as warm-up too: one more warm-up run")


def test_trend_and_step_in_iteration_order_are_found() -> None:
    rng = np.random.default_rng(2)
    throttled = 100 + np.linspace(0, 10, 40) + rng.normal(0, 1, 40)
    assert "trend" in {f.check for f in diagnose(throttled)}
    stepped = np.concatenate([rng.normal(100, 1, 20), rng.normal(106, 1, 20)])
    step = next(f for f in diagnose(stepped) if f.check == "step")
    assert step.indices == [20] and step.p_value is not None and step.p_value < 0.01
    assert diagnose(rng.normal(100, 0.5, 40)) == []


def test_the_outlier_finding_stays_quiet_on_clean_normal_runs() -> None:
    """At Tukey's inner fences it fired on 42% of normal samples of 50, each time saying to
    look at what happened in those iterations (a tester's find); a far value still fires."""
    rng = np.random.default_rng(5)
    fired = sum(
        any(f.check == "outliers" for f in diagnose(rng.normal(100, 1, 50))) for _ in range(400)
    )
    assert fired <= 4
    values = rng.normal(100, 1, 50)
    values[30] = 112.0
    (finding,) = [f for f in diagnose(values) if f.check == "outliers"]
    assert finding.indices == [30]
