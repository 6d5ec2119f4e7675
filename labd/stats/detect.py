"""Regression detection over a history: the ordered results of one (test, metric, device class).

Every method sees the history one build at a time, as CI does, so each alert says both where
the change began (`index`) and when the method could first tell (`raised_at`):

- `ets`: exponential smoothing with a prediction interval (Larres et al.). A value outside
  the interval is a candidate; the next value confirms it (`confirm` builds; 0 flags at once).
  A candidate that is not confirmed is a single-build outlier: it is neither reported nor
  allowed to move the level or widen later intervals (the seed's Figure 5b).
- `cusum`: a two-sided CUSUM of robustly standardised values, each clipped so that one outlier
  cannot raise an alert alone; it accumulates small sustained shifts and slow creeps that a
  one-value test never sees. The change is dated where the sum last left zero, or, where a
  ramp fits better than a step (with up to 10 builds after the alarm, where the history has
  them), where the ramp began. An alarm on a series whose values wander (strong
  autocorrelation before the change) is not reported, nor one on a trend the history began
  with.
- `ets+cusum` (the default, chosen by measurement): both, a CUSUM alert near an ETS alert
  counting as the same change.
- `talos`: the windowed Welch t-test Talos used (back window 30, fore window 5, t > 9), kept
  as the baseline every other method must beat.

After an alert each method starts afresh at the change, so a change is reported once. A fresh
start takes its level from its first builds but keeps the noise the series has shown: a change
moves the level, not the noise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from labd.stats.alert import Alert, describe_change
from labd.stats.confirm import rank_confirmed
from labd.stats.cusum import detect_cusum
from labd.stats.ets import ETS_Z, detect_ets, ets_one_step, prediction_band
from labd.stats.talos import detect_talos

__all__ = [
    "DEFAULT_METHOD",
    "ETS_Z",
    "METHODS",
    "Alert",
    "describe_change",
    "detect",
    "detect_cusum",
    "detect_ets",
    "detect_ets_cusum",
    "detect_talos",
    "ets_one_step",
    "prediction_band",
]

METHODS = ("ets+cusum", "ets", "cusum", "talos")
DEFAULT_METHOD = "ets+cusum"  # chosen by benchmarks/stats/detection_bench.py


def detect_ets_cusum(
    x: Sequence[float],
    gap: int = 12,
    z: float = ETS_Z,
    confirm: int = 3,
    threshold: float = 7.0,
    drift: float = 1.1,
    clip: float = 3.0,
    long_run: bool = True,
    spread: bool = True,
    rank_p: float | None = 0.01,
) -> list[Alert]:
    """ETS for the large changes it flags within a build, CUSUM for the small sustained
    shifts and creeps it cannot see; a CUSUM alert within `gap` builds of an ETS one is the
    same change. With `rank_p`, an alert is reported only when the builds since the change
    rank on its side of those before (one-sided Mann-Whitney p < rank_p). (The settings were
    chosen by the detection benchmarks; docs/statistics.md says how.)"""
    fast = detect_ets(x, z=z, confirm=confirm)
    slow = [
        a
        for a in detect_cusum(
            x, threshold=threshold, drift=drift, clip=clip, long_run=long_run, spread=spread
        )
        if all(abs(a.index - b.index) > gap for b in fast)
    ]
    alerts = sorted(fast + slow, key=lambda a: a.index)
    if rank_p is None:
        return alerts
    kept: list[Alert] = []
    for alert in alerts:
        since = kept[-1].index if kept else 0
        if rank_confirmed(x, alert, since, rank_p):
            kept.append(alert)
    return kept


def detect(x: Sequence[float], method: str = DEFAULT_METHOD, **options: Any) -> list[Alert]:
    """Alerts in one history by the named method."""
    if method not in METHODS:
        raise ValueError(f"unknown detection method {method!r} (one of {', '.join(METHODS)})")
    values = [float(v) for v in x]
    if len(values) < 2 or min(values) == max(values):
        return []
    methods: dict[str, Callable[..., list[Alert]]] = {
        "ets+cusum": detect_ets_cusum,
        "cusum": detect_cusum,
        "ets": detect_ets,
        "talos": detect_talos,
    }
    return methods[method](values, **options)
