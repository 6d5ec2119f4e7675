"""How many iterations a component needs: power by simulation from a pilot (Mozilla's Talos
investigation).

For each sample size n, draw two samples of n from the pilot, shift one by the effect, and
count how often the comparison calls the shift a regression. The smallest n whose detection
rate reaches the target is the calibrated iteration count.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from labd.stats.comparison import choose_method, hodges_lehmann, welch
from labd.stats.diagnostics import as_array, diagnose, shapiro
from labd.stats.modality import mode_count
from labd.stats.plain import finite

SIZES = (3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 125, 150, 200)


@dataclass(frozen=True)
class Calibration:
    largest: ClassVar[int] = SIZES[-1]  # the largest size tried: n None means more than it

    component: str
    n: int | None  # None: the target is not reached even at the largest size
    power: dict[int, float]  # detection rate per sample size
    klass: str  # tight normal, wide or near normal, non-normal
    method: str
    pilot_n: int
    cov: float
    # What the pilot's size allows: n scales with the noise's variance, which a pilot of few
    # values knows only to within its chi-square interval (None: more than the largest size).
    n_low: int | None = None
    n_high: int | None = None
    findings: list[str] = field(default_factory=list)  # what the pilot's diagnostics say

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["class"] = out.pop("klass")
        out["power"] = {str(k): v for k, v in self.power.items()}
        return finite(out)


def distribution_class(values: ArrayLike, effect: float = 0.01) -> str:
    """The Talos investigation's classes: tight normal, wide or near normal, non-normal; and
    constant, for a pilot that shows no noise at all."""
    a = as_array(values)
    if np.ptp(a) == 0:
        return "constant: the pilot shows no noise"
    normal = shapiro(a)[1] >= 0.01
    cov = a.std(ddof=1) / abs(a.mean()) if a.mean() else math.inf
    if not normal and mode_count(a) > 1:
        return "non-normal"
    if normal and cov <= effect:
        return "tight normal"
    return "wide or near normal" if normal or mode_count(a) == 1 else "non-normal"


def power_at(
    pilot: ArrayLike, n: int, effect: float, alpha: float, method: str, draws: int, seed: int
) -> float:
    """Share of simulated A/B runs of n per side in which a shift of `effect` is detected."""
    a = as_array(pilot)
    rng = np.random.default_rng(seed)
    test = welch if method == "welch" else hodges_lehmann
    # The values grow by `effect` away from 0: up above it, down below it.
    up = float(np.median(a)) > 0
    detected = 0
    for _ in range(draws):
        base = rng.choice(a, n)
        new = rng.choice(a, n) * (1 + effect)
        if np.ptp(base) == 0 and np.ptp(new) == 0:
            detected += new[0] != base[0]
            continue
        iv = test(base, new, alpha)
        detected += iv.p_value < alpha and (iv.ratio_low > 1 if up else iv.ratio_high < 1)
    return detected / draws


def calibrate(
    component: str,
    pilot: ArrayLike,
    effect: float = 0.01,
    alpha: float = 0.05,
    target: float = 0.95,
    draws: int = 200,
    seed: int = 0,
) -> Calibration:
    """The smallest n in SIZES whose simulated detection rate reaches `target`."""
    a = as_array(pilot)
    if a.size < 5:
        raise ValueError(f"{component}: a pilot needs at least 5 values, got {a.size}")
    if np.median(a) == 0:
        raise ValueError(f"{component}: the pilot's median is 0: a relative effect is undefined")
    method = choose_method(a, a)
    power: dict[int, float] = {}
    chosen = None
    for n in SIZES:
        power[n] = power_at(a, n, effect, alpha, method, draws, seed + n)
        if power[n] >= target:
            chosen = n
            break
    cov = float(a.std(ddof=1) / abs(a.mean())) if a.mean() else math.inf
    # A pilot with no noise allows no range: it says nothing of the noise.
    low, high = size_range(chosen, a.size) if np.ptp(a) else (None, None)
    return Calibration(
        component,
        chosen,
        power,
        distribution_class(a, effect),
        method,
        a.size,
        cov,
        low,
        high,
        [f"{f.message}: {f.hint}" for f in diagnose(a) if f.check in PILOT_FINDINGS],
    )


# What a pilot's diagnostics can say that changes what its answer is worth.
PILOT_FINDINGS = ("warmup", "trend", "step", "multimodal", "first_run", "outliers")


def size_range(n: int | None, pilot_n: int, confidence: float = 0.95) -> tuple[int | None, ...]:
    """The sizes n could be for the noise a pilot of `pilot_n` values allows: n grows with
    the variance, known to within its chi-square interval (for normal noise; wider for
    other shapes). A pilot of 5 allows 0.36 to 8.3 times its answer, one of 30 0.63 to 1.8."""
    df = pilot_n - 1
    tail = (1 - confidence) / 2
    grow = df / stats.chi2.ppf(tail, df)
    shrink = df / stats.chi2.ppf(1 - tail, df)
    largest = SIZES[-1]
    if n is None:
        return max(SIZES[0], math.ceil(largest * shrink)), None
    high = math.ceil(n * grow)
    return max(SIZES[0], math.ceil(n * shrink)), (high if high <= largest else None)


# Measured values before the stopping rule may stop: a mode holding a fifth of the runs shows
# in 15 of them 96% of the time (0.8^15 = 3.5%); after 5, a third of bimodal jobs stopped on
# one mode alone, their means 13-15% off (an outside tester's find).
STABLE_AFTER = 15


def stable_half_width(effect: float, alpha: float = 0.05, power: float = 0.95) -> float:
    """The widest relative 95% interval of a mean at which two runs, each stopped by the rule,
    tell a change of `effect` with `power` at `alpha` (as `labd calibrate` asks): their
    difference's standard error is sqrt(2) times each one's."""
    z_alpha, z_power = stats.norm.ppf(1 - alpha / 2), stats.norm.ppf(power)
    return float(effect * z_alpha / (math.sqrt(2) * (z_alpha + z_power)))


def stability(
    values: ArrayLike, effect: float = 0.01, alpha: float = 0.05
) -> tuple[bool | None, str]:
    """Whether one metric's values resolve `effect`: True, False (not yet), or None when no
    relative change can be judged (its mean's interval holds 0: a count of dropped frames
    that is mostly 0), which must not keep a job running. With the reason."""
    a = as_array(values)
    if a.size < STABLE_AFTER:
        return False, f"{a.size} values, fewer than {STABLE_AFTER}"
    if np.ptp(a) == 0:
        return True, "every value the same"
    half = stats.t.ppf(1 - alpha / 2, a.size - 1) * a.std(ddof=1) / math.sqrt(a.size)
    if abs(a.mean()) <= half:
        return None, "not judged: its mean's interval holds 0, so it has no relative change"
    relative, bar = half / abs(a.mean()), stable_half_width(effect, alpha)
    if relative <= bar:
        return True, f"interval +-{100 * relative:.2f}%, within +-{100 * bar:.2f}%"
    return False, f"interval +-{100 * relative:.2f}%, wider than +-{100 * bar:.2f}%"


def stability_of(
    measured: list[dict[str, float]], effect: float, alpha: float = 0.05
) -> dict[str, tuple[bool | None, str]]:
    """`stability` of each metric over a job's measured iterations (their values)."""
    names = sorted({name for values in measured for name in values})
    return {
        name: stability([v[name] for v in measured if name in v], effect, alpha) for name in names
    }


def enough_iterations(
    values: ArrayLike, effect: float = 0.01, alpha: float = 0.05, max_n: int = 200
) -> tuple[bool, str]:
    """Adaptive stopping for one metric: stop once it is stable (see `stability`; one that
    cannot be judged does not hold a job back), or at `max_n` values."""
    if as_array(values).size >= max_n:
        return True, f"reached the maximum of {max_n} iterations"
    stable, reason = stability(values, effect, alpha)
    return stable is not False, reason
