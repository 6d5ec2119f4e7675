"""Interleaved A/B against sequential A-then-B under drift: A/A false-regression rates.

    python benchmarks/ab_drift_bench.py [--trials 200] [--n 20]

Both variants are the same program (A/A), measured with 1% noise while the device drifts
linearly over the job (thermal build-up, a background job starting): 0 to 5% from the first
iteration to the last. Each trial orders the 2n iterations as labd would (all base then all
new, or labd.runner.variants' alternating and random blocks), draws the values, and asks
labd's comparison (labd.stats.comparison, effect 1%) for a verdict; a "regression" is a false
alarm. The interleaved orders should stay at the rate with no drift (their nominal rate).
"""

from __future__ import annotations

import argparse

import numpy as np

from labd.model import TestSpec
from labd.runner.variants import schedule
from labd.stats.comparison import compare

DRIFTS = (0.0, 0.01, 0.02, 0.05)


def orders(n: int) -> dict[str, list[str]]:
    def spec(**ab: object) -> TestSpec:
        return TestSpec.model_validate({"suite": "s", "test": "t", "scenario": "x",
                                        "iterations": n, "warmup": 0,
                                        "ab": {"base": {}, "new": {}, **ab}})  # fmt: skip

    return {
        "sequential (A then B)": ["base"] * n + ["new"] * n,
        "alternating (ABAB)": [s.variant for s in schedule(spec())],
        "alternating, blocks of 5": [s.variant for s in schedule(spec(block=5))],
        "random pairs": [s.variant for s in schedule(spec(order="random", seed=7))],
    }


def false_regressions(order: list[str], drift: float, trials: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    position = np.linspace(0, 1, len(order))
    is_new = np.array([v == "new" for v in order])
    alarms = 0
    for _ in range(trials):
        values = 100 * (1 + drift * position) * (1 + 0.01 * rng.standard_normal(len(order)))
        (result,) = compare({"time_ms": (values[~is_new], values[is_new], False)})
        alarms += result.verdict == "regression"
    return alarms / trials


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--n", type=int, default=20, help="iterations per variant")
    args = parser.parse_args()
    print(f"A/A false regressions, n={args.n} per variant, {args.trials} trials, noise CoV 1%\n")
    print("| order | " + " | ".join(f"drift {100 * d:g}%" for d in DRIFTS) + " |")
    print("| --- |" + " ---: |" * len(DRIFTS))
    for name, order in orders(args.n).items():
        rates = [false_regressions(order, d, args.trials, seed=11) for d in DRIFTS]
        print(f"| {name} | " + " | ".join(f"{100 * r:.1f}%" for r in rates) + " |")


if __name__ == "__main__":
    main()
