"""Which measured values labd takes: numbers (a boolean is not one), finite, and within the
magnitudes the statistics handle (labd.stats.io's LARGEST and SMALLEST, or 0).

Every place a value comes in (a scenario's report, a logcat mark) refuses the others with this
reason, so nothing the statistics, the store's JSON or Perfherder cannot take is ever stored.
"""

from __future__ import annotations

import math

from labd.stats.io import LARGEST, SMALLEST, out_of_range
from labd.visible import quoted


def refusal(value: object) -> str | None:
    """Why `value` is not a measured value labd takes ("nan is not a finite number"); None
    when it is one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{quoted(value)} is not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} is not a finite number"
    try:
        number = float(value)
    except OverflowError:  # an integer past a float's range
        number = math.inf
    if not out_of_range(number):
        return None
    shown = f"{number:g}" if math.isfinite(number) else quoted(value)
    return f"{shown} is out of range: magnitudes from {SMALLEST:g} to {LARGEST:g} (or 0)"
