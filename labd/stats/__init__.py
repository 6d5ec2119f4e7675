"""Statistics: pure functions on arrays of raw values. Nothing here knows about the store.

Importing this package imports SciPy (about a second): a caller that may not need it imports
the package inside the function that does (the event loop never waits for it).
"""

from labd.stats.alert import Alert
from labd.stats.calibration import Calibration, calibrate, enough_iterations
from labd.stats.comparison import Comparison, compare
from labd.stats.detection import DEFAULT_METHOD, METHODS, detect
from labd.stats.diagnostics import Finding, diagnose, tukey_outliers
from labd.stats.ets import prediction_band
from labd.stats.io import (
    DataError,
    Samples,
    read_history,
    read_sample_file,
    read_samples,
    samples_from_results,
)
from labd.stats.summary import Summary, summarize

__all__ = [
    "DEFAULT_METHOD",
    "METHODS",
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
    "prediction_band",
    "read_history",
    "read_sample_file",
    "read_samples",
    "samples_from_results",
    "summarize",
    "tukey_outliers",
]
