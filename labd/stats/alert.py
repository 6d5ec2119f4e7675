"""What a detector reports: where a change began, when it was seen, and how large it is."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from labd.stats.plain import finite
from labd.stats.segments import Values, median
from labd.stats.welch import welch_t

MAGNITUDE = ("magnitude", "magnitude_low", "magnitude_high")


@dataclass(frozen=True)
class Alert:
    index: int  # first build of the change, from 0
    raised_at: int  # newest build seen when the alert was first raised
    direction: str  # "up" or "down" (of the value; whether that is worse depends on the metric)
    # The change of the level relative to the level before, e.g. 0.05 for +5%, with its
    # interval. What the detectors compare against their bars: from a level of 0 it holds the
    # absolute change (divided by 1), so as_dict() gives null there and wherever `relative`
    # is False; `absolute_change` is the change in the series' unit.
    magnitude: float
    magnitude_low: float
    magnitude_high: float
    confidence: float  # 1 - p of the before/after comparison
    method: str
    absolute_change: float = math.nan  # median after - median before, in the series' unit
    absolute_change_low: float = math.nan  # its 95% interval (Welch's, of the means)
    absolute_change_high: float = math.nan
    level_before: float = math.nan  # the median before the change, which `magnitude` divides by
    # Whether a relative change is defined: the level before is not 0, nor within its own 95%
    # interval of 0 (as Fieller's interval for `labd compare`'s ratio is then unbounded).
    relative: bool = True

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON; the relative magnitude null where it is undefined."""
        out = finite(asdict(self))
        if not self.relative:
            out.update(dict.fromkeys(MAGNITUDE))
        return out


def describe_change(
    x: Values, start: int, index: int, end: int, raised_at: int, method: str
) -> Alert:
    """An alert for a change at `index`, comparing x[start:index] with x[index:end]."""
    before = np.asarray(x[max(start, index - 30) : index], dtype=float)
    after = np.asarray(x[index:end], dtype=float)
    base = median(before)
    scale = abs(base) or 1.0
    diff = median(after) - base
    relative = base != 0
    if before.size >= 2 and after.size >= 2 and (before.std() > 0 or after.std() > 0):
        test = welch_t(before, after)
        low, high, p = test.low, test.high, test.p_value
        # The level before within its own interval of 0 (the baseline "through 0"): no
        # relative change can be told, as Fieller's interval is then unbounded.
        relative = relative and abs(float(before.mean())) > test.quantile * math.sqrt(test.var_base)
    else:
        low = high = diff
        p = 0.0 if diff else 1.0
    return Alert(
        index=index,
        raised_at=raised_at,
        direction="up" if diff > 0 else "down",
        magnitude=diff / scale,
        magnitude_low=low / scale,
        magnitude_high=high / scale,
        confidence=1 - p if math.isfinite(p) else 0.0,
        method=method,
        absolute_change=diff,
        absolute_change_low=low,
        absolute_change_high=high,
        level_before=base,
        relative=relative,
    )


def sketch_change(
    x: Values, start: int, index: int, end: int, raised_at: int, method: str
) -> Alert:
    """describe_change's alert without its interval and confidence (NaN): the direction and
    magnitude alone, for a scan whose alerts are mostly dropped before anyone reads them
    (describe_change with the same arguments completes one)."""
    before = np.asarray(x[max(start, index - 30) : index], dtype=float)
    base = median(before)
    diff = median(np.asarray(x[index:end], dtype=float)) - base
    return Alert(
        index=index,
        raised_at=raised_at,
        direction="up" if diff > 0 else "down",
        magnitude=diff / (abs(base) or 1.0),
        magnitude_low=math.nan,
        magnitude_high=math.nan,
        confidence=math.nan,
        method=method,
        absolute_change=diff,
        level_before=base,
        relative=base != 0,
    )
