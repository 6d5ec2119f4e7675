"""A/B verdict quality on generated samples with a known truth.

A/A: how often `labd compare` (default settings) calls a regression when nothing changed,
per noise shape. Power: how often it calls a 1% slowdown a regression, next to plain Welch
and plain Mann-Whitney (p < 0.05 in the right direction) on the very same draws.

Several modes (--modes): how often the diagnostics find more than one mode, per shape and
sample size, and the A/A rate of false 'regression' verdicts on the same shapes at n = 20 and
50 (nominal: 2.5%, one side of a 5% test).

Run: python benchmarks/stats/compare_bench.py [--draws 400] [--modes]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).parent))
from generate import noise

from labd.stats.comparison import compare
from labd.stats.modality import mode_count

SHAPES = ("normal", "lognormal", "bimodal", "heavy", "warm-up", "trimodal")
MODE_SHAPES = ("normal", "lognormal", "heavy", "two-modes", "trimodal", "four-modes")
COV = 0.01


def sample(rng: np.random.Generator, shape: str, n: int, shift: float) -> np.ndarray:
    if shape == "two-modes":  # a second mode 3% above, holding 30% of the values
        high = rng.random(n) < 0.3
        return 100 * (1 + 0.03 * high + rng.normal(0, 0.3 * COV, n)) * (1 + shift)
    if shape == "four-modes":  # 1.5%, 2.5% and 2% apart, weights 0.4 / 0.3 / 0.2 / 0.1
        mode = rng.choice(4, n, p=[0.4, 0.3, 0.2, 0.1])
        offsets = np.array([0.0, 0.015, 0.04, 0.06])
        return 100 * (1 + offsets[mode] + rng.normal(0, 0.3 * COV, n)) * (1 + shift)
    if shape == "trimodal":  # three modes 1.5% apart, weights fixed at 0.5 / 0.3 / 0.2
        mode = rng.choice(3, n, p=[0.5, 0.3, 0.2])
        return 100 * (1 + 0.015 * mode + rng.normal(0, 0.3 * COV, n)) * (1 + shift)
    base_shape = "normal" if shape == "warm-up" else shape
    values = 100 * (1 + noise(rng, base_shape, n, COV)) * (1 + shift)
    if shape == "warm-up":  # the first runs are slow, as when warm-up was not marked
        values[:3] *= 1.0 + rng.uniform(0.05, 0.2, 3)
    return values


def rates(shape: str, n: int, shift: float, draws: int, seed: int) -> tuple[float, float, float]:
    rng = np.random.default_rng(seed)
    ours = welch = mwu = 0
    for _ in range(draws):
        base, new = sample(rng, shape, n, 0.0), sample(rng, shape, n, shift)
        (result,) = compare({"m": (base, new, False)})
        ours += result.verdict == "regression"
        t = stats.ttest_ind(new, base, equal_var=False)
        welch += t.pvalue < 0.05 and t.statistic > 0
        u = stats.mannwhitneyu(new, base, alternative="two-sided")
        mwu += u.pvalue < 0.05 and np.median(new) > np.median(base)
    return ours / draws, welch / draws, mwu / draws


def modes_table(draws: int) -> None:
    """Multimodality found, and A/A calibration, on shapes with one and with several modes."""
    print("Several modes: share of samples with more than one mode found; A/A false")
    print(f"'regression' verdicts (nominal 2.5%); {draws} draws each")
    print(f"{'shape':<11} {'n=20':>6} {'n=50':>6} {'n=200':>6} {'A/A n=20':>9} {'A/A n=50':>9}")
    for i, shape in enumerate(MODE_SHAPES):
        found = []
        for n in (20, 50, 200):
            rng = np.random.default_rng(1000 + 10 * i + n)
            found.append(
                np.mean([mode_count(sample(rng, shape, n, 0.0)) > 1 for _ in range(draws)])
            )
        aa = [rates(shape, n, 0.0, draws, seed=2000 + 10 * i + n)[0] for n in (20, 50)]
        cells = " ".join(f"{100 * v:>5.1f}%" for v in found)
        print(f"{shape:<11} {cells} {100 * aa[0]:>8.1f}% {100 * aa[1]:>8.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--modes", action="store_true", help="only the table of several modes")
    args = parser.parse_args()
    if args.modes:
        modes_table(args.draws)
        return
    print(f"A/A, n = 20 per side, {args.draws} draws: share of false 'regression' verdicts")
    print(f"{'shape':<10} {'labd':>6} {'Welch':>6} {'MWU':>6}")
    for i, shape in enumerate(SHAPES):
        ours, welch, mwu = rates(shape, 20, 0.0, args.draws, seed=i)
        print(f"{shape:<10} {100 * ours:>5.1f}% {100 * welch:>5.1f}% {100 * mwu:>5.1f}%")
    print(f"\nPower: 1% slowdown, CoV {100 * COV:g}%, share of 'regression' verdicts")
    print(f"{'shape':<10} {'n':>4} {'labd':>6} {'Welch':>6} {'MWU':>6}")
    for i, shape in enumerate(SHAPES):
        for n in (10, 20, 30, 50):
            ours, welch, mwu = rates(shape, n, 0.01, args.draws, seed=100 + 10 * i + n)
            print(f"{shape:<10} {n:>4} {100 * ours:>5.1f}% {100 * welch:>5.1f}% {100 * mwu:>5.1f}%")


if __name__ == "__main__":
    main()
