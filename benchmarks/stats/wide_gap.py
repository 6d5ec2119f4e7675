"""Where wide Gaussian noise loses F1: the rank scan's guards against cycles, step by step.

The weakest family left out is wide Gaussian (normal noise, CoV 2-5%, half the steps only
1-2.5 noise deviations). This asks whether that is the data's limit or the detector's: beside
the default it scores the rank scan alone, then without the bar its quiet builds set, then with
60 reference builds instead of 30, and a reference no product could use: a two-sample z scan
told the noise's deviation (from the whole history's successive differences), each build
clipped at 3 deviations from the median of the 10 before it (the spikes). Each row also gives
its false alerts per 1,000 builds of wide Gaussian noise and of periodic drift's noise (daily
and weekly cycles), where the guards earn their cost.

Report seeds (never used to choose a setting): 60 labelled histories of 300 builds and 100
noise histories of 500 builds per family.

Run: python benchmarks/stats/wide_gap.py [--series 60] [--noise-series 100]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from detection_bench import match
from families import Series, generate

from labd.stats.detection import DEFAULT_METHOD, detect

REPORT_SEED, NOISE_REPORT_SEED = 2, 102
Z_THRESHOLD = 4.0

Dates = Callable[[np.ndarray], list[int]]


def z_scan(values: np.ndarray, threshold: float = Z_THRESHOLD) -> list[int]:
    """Change dates by an online two-sample z test over every split of the last 30 builds
    against up to 60 before, since the last change, the noise's deviation given."""
    x = np.log(values)
    d = np.diff(x)
    sigma = 1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2)
    y = x.copy()
    dates: list[int] = []
    start = 0
    for t in range(x.size):
        if t - start >= 5:
            centre = np.median(y[max(start, t - 10) : t])
            y[t] = np.clip(x[t], centre - 3 * sigma, centre + 3 * sigma)
        seg = y[max(start, t + 1 - 90) : t + 1]
        m = seg.size
        splits = np.arange(max(10, m - 30), m - 3 + 1)
        if splits.size == 0:
            continue
        sums = np.concatenate([[0.0], np.cumsum(seg)])
        before, after = splits, m - splits
        shift = (sums[m] - sums[splits]) / after - sums[splits] / before
        z = np.abs(shift) / (sigma * np.sqrt(1 / before + 1 / after))
        best = int(np.argmax(z))
        if z[best] > threshold:
            start = t + 1 - m + int(splits[best])
            dates.append(start)
    return dates


def by_method(method: str, **options: float) -> Dates:
    return lambda values: [a.index for a in detect(values, method, **options)]


ROWS: list[tuple[str, Dates]] = [
    (f"`{DEFAULT_METHOD}`, the default", by_method(DEFAULT_METHOD)),
    ("rank scan alone (30 a side, its quiet-build bar)", by_method("rank")),
    ("rank scan, no quiet-build bar", by_method("rank", calibrate=0.0)),
    (
        "rank scan, no quiet-build bar, 60 reference builds",
        by_method("rank", calibrate=0.0, before=60),
    ),
    (f"z scan told the noise's deviation, at {Z_THRESHOLD}", z_scan),
]


def scores(dates: Dates, labelled: list[Series]) -> tuple[float, float, float]:
    tp = fp = fn = 0
    for s in labelled:
        found = dates(s.values)
        pairs = match(s.changes, found)
        tp, fp, fn = tp + len(pairs), fp + len(found) - len(pairs), fn + len(s.changes) - len(pairs)
    precision, recall = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
    return precision, recall, 2 * precision * recall / max(precision + recall, 1e-12)


def false_per_1000(dates: Dates, noise: list[Series]) -> float:
    return 1000 * sum(len(dates(s.values)) for s in noise) / sum(s.values.size for s in noise)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", type=int, default=60)
    parser.add_argument("--noise-series", type=int, default=100)
    args = parser.parse_args()
    labelled = generate("wide-gaussian", args.series, REPORT_SEED)
    noise = {
        family: generate(family, args.noise_series, NOISE_REPORT_SEED, n=500, events=False)
        for family in ("wide-gaussian", "periodic-drift")
    }
    print("| detector | precision | recall | F1 | false / 1,000, wide | false / 1,000, periodic |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, dates in ROWS:
        precision, recall, f1 = scores(dates, labelled)
        wide, periodic = (false_per_1000(dates, noise[f]) for f in noise)
        print(
            f"| {name} | {precision:.3f} | {recall:.3f} | {f1:.3f} | {wide:.2f} | {periodic:.2f} |"
        )


if __name__ == "__main__":
    main()
