"""A large step early in a history: is it raised at once?

A 5% step in normal noise of 1% at build 30, 60 or 100 of a history (200 histories a row, each
row its own seed, so that two versions of the detector see the same histories). "At once":
an alert dated within 5 builds of the step and raised within 6 builds of it.

Run: python benchmarks/stats/early_step.py [--method M] [--histories 200]
"""

from __future__ import annotations

import argparse

import numpy as np

from labd.stats.detection import DEFAULT_METHOD, detect

ROWS = ((30, 45), (30, 80), (60, 120), (100, 200))  # (step at, builds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--method", default=DEFAULT_METHOD)
    parser.add_argument("--histories", type=int, default=200)
    args = parser.parse_args()
    print(f"{args.method}: a 5% step in 1% noise, {args.histories} histories a row")
    print(f"{'step at':>7} {'builds':>6} {'at once':>7} {'later':>5} {'missed':>6} {'latest':>6}")
    for row, (at, n) in enumerate(ROWS):
        rng = np.random.default_rng(row)
        at_once = later = missed = 0
        latest = 0
        for _ in range(args.histories):
            x = rng.normal(100, 1, n)
            x[at:] *= 1.05
            near = [a for a in detect(x, args.method) if a.index >= at - 5]
            if not near:
                missed += 1
                continue
            first = min(near, key=lambda a: a.raised_at)
            latest = max(latest, first.raised_at - at)
            if abs(first.index - at) <= 5 and first.raised_at - at <= 6:
                at_once += 1
            else:
                later += 1
        print(f"{at:>7} {n:>6} {at_once:>7} {later:>5} {missed:>6} {latest:>6}")


if __name__ == "__main__":
    main()
