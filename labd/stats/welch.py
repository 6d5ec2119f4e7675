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
    vb, vn = base.var(ddof=1) / base.size, new.var(ddof=1) / new.size
    se = math.sqrt(vb + vn)
    df = (vb + vn) ** 2 / (vb**2 / (base.size - 1) + vn**2 / (new.size - 1))
    q = float(special.stdtrit(df, 1 - alpha / 2))
    diff = float(new.mean() - base.mean())
    p = float(2 * special.stdtr(df, -abs(diff) / se))
    low, high = (diff - q * se) * scale, (diff + q * se) * scale
    return WelchT(diff * scale, low, high, p, q, float(vb) * scale**2, float(vn) * scale**2)
