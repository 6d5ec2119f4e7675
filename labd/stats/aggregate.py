"""Talos' ways of turning a suite (components x iterations) into one number (Mozilla's
Talos investigation).

`talos-old`: per component drop the maximum, take the median; drop the largest median; the mean
of the rest. `talos-new` (the investigation's proposal): per component drop the first run, take
the median; the mean of the medians. The raw values stay stored: either can be recomputed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

SCHEMES = ("talos-old", "talos-new")


def aggregate(components: Mapping[str, Sequence[float]], scheme: str = "talos-new") -> float:
    """One suite value from each component's values in iteration order."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown aggregation {scheme!r} (one of {', '.join(SCHEMES)})")
    if not components or any(len(v) < 2 for v in components.values()):
        raise ValueError("every component needs at least 2 values")
    if scheme == "talos-new":
        return float(np.mean([np.median(v[1:]) for v in components.values()]))
    medians = sorted(float(np.median(sorted(v)[:-1])) for v in components.values())
    kept = medians[:-1] if len(medians) > 1 else medians
    return float(np.mean(kept))
