"""How well can a creep be dated at all? A ceiling for the detectors' dating of slow changes.

A creep (a drift over 20-40 builds, labelled where it starts) of a few noise deviations is
dated by the detection benchmarks within 5 builds or counted as a miss and a false alert. This
asks how often even an oracle manages that: one that knows the history holds exactly one creep
and sees all of it (40 quiet builds before, the ramp, 0-20 quiet builds after), and fits
flat-ramp-flat by least squares over every start and length. Beside it, labd's own dating
(`onset`: a bend against a step) on the same builds.

Run: python benchmarks/stats/creep_dating.py [--histories 200]
"""

from __future__ import annotations

import argparse

import numpy as np

from labd.stats.segments import onset

BEFORE = 40  # quiet builds before the creep
MARGIN = 5  # the benchmarks' matching margin


def trapezoid_start(y: np.ndarray) -> int:
    """The start of the least-squares flat-ramp-flat fit (level, then a ramp of any length,
    then the new level)."""
    m = y.size
    i = np.arange(m)
    best, start = np.inf, 0
    for s in range(3, m - 3):
        for length in range(1, m - s):
            ramp = np.clip((i - s + 1) / length, 0.0, 1.0)
            r = ramp - ramp.mean()
            c = y - y.mean()
            sse = c @ c - (r @ c) ** 2 / (r @ r)
            if sse < best:
                best, start = sse, s
    return start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--histories", type=int, default=200, help="creeps per row")
    args = parser.parse_args()
    rng = np.random.default_rng(2026)
    print(f"{'size (sd)':>9} {'flat after':>10} {'oracle within 5':>15} {'onset within 5':>14}")
    for size in (1.5, 2.0, 2.5, 4.0):
        for after in (0, 10, 20):
            oracle = ours = 0
            for _ in range(args.histories):
                length = int(rng.integers(20, 40))
                level = np.concatenate(
                    [np.zeros(BEFORE), np.linspace(0, size, length), np.full(after, size)]
                )
                y = level + rng.normal(0, 1, level.size)
                oracle += abs(trapezoid_start(y) - BEFORE) <= MARGIN
                # labd's dating from the step's best split (the middle of the ramp, as a
                # step scan would give it)
                ours += abs(onset(y, 0, y.size, BEFORE + length // 2) - BEFORE) <= MARGIN
            n = args.histories
            print(f"{size:>9.1f} {after:>10} {oracle / n:>15.0%} {ours / n:>14.0%}")


if __name__ == "__main__":
    main()
