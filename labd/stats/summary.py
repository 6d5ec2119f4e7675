"""Per-metric summaries of raw iteration values (the Raptor table: n, mean, median, ...)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike


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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(values: ArrayLike) -> Summary | None:
    """The summary of finite values, or None when there are none."""
    a = np.asarray(values, dtype=float)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return None
    mean = float(a.mean())
    stddev = float(a.std(ddof=1)) if a.size > 1 else 0.0
    return Summary(
        n=int(a.size),
        mean=mean,
        median=float(np.median(a)),
        stddev=stddev,
        mad=float(np.median(np.abs(a - np.median(a)))),
        cov=stddev / abs(mean) if mean else float("nan"),
        min=float(a.min()),
        max=float(a.max()),
        p95=float(np.percentile(a, 95)),
    )
