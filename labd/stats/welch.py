"""Welch's t for two independent samples, in closed form: scipy's ttest_ind spends most of a
call checking its arguments, and the detector calls it once per alert of every history."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special


@dataclass(frozen=True)
class WelchT:
    diff: float  # mean(new) - mean(base)
    low: float
    high: float
    p_value: float  # two-sided
    quantile: float  # Student's t quantile of the interval, at Welch's degrees of freedom
    var_base: float  # variance of mean(base)
    var_new: float  # variance of mean(new)


def welch_t(base: NDArray[np.float64], new: NDArray[np.float64], alpha: float = 0.05) -> WelchT:
    """Needs at least two values on each side and some spread on one of them."""
    # Worked on values scaled near 1: the degrees of freedom square variances, which
    # overflowed for values of 1e78 and underflowed for 1e-80. A power of two scales exactly.
    scale = math.ldexp(1.0, math.frexp(max(np.abs(base).max(), np.abs(new).max()))[1])
    base, new = base / scale, new / scale
    vb, vn = float(base.var(ddof=1) / base.size), float(new.var(ddof=1) / new.size)
    total = vb + vn
    diff = float(new.mean() - base.mean())
    if total > 0:
        # Each side's share of the variance, so that squaring a tiny variance cannot
        # underflow to 0/0 (base 1e-100 with a wobble, new 1e100).
        sb, sn = vb / total, vn / total
        df = 1 / (sb * sb / (base.size - 1) + sn * sn / (new.size - 1))
        se = math.sqrt(total)
        p = float(2 * special.stdtr(df, -abs(diff) / se))
    else:
        # The spread underflowed on the common scale (1e-100 beside 1e100): negligible next
        # to the difference, so judged as describe_change judges no spread at all.
        df, se = float(min(base.size, new.size) - 1), 0.0
        p = 0.0 if diff else 1.0
    q = float(special.stdtrit(df, 1 - alpha / 2))
    low, high = (diff - q * se) * scale, (diff + q * se) * scale
    return WelchT(diff * scale, low, high, p, q, float(vb) * scale**2, float(vn) * scale**2)
