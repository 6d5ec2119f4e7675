"""A/B comparison: is NEW different from BASE by more than the effect that matters?

Each metric gets an interval for the difference and for the ratio of a location measure,
with the method chosen by the data: Welch's t on means when both samples look normal and
clean; otherwise the Hodges-Lehmann shift with its Mann-Whitney interval (robust to outliers,
skew, several modes and warm-up); or a bootstrap of medians on request. The verdict is judged
against a minimal effect of interest, so "no change" is a claim the interval backs
(equivalence), not an absence of evidence.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from labd.stats.bootstrap import median_resamples
from labd.stats.diagnostics import as_array, diagnose, shapiro, tukey_outliers
from labd.stats.modality import mode_count
from labd.stats.pairwise import pairwise_median, pairwise_quantiles
from labd.stats.plain import finite
from labd.stats.summary import Summary, median_ci, summarize
from labd.stats.welch import welch_t

Method = Literal["auto", "welch", "hodges-lehmann", "bootstrap"]
LEVELS = 10  # distinct values at most in a sample of levels (tied): compared by means
Verdict = Literal["regression", "improvement", "no change", "inconclusive"]


@dataclass
class Interval:
    method: str
    estimate: float  # new - base, in the metric's unit
    low: float
    high: float
    ratio: float  # new / base
    ratio_low: float
    ratio_high: float
    p_value: float


@dataclass
class Comparison:
    metric: str
    n_base: int
    n_new: int
    higher_is_better: bool
    effect: float
    base: Summary | None
    new: Summary | None
    verdict: Verdict = "inconclusive"
    method: str = ""
    estimate: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    ratio: float = math.nan
    ratio_ci_low: float = math.nan
    ratio_ci_high: float = math.nan
    p_value: float = math.nan
    p_adjusted: float = math.nan
    reason: str = ""
    diagnostics: list[dict[str, Any]] = field(default_factory=list)

    @property
    def location(self) -> str:
        """What the change compares: the means (Welch's interval) or the medians (the others);
        a table shows base and new by the same, so their values and the change agree."""
        return "mean" if self.method == "welch" else "median"

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("base", "new")}
        out["base"] = self.base.as_dict() if self.base else None
        out["new"] = self.new.as_dict() if self.new else None
        return finite(out)


def choose_method(
    base: NDArray[np.float64],
    new: NDArray[np.float64],
    multimodal: tuple[bool, bool] | None = None,
) -> str:
    """Welch where both samples look normal, unimodal and free of far outliers; else the
    Hodges-Lehmann shift, or the bootstrap where the two spreads differ (the shift's
    Mann-Whitney interval assumes one shape: 10 values of a spread 100 times the baseline's
    and the same median came out a regression in 36% of trials).
    `multimodal`: whether each sample has several modes, when the diagnostics already know.
    Values on a few levels (pages of memory, frames, a timer's milliseconds) are compared by
    their means where there are enough of them: their medians and shifts jump from level to
    level (+9.09% [+9.09%, +9.09%] from 300 values on three levels, the means +6.4%)."""
    if tied(base, new):
        return "welch"
    for i, a in enumerate((base, new)):
        if a.size < 8:
            continue  # too few values to judge: normal theory is the sensible default
        several = multimodal[i] if multimodal else mode_count(a) > 1
        if shapiro(a)[1] < 0.01 or tukey_outliers(a, k=3.0) or several:
            return "bootstrap" if spreads_differ(base, new) else "hodges-lehmann"
    return "welch"


def tied(base: NDArray[np.float64], new: NDArray[np.float64]) -> bool:
    """Whether both samples have 20 values or more and lie on a few levels: at most LEVELS
    distinct values in one of them, and all values within LEVELS steps of the smallest gap
    between two levels (no far outlier, which a mean would follow). Not Tukey's fences: with
    most values on one level the quartiles are equal and every other level is "far"."""
    if base.size < 20 or new.size < 20:
        return False
    if min(np.unique(base).size, np.unique(new).size) > LEVELS:
        return False
    levels = np.unique(np.concatenate([base, new]))
    if levels.size < 2:
        return False
    return bool(levels[-1] - levels[0] <= LEVELS * np.diff(levels).min())


def spreads_differ(base: NDArray[np.float64], new: NDArray[np.float64]) -> bool:
    """Whether Fligner and Killeen's rank test (robust to outliers and skew) finds the spreads
    different at 1%, with at least 8 values a side."""
    if base.size < 8 or new.size < 8 or np.ptp(base) == 0 or np.ptp(new) == 0:
        return False
    return bool(stats.fligner(base, new).pvalue < 0.01)


def rank_p_value(base: NDArray[np.float64], new: NDArray[np.float64]) -> float:
    """Whether new tends to lie above or below base: Brunner and Munzel's test, which allows
    different spreads and shapes, with at least 8 values a side (it needs them); else, or
    where it is undefined (no value of one side among the other's), Mann and Whitney's."""
    if base.size >= 8 and new.size >= 8:
        with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # undefined: Mann-Whitney below
            p = float(stats.brunnermunzel(new, base).pvalue)
        if math.isfinite(p):
            return p
    return float(stats.mannwhitneyu(new, base, alternative="two-sided").pvalue)


def welch(base: NDArray[np.float64], new: NDArray[np.float64], alpha: float) -> Interval:
    mb, mn = float(base.mean()), float(new.mean())
    w = welch_t(base, new, alpha)
    if mb == 0:  # a ratio to zero (values around 0, a count that stayed 0): none to give
        return Interval("welch", w.diff, w.low, w.high, math.nan, math.nan, math.nan, w.p_value)
    ratio_low, ratio_high = _fieller(mb, mn, w.var_base, w.var_new, w.quantile)
    if not math.isfinite(ratio_low):  # a mean within its own uncertainty of 0: as one of 0
        return Interval("welch", w.diff, w.low, w.high, math.nan, math.nan, math.nan, w.p_value)
    ratio = mn / mb
    if mb < 0:  # new / base runs against the values below 0: -12 / -10 is 1.2 for a fall
        ratio, ratio_low, ratio_high = 2 - ratio, 2 - ratio_high, 2 - ratio_low
    return Interval("welch", w.diff, w.low, w.high, ratio, ratio_low, ratio_high, w.p_value)


def _fieller(mb: float, mn: float, vb: float, vn: float, t: float) -> tuple[float, float]:
    """Fieller's interval for mn / mb of independent means (unbounded when mb is unsure)."""
    g = t * t * vb / (mb * mb)
    if g >= 1:
        return -math.inf, math.inf
    r = mn / mb
    half = (t / abs(mb)) * math.sqrt(vn * (1 - g) + r * r * vb)
    return (r - half) / (1 - g), (r + half) / (1 - g)


def hodges_lehmann(base: NDArray[np.float64], new: NDArray[np.float64], alpha: float) -> Interval:
    m, n = new.size, base.size
    k = _rank_bound(m, n, alpha)
    p = rank_p_value(base, new)  # the interval assumes one shape; the test need not
    # Order statistics of the m x n pairwise differences, found without forming them all.
    low, high = pairwise_quantiles(new, base, [k, m * n - 1 - k])
    estimate = pairwise_median(new, base)
    if base.min() > 0 and new.min() > 0:
        # The ratio is the same shift on a log scale: exact for multiplicative changes.
        log_new, log_base = np.log(new), np.log(base)
        log_low, log_high = pairwise_quantiles(log_new, log_base, [k, m * n - 1 - k])
        ratio = math.exp(pairwise_median(log_new, log_base))
        ratio_low, ratio_high = math.exp(log_low), math.exp(log_high)
    elif not _near_zero(base, alpha):
        scale = abs(float(np.median(base)))
        ratio, ratio_low, ratio_high = 1 + estimate / scale, 1 + low / scale, 1 + high / scale
    else:  # a median near 0: a relative change is undefined, as for Welch's mean near 0
        ratio = ratio_low = ratio_high = math.nan
    return Interval("hodges-lehmann", estimate, low, high, ratio, ratio_low, ratio_high, p)


def _near_zero(base: NDArray[np.float64], alpha: float) -> bool:
    """Whether the baseline's median is 0 or not surely away from it (its interval, or with
    too few values for one their range, holds 0): a change relative to it is undefined, as
    for a mean whose interval holds 0 (Fieller's is then unbounded)."""
    low, high = median_ci(base, alpha)
    if math.isnan(low):
        low, high = float(base.min()), float(base.max())
    return low <= 0 <= high


def _rank_bound(m: int, n: int, alpha: float) -> int:
    """Order statistic of the pairwise differences bounding the Mann-Whitney interval."""
    z = stats.norm.ppf(1 - alpha / 2)
    k = math.floor(m * n / 2 - float(z) * math.sqrt(m * n * (m + n + 1) / 12))
    return min(max(k, 0), (m * n - 1) // 2)


def bootstrap(
    base: NDArray[np.float64], new: NDArray[np.float64], alpha: float, seed: int = 0
) -> Interval:
    rng = np.random.default_rng(seed)
    mb, mn = median_resamples(base, rng), median_resamples(new, rng)
    q = [100 * alpha / 2, 100 * (1 - alpha / 2)]
    low, high = np.percentile(mn - mb, q)
    with np.errstate(divide="ignore", invalid="ignore"):
        # 1 + change relative to the baseline's size: new / base above 0, and rising with the
        # values below it too.
        ratio_low, ratio_high = np.percentile(1 + (mn - mb) / np.abs(mb), q)
    p = rank_p_value(base, new)
    diff = float(np.median(new) - np.median(base))
    if _near_zero(base, alpha) or not (np.isfinite(ratio_low) and np.isfinite(ratio_high)):
        ratio = ratio_low = ratio_high = math.nan  # no relative change, nor an interval for one
    else:  # a median surely away from 0 (one of 0 is near it)
        ratio = 1 + diff / abs(float(np.median(base)))
    return Interval("bootstrap", diff, low, high, ratio, ratio_low, ratio_high, p)


def interval(
    base: ArrayLike,
    new: ArrayLike,
    alpha: float = 0.05,
    method: Method = "auto",
    multimodal: tuple[bool, bool] | None = None,
) -> Interval:
    """The interval of new relative to base by the given (or the data's) method."""
    b, n = as_array(base), as_array(new)
    chosen = choose_method(b, n, multimodal) if method == "auto" else method
    if chosen == "welch":
        return welch(b, n, alpha)
    if chosen == "bootstrap":
        return bootstrap(b, n, alpha)
    return hodges_lehmann(b, n, alpha)


def judge(
    iv: Interval, significant: bool, effect: float, higher_is_better: bool, p: str = ""
) -> tuple[Verdict, str]:
    """The verdict from the ratio interval against the equivalence band [1-effect, 1+effect];
    `p` says the p-value significance was judged by."""
    low, high = iv.ratio_low, iv.ratio_high
    if math.isnan(iv.ratio):
        location = "mean" if iv.method == "welch" else "median"
        return "inconclusive", (
            f"the baseline's {location} is 0 or not surely away from it: a relative change is "
            "undefined"
        )
    # A significant change is reported when it may reach the effect of interest (its
    # interval goes past it) or its estimate is at least half of it; a smaller one whose
    # interval stays inside the band is "no change".
    big = iv.ratio - 1 >= effect / 2, 1 - iv.ratio >= effect / 2
    up = low > 1 and (high > 1 + effect or big[0])
    down = high < 1 and (low < 1 - effect or big[1])
    if significant and (up or down):
        worse = up != higher_is_better
        return ("regression" if worse else "improvement"), ""
    if 1 - effect <= low and high <= 1 + effect:
        return "no change", f"the interval lies within +-{100 * effect:g}%"
    if up or down:  # the interval says a change, its test does not (few values, or many metrics)
        return "inconclusive", (
            f"the change is not significant ({p or 'by its test'}): run more iterations or "
            "reduce the noise"
        )
    return "inconclusive", (
        f"the interval ({100 * (low - 1):+.2f}% .. {100 * (high - 1):+.2f}%) is wider than "
        f"+-{100 * effect:g}%: run more iterations or reduce the noise"
    )


def compare(
    samples: Mapping[str, tuple[ArrayLike, ArrayLike, bool]],
    effect: float = 0.01,
    alpha: float = 0.05,
    fdr: bool = True,
    method: Method = "auto",
) -> list[Comparison]:
    """Compare every metric: {name: (base, new, higher_is_better)}. With `fdr`, significance
    is judged on Benjamini-Hochberg adjusted p-values across the metrics."""
    results: list[Comparison] = []
    testable: list[tuple[Comparison, Interval]] = []
    for name, (base, new, hib) in samples.items():
        b, n = as_array(base), as_array(new)
        result = Comparison(
            metric=name,
            n_base=b.size,
            n_new=n.size,
            higher_is_better=hib,
            effect=effect,
            base=summarize(b),
            new=summarize(n),
            diagnostics=[
                {"sample": s, **f.as_dict()}
                for s, a in (("base", b), ("new", n))
                for f in diagnose(a)
            ],
        )
        results.append(result)
        if degenerate := _degenerate(b, n, effect, hib, result):
            result.verdict, result.reason = degenerate
            continue
        several = tuple(
            any(d["sample"] == side and d["check"] == "multimodal" for d in result.diagnostics)
            for side in ("base", "new")
        )
        testable.append((result, interval(b, n, alpha, method, (several[0], several[1]))))
    p_values = [iv.p_value for _, iv in testable]
    adjusting = fdr and len(p_values) > 1
    adjusted = stats.false_discovery_control(p_values) if adjusting else p_values
    for (result, iv), p_adj in zip(testable, adjusted, strict=True):
        result.method = iv.method
        result.estimate, result.ci_low, result.ci_high = iv.estimate, iv.low, iv.high
        result.ratio, result.ratio_ci_low, result.ratio_ci_high = (
            iv.ratio,
            iv.ratio_low,
            iv.ratio_high,
        )
        result.p_value, result.p_adjusted = iv.p_value, float(p_adj)
        significant = p_adj < alpha
        adjusted_for = f" adjusted for {len(p_values)} metrics" if adjusting else ""
        p = f"p = {p_adj:.3g}{adjusted_for}, over {alpha:g}"
        result.verdict, result.reason = _from_constant_zero(result, significant) or judge(
            iv, significant, effect, result.higher_is_better, p
        )
    return results


def _from_constant_zero(result: Comparison, significant: bool) -> tuple[Verdict, str] | None:
    """A count that stayed 0 (errors, dropped frames) and significantly is not now: as from
    one constant to another, a change of unbounded relative size, which `judge` (a ratio to
    the baseline) cannot say. Its direction is the new values' side of 0 (with ties the
    interval may still touch 0). None for any other baseline."""
    base, new = result.base, result.new
    if not (base and new and base.min == base.max == 0 and significant and new.mean != 0):
        return None
    worse = (new.mean > 0) != result.higher_is_better
    reason = "the baseline is a constant 0: any change from it is unbounded"
    return ("regression" if worse else "improvement"), reason


def _degenerate(
    b: NDArray[np.float64], n: NDArray[np.float64], effect: float, hib: bool, result: Comparison
) -> tuple[Verdict, str] | None:
    if b.size < 2 or n.size < 2:
        return "inconclusive", f"too few values (base {b.size}, new {n.size}; need 2 or more each)"
    if np.ptp(b) == 0 and np.ptp(n) == 0:
        result.method = "exact"
        diff = float(n[0] - b[0])
        result.estimate = result.ci_low = result.ci_high = diff
        ratio = 1 + diff / abs(b[0]) if b[0] else math.nan
        result.ratio = result.ratio_ci_low = result.ratio_ci_high = ratio
        if diff == 0:
            return "no change", "zero variance: both samples hold one identical value"
        if b[0] and abs(ratio - 1) <= effect:
            return "no change", "zero variance: both samples are constant and within the effect"
        worse = (diff > 0) != hib
        # From a constant 0 (a count of errors or dropped frames) any other constant is a
        # change of unbounded relative size.
        reason = "zero variance: both samples constant" + ("" if b[0] else f", from 0 to {n[0]:g}")
        return ("regression" if worse else "improvement"), reason
    return None
