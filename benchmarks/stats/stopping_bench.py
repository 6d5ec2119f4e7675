"""How many iterations, measured: the adaptive stopping rule (`stop_when_stable`) on generated
jobs (how far a bimodal job's mean lands from the truth when it stops; how often two jobs
stopped as stable tell a change of the effect they were stopped for), and how often the range
`labd calibrate` gives from a small pilot holds the true size. Prints two tables.

    python benchmarks/stats/stopping_bench.py [--jobs 1000] [--pairs 500] [--pilots 30] [--seed 99]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from labd.stats.calibration import STABLE_AFTER, calibrate, enough_iterations
from labd.stats.comparison import welch

Draw = Callable[[int], np.ndarray]


def stopped(draw: Draw, effect: float, cap: int = 400) -> np.ndarray:
    """One job's measured values: its first STABLE_AFTER, then one at a time until stable."""
    values = draw(STABLE_AFTER)
    while values.size < cap and not enough_iterations(values, effect)[0]:
        values = np.append(values, draw(1))
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=500)
    parser.add_argument("--pilots", type=int, default=30)
    parser.add_argument("--seed", type=int, default=99)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)

    def bimodal(n: int) -> np.ndarray:  # 100 or 170 ms, 4 to 1: a mean of 114
        return np.where(rng.random(n) < 0.2, 170.0, 100.0) + rng.normal(0, 1, n)

    jobs = [stopped(bimodal, 0.2) for _ in range(args.jobs)]
    means = np.array([job.mean() for job in jobs]) / 114 - 1
    print("| case | jobs | median n | more than 10% off | mean bias | changes told |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print(
        f"| bimodal 100/170 ms (4:1), stable_effect 0.2 | {args.jobs} | "
        f"{np.median([job.size for job in jobs]):.0f} | {np.mean(np.abs(means) > 0.1):.1%} | "
        f"{means.mean():+.1%} | |"
    )
    for cov in (0.01, 0.02):
        told, sizes = 0, []
        for _ in range(args.pairs):
            base = stopped(lambda n, c=cov: rng.normal(100, 100 * c, n), 0.01)
            new = stopped(lambda n, c=cov: rng.normal(101, 100 * c, n), 0.01)
            sizes.append(base.size)
            interval = welch(base, new, 0.05)
            told += interval.p_value < 0.05 and interval.ratio_low > 1
        print(
            f"| normal CoV {cov:.0%}, +1% between two jobs, stable_effect 0.01 | "
            f"{args.pairs} pairs | {np.median(sizes):.0f} | | | {told / args.pairs:.1%} |"
        )
    # Normal noise at CoV 2%, a 1% effect at 95% confidence and 95% power: 105 per side
    # (statsmodels' TTestIndPower, as an outside tester measured it).
    truth = 105
    print("\n| pilot of | pilots | calibrate's range holds the true 105 | single figures seen |")
    print("| ---: | ---: | ---: | --- |")
    for size in (5, 10, 30):
        found = [
            calibrate("a", rng.normal(100, 2, size), draws=100, seed=i) for i in range(args.pilots)
        ]
        held = np.mean(
            [c.n_low is not None and c.n_low <= truth <= (c.n_high or 10**9) for c in found]
        )
        figures = sorted(c.n or 10**9 for c in found)
        most = ">200" if figures[-1] > 200 else str(figures[-1])
        print(f"| {size} | {args.pilots} | {held:.0%} | {figures[0]} to {most} |")


if __name__ == "__main__":
    main()
