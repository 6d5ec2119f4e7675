"""Statistics: pure functions on arrays of raw values. Nothing here knows about the store.

SciPy (about a second, more under load) is imported with the first name that needs it, not
with the package: `labd compare` refuses a bad input file before it waits for SciPy. A caller
on the event loop still imports the names it uses inside the function that does (the loop
never waits for it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from labd.stats.alert import Alert
    from labd.stats.bounds import refusal
    from labd.stats.calibration import (
        Calibration,
        calibrate,
        enough_iterations,
        stability,
        stability_of,
        stable_half_width,
    )
    from labd.stats.comparison import Comparison, compare
    from labd.stats.detection import DEFAULT_METHOD, METHODS, REACH, detect
    from labd.stats.diagnostics import Finding, diagnose, tukey_outliers
    from labd.stats.ets import prediction_band
    from labd.stats.io import (
        Samples,
        read_history,
        read_sample_file,
        read_samples,
        samples_from_results,
    )
    from labd.stats.plain import json_text
    from labd.stats.summary import Summary, summarize
    from labd.stats.textfile import DataError

# Each public name, by the module that defines it (imported on first use).
_HOMES = {
    "Alert": "alert",
    "refusal": "bounds",
    "Calibration": "calibration",
    "calibrate": "calibration",
    "enough_iterations": "calibration",
    "stability": "calibration",
    "stability_of": "calibration",
    "stable_half_width": "calibration",
    "Comparison": "comparison",
    "compare": "comparison",
    "DEFAULT_METHOD": "detection",
    "METHODS": "detection",
    "REACH": "detection",
    "detect": "detection",
    "Finding": "diagnostics",
    "diagnose": "diagnostics",
    "tukey_outliers": "diagnostics",
    "prediction_band": "ets",
    "json_text": "plain",
    "Samples": "io",
    "read_history": "io",
    "read_sample_file": "io",
    "read_samples": "io",
    "samples_from_results": "io",
    "Summary": "summary",
    "summarize": "summary",
    "DataError": "textfile",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value  # found directly from now on
    return value


__all__ = [
    "DEFAULT_METHOD",
    "METHODS",
    "REACH",
    "Alert",
    "Calibration",
    "Comparison",
    "DataError",
    "Finding",
    "Samples",
    "Summary",
    "calibrate",
    "compare",
    "detect",
    "diagnose",
    "enough_iterations",
    "json_text",
    "prediction_band",
    "read_history",
    "read_sample_file",
    "read_samples",
    "refusal",
    "samples_from_results",
    "stability",
    "stability_of",
    "stable_half_width",
    "summarize",
    "tukey_outliers",
]
