"""Why a benchmark's numbers may not be trusted: each finding with its evidence and a hint.

All functions take the raw values in iteration order and never drop any: outliers and
warm-up are reported, and the caller decides what to do with them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special, stats

from labd.stats.modality import modes

NORMALITY_ALPHA = 0.01
TREND_ALPHA = 0.01
STEP_ALPHA = 0.01
COV_LIMIT = 0.05  # 5%: above it, a 1% change needs hundreds of iterations to show


@dataclass(frozen=True)
class Finding:
    """One diagnostic that fired."""

    check: str  # non_normal, multimodal, trend, step, high_cov, first_run, warmup, outliers
    message: str
    hint: str
    statistic: float | None = None
    p_value: float | None = None
    indices: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def as_array(values: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(values, dtype=float)


SHAPIRO_LIMIT = 5000
FAR_OUT = 3.0  # Tukey's outer fences, in interquartile ranges


def shapiro(values: NDArray[np.float64]) -> tuple[float, float]:
    """Shapiro-Wilk's (W, p) on the values standardised: scipy judges a range "zero" on its
    absolute size (values of 1e-99 differing by 1e-102) and warns on stderr; a constant
    sample is as normal as it can be. Its p-value holds up to 5,000 values: above, it sees
    5,000 taken evenly through the run (`calibrate` printed scipy's warning for 40,000)."""
    values = values[:: -(-values.size // SHAPIRO_LIMIT)]
    spread = values.std()
    if values.size < 3 or not spread:
        return 1.0, 1.0
    w, p = stats.shapiro((values - values.mean()) / spread)
    return float(w), float(p)


def tukey_outliers(values: ArrayLike, k: float = 1.5) -> list[int]:
    """Indices of values outside Tukey's fences [Q1 - k IQR, Q3 + k IQR]."""
    a = as_array(values)
    if a.size < 4:
        return []
    q1, q3 = np.percentile(a, [25, 75])
    iqr = q3 - q1
    return [int(i) for i in np.flatnonzero((a < q1 - k * iqr) | (a > q3 + k * iqr))]


def warmup_length(values: ArrayLike) -> int:
    """How many leading iterations lie outside the fences of everything after them."""
    a = as_array(values)
    count = 0
    while count < a.size // 3:
        rest = a[count + 1 :]
        q1, q3 = np.percentile(rest, [25, 75])
        iqr = max(q3 - q1, 1e-12 * max(abs(q3), 1.0))
        if q1 - 1.5 * iqr <= a[count] <= q3 + 1.5 * iqr:
            break
        count += 1
    return count


def cusum_step(values: ArrayLike) -> tuple[float, float, int]:
    """Largest standardised CUSUM excursion, its p-value (Kolmogorov), and where it peaks."""
    a = as_array(values)
    sd = a.std(ddof=1)
    if a.size < 6 or sd == 0:
        return 0.0, 1.0, 0
    s = np.cumsum(a - a.mean())
    k = int(np.argmax(np.abs(s)))
    statistic = float(np.abs(s[k]) / (sd * np.sqrt(a.size)))
    return statistic, float(special.kolmogorov(statistic)), k + 1


def diagnose(values: ArrayLike, cov_limit: float = COV_LIMIT) -> list[Finding]:
    """Every finding that fires on values (in iteration order)."""
    a = as_array(values)
    n = a.size
    found: list[Finding] = []
    if n < 3 or a.std() == 0:
        return found
    mean = a.mean()
    # Around a mean of 0 (a signed offset) a coefficient of variation means nothing.
    cov = a.std(ddof=1) / abs(mean) if mean else 0.0
    if cov > cov_limit:
        found.append(
            Finding(
                "high_cov",
                f"coefficient of variation is {100 * cov:.1f}% (limit {100 * cov_limit:g}%)",
                "stabilise the device (CPU pinning, quiet host, thermal cool-down) "
                "or run more iterations",
                statistic=float(cov),
            )
        )
    if 3 <= n <= 5000:
        w, p = shapiro(a)
        if p < NORMALITY_ALPHA:
            found.append(
                Finding(
                    "non_normal",
                    f"values are not normally distributed (Shapiro-Wilk W={w:.3f}, p={p:.2g})",
                    "compare medians (Hodges-Lehmann), not means; look at the histogram",
                    statistic=float(w),
                    p_value=float(p),
                )
            )
    count, p_modes = modes(a)
    if count > 1:
        found.append(
            Finding(
                "multimodal",
                f"values cluster around {count} distinct levels (Silverman's test of one "
                f"mode: p={p_modes:.2g})",
                "something switches between runs (CPU frequency, cache state, a background "
                "task); find it before trusting a mean",
                statistic=float(count),
                p_value=p_modes,
            )
        )
    if n >= 8:
        rho, p = stats.spearmanr(np.arange(n), a)
        if p < TREND_ALPHA:
            direction = "rise" if rho > 0 else "fall"
            found.append(
                Finding(
                    "trend",
                    f"values {direction} in iteration order (Spearman rho={rho:.2f}, p={p:.2g})",
                    "thermal throttling or warm-up: plot values in order, add cool-down or "
                    "warm-up iterations",
                    statistic=float(rho),
                    p_value=float(p),
                )
            )
        stat, p, at = cusum_step(a)
        if p < STEP_ALPHA:
            found.append(
                Finding(
                    "step",
                    f"the level shifts after iteration {at} (CUSUM {stat:.2f}, p={p:.2g})",
                    "something changed mid-run (throttling, another process, a cache); "
                    "rerun and look at the device's state",
                    statistic=stat,
                    p_value=p,
                    indices=[at],
                )
            )
    warm = warmup_length(a)
    rest = a[1:]
    if n >= 6 and warm < 2:  # a longer warm-up says it (the first run in it)
        q1, q3 = np.percentile(rest, [25, 75])
        iqr = q3 - q1
        if iqr > 0 and not q1 - 3 * iqr <= a[0] <= q3 + 3 * iqr:
            z = (a[0] - np.median(rest)) / iqr
            found.append(
                Finding(
                    "first_run",
                    f"the first measured run is unlike the rest ({z:+.1f} IQR from their median)",
                    # A job may have warm-up runs already (a tester's was told "warmup = 1"
                    # with warmup = 1): this one came after them.
                    "treat it as warm-up too: one more warm-up run (raise warmup by 1), or "
                    "drop-first aggregation",
                    statistic=float(z),
                    indices=[0],
                )
            )
    if warm >= 2:
        found.append(
            Finding(
                "warmup",
                f"the first {warm} iterations look like warm-up",
                f"raise the manifest's warmup by {warm} (the values here are after it)",
                statistic=float(warm),
                indices=list(range(warm)),
            )
        )
    # Tukey's "far out" values: his inner fences (1.5 IQR) hold a normal sample of 50 whole
    # only 58% of the time, so the finding fired on clean runs and taught users to ignore it.
    outliers = tukey_outliers(a, FAR_OUT)
    if outliers:
        found.append(
            Finding(
                "outliers",
                f"{len(outliers)} value(s) far outside Tukey's fences (over 3 interquartile "
                "ranges out; kept, not dropped)",
                "look at what happened in those iterations",
                statistic=float(len(outliers)),
                indices=outliers,
            )
        )
    return found
