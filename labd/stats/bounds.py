"""Which measured values labd takes: numbers (a boolean is not one), finite, and within the
magnitudes the statistics handle (labd.stats.io's LARGEST and SMALLEST, or 0).

Every place a value comes in (a scenario's report, a logcat mark) refuses the others with this
reason, so nothing the statistics, the store's JSON or Perfherder cannot take is ever stored.
"""

from __future__ import annotations

import math

from labd.stats.io import LARGEST, SMALLEST, out_of_range


def refusal(value: object) -> str | None:
    """Why `value` is not a measured value labd takes ("nan is not a finite number"); None
    when it is one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{_quoted(value)} is not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} is not a finite number"
    try:
        number = float(value)
    except OverflowError:  # an integer past a float's range
        number = math.inf
    if not out_of_range(number):
        return None
    shown = f"{number:g}" if math.isfinite(number) else _quoted(value)
    return f"{shown} is out of range: magnitudes from {SMALLEST:g} to {LARGEST:g} (or 0)"


def _quoted(value: object, limit: int = 40) -> str:
    """A value as a refusal quotes it: one of 100,000 digits is not repeated whole (and
    Python will not even write an integer of over 4,300)."""
    if isinstance(value, int) and value.bit_length() > 4 * limit:
        return f"an integer of about {round(value.bit_length() * math.log10(2)):,} digits"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"
