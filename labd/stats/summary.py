"""Per-metric summaries of raw iteration values (the Raptor table: n, mean, median, ...)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from labd.stats.plain import finite


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    median: float
    stddev: float
    mad: float  # median absolute deviation, the median's spread
    cov: float  # coefficient of variation: stddev / mean
    min: float
    max: float
    p95: float
    mean_ci: tuple[float, float]  # 95%, Student t
    median_ci: tuple[float, float]  # at least 95%, order statistics (undefined below 6)

    def as_dict(self) -> dict[str, Any]:
        return finite(asdict(self))  # the cov of a mean of 0 is null

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Summary:
        """The summary `as_dict` gave (nulls back to NaN)."""

        def number(x: Any) -> float:
            return float("nan") if x is None else float(x)

        pairs = {k: (number(data[k][0]), number(data[k][1])) for k in ("mean_ci", "median_ci")}
        plain = {k: number(data[k]) for k in cls.__dataclass_fields__ if k not in pairs}
        return cls(**(plain | pairs | {"n": int(data["n"])}))  # type: ignore[arg-type]


UNDEFINED = float("nan")  # a statistic one value cannot give: null in JSON, `-` in tables


def median_ci(a: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """The median's interval from two order statistics (the binomial method: how many values
    lie below the median is Binomial(n, 1/2)), covering at least 1 - alpha whatever the
    values' shape. Undefined below 6 values, where even [min, max] covers less than 95% (75%
    for 3: the bootstrap's percentile interval, used before, was [min, max] there too)."""
    from scipy import stats

    n = a.size
    j = int(stats.binom.ppf(alpha / 2, n, 0.5))  # the least j with P(B <= j) >= alpha / 2
    if stats.binom.cdf(j, n, 0.5) > alpha / 2:
        j -= 1  # the values below the interval: P(B <= j) at most alpha / 2 each side
    if j < 0:
        return UNDEFINED, UNDEFINED
    ordered = np.partition(a, [j, n - 1 - j])
    return float(ordered[j]), float(ordered[n - 1 - j])


def summarize(values: ArrayLike) -> Summary | None:
    """The summary of finite values, or None when there are none. One value has no spread
    and no interval: stddev, MAD, CoV and both intervals are undefined, not 0."""
    a = np.asarray(values, dtype=float)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return None
    mean = float(a.mean())
    stddev = float(a.std(ddof=1)) if a.size > 1 else UNDEFINED
    mad = float(np.median(np.abs(a - np.median(a)))) if a.size > 1 else UNDEFINED
    return Summary(
        n=int(a.size),
        mean=mean,
        median=float(np.median(a)),
        stddev=stddev,
        mad=mad,
        cov=stddev / abs(mean) if mean else float("nan"),
        min=float(a.min()),
        max=float(a.max()),
        p95=float(np.percentile(a, 95)),
        mean_ci=_mean_ci(a, mean, stddev),
        median_ci=median_ci(a),
    )


def _mean_ci(a: np.ndarray, mean: float, stddev: float) -> tuple[float, float]:
    if a.size < 2:
        return UNDEFINED, UNDEFINED
    from scipy import stats

    half = float(stats.t.ppf(0.975, a.size - 1)) * stddev / np.sqrt(a.size)
    return mean - half, mean + half
