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
- `rank`: an online rank scan (a windowed Mann-Whitney test over every split of the recent
  builds, calibrated against its own quiet builds; see rankscan.py).
- `ets+rank`, `ets+cusum` and `ets+cusum+rank`: ensembles, an alert near one already taken
  counting as the same change.
- `ets+rank+vote` (the default, chosen leave-one-family-out): `ets+rank` with a more
  sensitive rank scan whose alerts stand where the CUSUM agrees (a vote, vote.py), and
  rank-scan alerts that continue a slow cycle dropped (cycles.py). It finds more small
  shifts than `ets+rank` for 1.6 times its CPU. In both, before the rank scan can raise
  anything, the CUSUM's alerts of large shifts stand (early_large_shifts), and when it can,
  its first builds are searched once for the change it cannot date among its own quiet builds
  (first_builds_split).
- `talos`: the windowed Welch t-test Talos used (back window 30, fore window 5, t > 9), kept
  as the baseline every other method must beat.

After an alert each method starts afresh at the change, so a change is reported once. A fresh
start takes its level from its first builds but keeps the noise the series has shown: a change
moves the level, not the noise.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from labd.stats.alert import Alert, describe_change
from labd.stats.confirm import rank_confirmed
from labd.stats.cusum import HINDSIGHT, detect_cusum
from labd.stats.cycles import cycle_filtered
from labd.stats.ets import ETS_Z, detect_ets, ets_one_step, prediction_band
from labd.stats.io import LARGEST, SMALLEST, out_of_range
from labd.stats.rankscan import SCAN_THRESHOLD, detect_rank_scan, first_builds_split
from labd.stats.segments import NOISE_SPAN, robust_level
from labd.stats.talos import detect_talos
from labd.stats.vote import VOTE_THRESHOLD, Taken, voted

__all__ = [
    "DEFAULT_METHOD",
    "ETS_Z",
    "METHODS",
    "REACH",
    "Alert",
    "Reach",
    "describe_change",
    "detect",
    "detect_cusum",
    "detect_ensemble",
    "detect_ets",
    "detect_ets_cusum",
    "detect_rank_scan",
    "detect_talos",
    "ets_one_step",
    "prediction_band",
]

METHODS = (
    "ets+rank+vote",
    "ets+rank",
    "ets+cusum",
    "ets+cusum+rank",
    "ets",
    "cusum",
    "rank",
    "talos",
)
DEFAULT_METHOD = "ets+rank+vote"  # chosen by benchmarks/stats/lofo_bench.py


@dataclass(frozen=True)
class Reach:
    """Where a method can see a change in a history (for reports: the detectors do not read
    it). `first_dated`: no change is dated before this build, the builds before it setting
    the reference level (the warm-up of ETS and of the CUSUM, the rank scan's 10 builds
    before a split, Talos's back window of 12), so a change that began among them is dated
    here or not at all. `fewest_builds`: the shortest history on which the method can raise
    an alert at all (ETS confirms a change over the builds after it, 3 in the ensembles; the
    CUSUM's sum takes 3 builds to pass its threshold; an ensemble alert must also rank on its
    side; the rank scan first measures its own statistic over 20 quiet builds, 20 builds
    back; Talos fills its fore window of 5). Measured on extreme steps, spikes and random
    walks, and checked by tests/unit/stats/test_detect_reach.py. The rank scan alone seldom
    dates a change as early as its bound: one that early spoils the quiet builds it
    calibrates on."""

    first_dated: int
    fewest_builds: int


REACH = {
    "ets+rank+vote": Reach(10, 14),
    "ets+rank": Reach(10, 14),
    "ets+cusum": Reach(10, 14),
    "ets+cusum+rank": Reach(10, 14),
    "ets": Reach(10, 12),
    "cusum": Reach(10, 13),
    "rank": Reach(10, 54),
    "talos": Reach(12, 17),
}


EARLY_BUILDS = REACH["rank"].fewest_builds  # the rank scan's blind start
EARLY_SIZE = 4.0  # noise deviations of an early shift the CUSUM may report


def detect_ensemble(
    x: Sequence[float],
    voters: tuple[str, ...] = ("ets", "cusum"),
    gap: int = 12,
    z: float = ETS_Z,
    confirm: int = 3,
    threshold: float = 7.0,
    drift: float = 1.1,
    clip: float = 3.0,
    long_run: bool = True,
    spread: bool = True,
    rank_p: float | None = 0.01,
    scan_threshold: float = SCAN_THRESHOLD,
    calibrate: float = 2.0,
    quiet_span: int = 160,
    window: int = 30,
    scan_restart: str = "change",
    vote_threshold: float | None = None,
    cycle_guard: bool = False,
) -> list[Alert]:
    """ETS for the large changes it flags within a build; the CUSUM and the rank scan for the
    small sustained shifts and creeps it cannot see. An alert within `gap` builds of one
    already taken (ETS first, then the CUSUM, then the rank scan, then the vote), or whose
    builds from its date to its alarm hold one, is the same change. With `vote_threshold`, a
    rank scan with that lower bar adds the alerts the CUSUM agrees with (vote.py); with
    `cycle_guard`, rank-scan alerts that continue a slow cycle are dropped (cycles.py). With
    `rank_p`, an alert is reported only when the builds since the change rank on its side of
    those before (one-sided Mann-Whitney p < rank_p). (The settings were chosen by the
    detection benchmarks; docs/detection-rounds.md says how.)"""
    taken: list[Alert] = []

    def add(found: list[Alert]) -> None:
        earlier = Taken(taken)  # a voter's own alerts are distinct changes
        taken.extend(a for a in found if not earlier.holds(a, gap))

    scans: dict[tuple[int, ...], Any] = {}  # the rank scans' statistics, shared
    if "ets" in voters:
        add(detect_ets(x, z=z, confirm=confirm))
    if "rank" in voters and "cusum" not in voters:
        add(early_large_shifts(x, threshold, drift, clip, long_run, spread))
    if "cusum" in voters:
        add(
            detect_cusum(
                x, threshold=threshold, drift=drift, clip=clip, long_run=long_run, spread=spread
            )
        )
    if "rank" in voters:
        add(
            detect_rank_scan(
                x,
                threshold=scan_threshold,
                calibrate=calibrate,
                quiet_span=quiet_span,
                after=window,
                before=window,
                restart=scan_restart,
                cache=scans,
            )
        )
    if vote_threshold is not None:
        add(voted(x, taken, gap, vote_threshold, scans=scans))
    if "rank" in voters and "cusum" not in voters:
        add(first_builds_split(x, EARLY_BUILDS))
    alerts = sorted(taken, key=lambda a: a.index)
    if cycle_guard:
        alerts = cycle_filtered(alerts)
    if rank_p is None:
        return alerts
    kept: list[Alert] = []
    for alert in alerts:
        since = kept[-1].index if kept else 0
        if rank_confirmed(x, alert, since, rank_p):
            kept.append(alert)
    return kept


def early_large_shifts(
    x: Sequence[float], threshold: float, drift: float, clip: float, long_run: bool, spread: bool
) -> list[Alert]:
    """The CUSUM's alerts raised before the rank scan can raise any (its first EARLY_BUILDS
    builds), for a shift of EARLY_SIZE noise deviations or more. There ETS watches alone with
    a scale from its first 10 builds, and let one 5% step in 1% noise in five pass at build 30
    (raised up to 24 builds late by the rank scan, or never); smaller early shifts, where
    cycles and correlated noise raise false alerts, stay the rank scan's
    (docs/detection-rounds.md, tenth round)."""
    # Online, with HINDSIGHT builds after an alarm to date it: the builds past those cannot
    # change an alert raised before EARLY_BUILDS.
    early = x[: EARLY_BUILDS + HINDSIGHT]
    alerts = detect_cusum(
        early, threshold=threshold, drift=drift, clip=clip, long_run=long_run, spread=spread
    )
    return [
        a
        for a in alerts
        if a.raised_at < EARLY_BUILDS
        and (sd := _spread_before(x, a.index)) > 0
        and abs(a.absolute_change) >= EARLY_SIZE * sd
    ]


def _spread_before(x: Sequence[float], index: int) -> float:
    """The noise before a change as wide as it is: the larger of the MAD's and the successive
    differences' robust deviation over the last NOISE_SPAN builds. Differences alone see
    correlated noise, a cycle or a settling start as narrow, and a wander of one deviation
    passed for three."""
    before = x[max(0, index - NOISE_SPAN) : index]
    return robust_level(before)[1] if len(before) >= 10 else 0.0


def _check_range(values: list[float]) -> None:
    """The values the detectors take, as the file readers check them (io.py): NaN would hide
    a change from ETS, and squares of values near the float limits overflow."""
    build = next((i for i, v in enumerate(values) if out_of_range(v)), None)
    if build is not None:
        raise ValueError(
            f"build {build}: {values[build]:g} cannot be analysed: values must be finite, of "
            f"magnitude {SMALLEST:g} to {LARGEST:g} (or 0)"
        )


def detect_ets_cusum(x: Sequence[float], **options: Any) -> list[Alert]:
    """The ensemble of ETS and the CUSUM (see detect_ensemble)."""
    return detect_ensemble(x, voters=("ets", "cusum"), **options)


def detect(x: Sequence[float], method: str = DEFAULT_METHOD, **options: Any) -> list[Alert]:
    """Alerts in one history by the named method."""
    if method not in METHODS:
        raise ValueError(f"unknown detection method {method!r} (one of {', '.join(METHODS)})")
    values = [float(v) for v in x]
    _check_range(values)
    if len(values) < 2 or min(values) == max(values):
        return []
    methods: dict[str, Callable[..., list[Alert]]] = {
        "ets+cusum": functools.partial(detect_ensemble, voters=("ets", "cusum")),
        # The rank scan's own evidence is a rank test: confirming it again only cost recall.
        "ets+rank": functools.partial(detect_ensemble, voters=("ets", "rank"), rank_p=None),
        "ets+rank+vote": functools.partial(
            detect_ensemble,
            voters=("ets", "rank"),
            rank_p=None,
            vote_threshold=VOTE_THRESHOLD,
            cycle_guard=True,
        ),
        "ets+cusum+rank": functools.partial(detect_ensemble, voters=("ets", "cusum", "rank")),
        "rank": detect_rank_scan,
        "cusum": detect_cusum,
        "ets": detect_ets,
        "talos": detect_talos,
    }
    return methods[method](values, **options)
