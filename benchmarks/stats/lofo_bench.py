"""Detection that generalises: leave-one-family-out scores over ten families of histories.

For each family left out, the detector's settings are chosen on the other nine (the best mean
F1 among the settings whose false alerts stay at or under 1 per 1,000 noise builds in each of
them), on tuning seeds; the family left out is then scored with those settings on other seeds
(report seeds), never used to choose anything. Also: false alerts per 1,000 builds of each
family's pure noise, the median raise delay, TCPD with the settings chosen on all ten families,
and the time for 10,000 histories of 500 builds on 2 processes.

Run: python benchmarks/stats/lofo_bench.py [--series 60] [--noise-series 100] [--speed-series 10000]
    (--quick: each setting on the tuning seeds alone, for exploring)
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from detection_bench import match, published_comparison, tcpd_f1
from families import FAMILIES, generate

from labd.stats.detection import DEFAULT_METHOD, detect

TUNE_SEED, REPORT_SEED = 1, 2
NOISE_TUNE_SEED, NOISE_REPORT_SEED = 101, 102
FALSE_LIMIT = 1.0  # per 1,000 builds of noise

# The settings the selection may choose among: the first round's default (ETS and the CUSUM,
# with the rank confirmer, the long-run noise scale, the interquartile floor, ETS confirming by
# 3 builds and a CUSUM clip of 3; docs/detection-rounds.md), the second round's (ETS and a
# rank scan starting afresh after its alarm), and ETS with the rank scan starting afresh at the
# change's date (third round): as it stands, with a threshold of 3.25 or 3.75, a calibration of
# 1.75 or 2.25, its calibration against the quiet builds of the last 80, the rank confirmer, or
# windows of 40 builds.
FIRST_ROUND: dict[str, Any] = {
    "method": "ets+cusum",
    "rank_p": 0.01,
    "long_run": True,
    "spread": True,
    "confirm": 3,
    "clip": 3.0,
}
SCAN: dict[str, Any] = {
    "method": "ets+rank",
    "scan_threshold": 3.5,
    "calibrate": 2.0,
    "quiet_span": 160,
    "window": 30,
    "rank_p": None,
    "scan_restart": "change",
    "vote_threshold": None,
    "cycle_guard": False,
}
SETTINGS: list[dict[str, Any]] = [
    FIRST_ROUND,
    {**SCAN, "scan_restart": "alarm"},
    SCAN,
    {**SCAN, "scan_threshold": 3.25},
    {**SCAN, "scan_threshold": 3.75},
    {**SCAN, "calibrate": 1.75},
    {**SCAN, "calibrate": 2.25},
    {**SCAN, "quiet_span": 80},
    {**SCAN, "rank_p": 0.01},
    {**SCAN, "window": 40},
    # Fourth round: the cycle guard, and a more sensitive rank scan whose alerts stand only
    # when the CUSUM agrees (a vote; labd/stats/vote.py, labd/stats/cycles.py).
    {**SCAN, "scan_threshold": 3.75, "cycle_guard": True},
    {**SCAN, "vote_threshold": 3.0},
    {**SCAN, "vote_threshold": 3.0, "cycle_guard": True},
    {**SCAN, "vote_threshold": 2.75, "cycle_guard": True},
    {**SCAN, "scan_threshold": 3.75, "vote_threshold": 3.0, "cycle_guard": True},
    {**SCAN, "calibrate": 2.1, "vote_threshold": 3.0, "cycle_guard": True},
    {**SCAN, "calibrate": 1.75, "vote_threshold": 3.0, "cycle_guard": True},
]


def _detect(values: np.ndarray, setting: dict[str, Any]) -> list[Any]:
    options = {k: v for k, v in setting.items() if k != "method"}
    return detect(values, setting["method"], **options)


def _run(task: tuple[int, str, int, int, int, bool]) -> tuple[int, str, int, list[int]]:
    """(setting, family, seed, ...) -> counts: tp, fp, fn, alerts, builds, and the delays."""
    setting, family, seed, count, length, events = task
    return setting, family, seed, counts(SETTINGS[setting], family, seed, count, length, events)


def counts(
    setting: dict[str, Any], family: str, seed: int, count: int, length: int, events: bool
) -> list[int]:
    """One setting on one family's histories: tp, fp, fn, alerts, builds, and the delays."""
    tp = fp = fn = alerts = builds = 0
    delays: list[int] = []
    for s in generate(family, count, seed, n=length, events=events):
        found = _detect(s.values, setting)
        pairs = match(s.changes, [a.index for a in found])
        tp, fp, fn = tp + len(pairs), fp + len(found) - len(pairs), fn + len(s.changes) - len(pairs)
        alerts, builds = alerts + len(found), builds + len(s.values)
        delays += [found[j].raised_at - tau for tau, j in pairs]
    return [tp, fp, fn, alerts, builds, *delays]


def f1_of(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def evaluate(
    pool: ProcessPoolExecutor, args: argparse.Namespace
) -> dict[tuple[int, str, int], list[int]]:
    tasks = [
        (g, f, seed, args.series, 300, True)
        for g, f, seed in itertools.product(
            range(len(SETTINGS)), FAMILIES, (TUNE_SEED, REPORT_SEED)
        )
    ] + [
        (g, f, seed, args.noise_series, 500, False)
        for g, f, seed in itertools.product(
            range(len(SETTINGS)), FAMILIES, (NOISE_TUNE_SEED, NOISE_REPORT_SEED)
        )
    ]
    return {(g, f, s): out for g, f, s, out in pool.map(_run, tasks, chunksize=1)}


def quick(pool: ProcessPoolExecutor) -> None:
    """The quick loop for exploring: each setting on the tuning seeds only (40 labelled and 60
    noise histories per family), its mean and minimum F1 and its worst false-alert rate. The
    report seeds stay unseen."""
    tasks = [(g, f, TUNE_SEED, 40, 300, True) for g in range(len(SETTINGS)) for f in FAMILIES]
    tasks += [
        (g, f, NOISE_TUNE_SEED, 60, 500, False) for g in range(len(SETTINGS)) for f in FAMILIES
    ]
    results = {(g, f, s): out for g, f, s, out in pool.map(_run, tasks, chunksize=1)}
    for g, setting in enumerate(SETTINGS):
        f1s = [f1_of(*results[(g, f, TUNE_SEED)][:3])[2] for f in FAMILIES]
        rates = [
            1000 * results[(g, f, NOISE_TUNE_SEED)][3] / results[(g, f, NOISE_TUNE_SEED)][4]
            for f in FAMILIES
        ]
        worst = list(FAMILIES)[int(np.argmax(rates))]
        print(
            f"setting {g}: mean F1 {np.mean(f1s):.3f}, minimum {min(f1s):.3f}, worst false "
            f"{max(rates):.2f} per 1,000 ({worst}) {setting}"
        )


def choose(results: dict[tuple[int, str, int], list[int]], families: list[str]) -> int:
    """The setting with the best mean F1 over `families` on the tuning seeds, among those
    within the false-alert limit in each of them (the fewest false alerts if none is)."""

    def false_rate(g: int, f: str) -> float:
        out = results[(g, f, NOISE_TUNE_SEED)]
        return 1000 * out[3] / out[4]

    def mean_f1(g: int) -> float:
        return float(np.mean([f1_of(*results[(g, f, TUNE_SEED)][:3])[2] for f in families]))

    allowed = [
        g for g in range(len(SETTINGS)) if all(false_rate(g, f) <= FALSE_LIMIT for f in families)
    ]
    if not allowed:
        return min(range(len(SETTINGS)), key=lambda g: max(false_rate(g, f) for f in families))
    return max(allowed, key=mean_f1)


def _speed_chunk(task: tuple[np.ndarray, str]) -> int:
    chunk, method = task
    return sum(len(detect(row, method)) for row in chunk)  # as users run it


FINAL = 0


def speed(count: int, length: int, method: str = DEFAULT_METHOD) -> tuple[float, float]:
    """Wall-clock seconds for `count` histories on 2 processes, and the CPU seconds they
    used (children's user + system time: what the work costs on a machine others share)."""
    per = -(-count // len(FAMILIES))
    rows = [s.values for f in FAMILIES for s in generate(f, per, seed=7, n=length)][:count]
    data = np.array(rows)
    before = os.times()
    start = time.perf_counter()
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_speed_chunk, [(chunk, method) for chunk in np.array_split(data, 16)]))
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return wall, cpu


def main() -> None:
    global FINAL
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--series", type=int, default=60, help="labelled histories per family and seed"
    )
    parser.add_argument(
        "--noise-series", type=int, default=100, help="noise histories of 500 builds"
    )
    parser.add_argument("--speed-series", type=int, default=10_000)
    parser.add_argument("--no-tcpd", action="store_true")
    parser.add_argument("--speed-only", action="store_true", help="time the default alone")
    parser.add_argument("--speed-method", default=DEFAULT_METHOD, help="the method timed")
    parser.add_argument("--quick", action="store_true", help="the tuning seeds' quick loop")
    args = parser.parse_args()
    if args.quick:
        with ProcessPoolExecutor(2) as pool:
            quick(pool)
        return
    if args.speed_only:
        report_speed(args.speed_series, args.speed_method)
        return
    families = list(FAMILIES)
    with ProcessPoolExecutor(2) as pool:
        results = evaluate(pool, args)
    print(
        f"{len(families)} families; {args.series} labelled histories of 300 builds per family "
        f"and seed; {args.noise_series} x 500 noise builds per family and seed; "
        f"{len(SETTINGS)} settings"
    )
    print(
        f"{'family (left out)':<18} {'setting':>7} {'precision':>9} {'recall':>7} {'F1':>6} "
        f"{'all-fit F1':>10} {'delay p50':>9} {'false/1000':>10} {'all-fit false':>13}"
    )
    FINAL = choose(results, families)
    lofo, delays_all, false_all = [], [], []
    for left_out in families:
        g = choose(results, [f for f in families if f != left_out])
        out = results[(g, left_out, REPORT_SEED)]
        precision, recall, f1 = f1_of(*out[:3])
        fitted = f1_of(*results[(FINAL, left_out, REPORT_SEED)][:3])[2]
        fitted_noise = results[(FINAL, left_out, NOISE_REPORT_SEED)]
        fitted_false = 1000 * fitted_noise[3] / fitted_noise[4]
        noise = results[(g, left_out, NOISE_REPORT_SEED)]
        false = 1000 * noise[3] / noise[4]
        delays = out[5:]
        lofo.append(f1)
        delays_all += delays
        false_all.append(false)
        print(
            f"{left_out:<18} {g:>7} {precision:>9.3f} {recall:>7.3f} {f1:>6.3f} {fitted:>10.3f} "
            f"{np.median(delays):>9.1f} {false:>10.2f} {fitted_false:>13.2f}"
        )
    print(
        f"LOFO F1 mean {np.mean(lofo):.3f}, minimum {min(lofo):.3f} "
        f"({families[int(np.argmin(lofo))]}); false alerts per 1,000 noise builds: worst "
        f"family {max(false_all):.2f}; median raise delay {np.median(delays_all):.1f} builds; "
        f"chosen on all families: setting {FINAL} {SETTINGS[FINAL]}"
    )
    if not args.no_tcpd:
        final = SETTINGS[FINAL]
        tcpd = tcpd_f1(final["method"], {k: v for k, v in final.items() if k != "method"})
        print(
            f"TCPD mean F1 {np.mean(list(tcpd.values())):.3f} "
            "(settings chosen on the families, never on TCPD)"
        )
        print(published_comparison(tcpd))
    if args.speed_series:
        report_speed(args.speed_series, args.speed_method)


def report_speed(count: int, method: str = DEFAULT_METHOD) -> None:
    load = os.getloadavg()[0]
    seconds, cpu = speed(count, 500, method)
    print(
        f"speed: {count:,} histories x 500 builds (all families), {method}: "
        f"{seconds:.1f} s wall clock on 2 processes, {cpu:.1f} s of CPU in them "
        f"(load average {load:.2f} before, {os.getloadavg()[0]:.2f} after)"
    )


if __name__ == "__main__":
    main()
