"""The windowed Welch t-test Talos used (Larres et al.), kept as the baseline to beat."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from labd.stats.alert import Alert, describe_change


def detect_talos(
    x: Sequence[float], back: int = 30, fore: int = 5, threshold: float = 9.0, min_back: int = 12
) -> list[Alert]:
    """Talos: Welch t between the back window and the fore window starting at each build;
    an alert at a local maximum of t above the threshold, once the fore window is full."""
    a = np.asarray(x, dtype=float)
    n = a.size
    t_values = np.zeros(n)
    for i in range(min_back, n - fore + 1):
        b, f = a[max(0, i - back) : i], a[i : i + fore]
        se = math.sqrt(b.var(ddof=1) / b.size + f.var(ddof=1) / f.size)
        t_values[i] = abs(f.mean() - b.mean()) / se if se > 0 else 0.0
    alerts: list[Alert] = []
    last = -fore
    for i in range(n):
        if t_values[i] <= threshold or i - last < fore:
            continue
        window = t_values[max(0, i - fore + 1) : i + fore]
        if t_values[i] < window.max():
            continue
        alerts.append(
            describe_change(x, max(0, i - back), i, min(n, i + fore), i + fore - 1, "talos")
        )
        last = i
    return alerts
