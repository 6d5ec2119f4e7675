"""A step early in a history: is it raised at once, and is it dated at all?

A step of 3% or 5% in normal noise of 1% at build 10 to 100 of a history (200 histories a row,
each row its own seed, so that two versions of the detector see the same histories). "At
once": an alert dated within 5 builds of the step and raised within 6 builds of it; "dated
later": an alert dated within 5 builds of it, raised later; "never dated": no alert dated
within 5 builds of it; "latest": the most builds any alert dated near the step took to come.

With --noise: the price, false alerts per 1,000 builds (all builds / the first 54, where the
rank scan cannot raise any yet) in 500 histories of 120 builds of noise shapes outside the
families' ranges: correlated noise, a cycle of 40 builds, a settling start, a spread that
triples.

Run: python benchmarks/stats/early_step.py [--method M] [--histories 200] [--noise]
"""

from __future__ import annotations

import argparse

import numpy as np

from labd.stats.detection import DEFAULT_METHOD, detect

ROWS = (  # (step at, builds, size)
    (30, 45, 0.05),
    (30, 80, 0.05),
    (10, 80, 0.05),
    (15, 80, 0.05),
    (20, 80, 0.05),
    (15, 80, 0.03),
    (20, 80, 0.03),
    (60, 120, 0.05),
    (100, 200, 0.05),
)


EARLY = 54  # the builds before the rank scan can raise an alert


def noise_shapes(rng: np.random.Generator, n: int = 120) -> dict[str, np.ndarray]:
    """One history of each shape, in deviations of 1 around 100."""
    t = np.arange(n)

    def ar(phi: float) -> np.ndarray:
        e = rng.normal(0, 1, n)
        v = np.empty(n)
        v[0] = e[0] / np.sqrt(1 - phi**2)
        for i in range(1, n):
            v[i] = phi * v[i - 1] + e[i]
        return 100 + v

    phase = rng.uniform(0, 2 * np.pi)
    settle = np.where(t < 20, 1.05 - 0.05 * t / 20, 1.0)
    rise = np.where(t < 30, 1 + 0.03 * t / 30, 1.03)
    return {
        "normal": rng.normal(100, 1, n),
        "Student t, 2 df": 100 + rng.standard_t(2, n),
        "AR(1) 0.5": ar(0.5),
        "AR(1) 0.8": ar(0.8),
        "AR(1) 0.95": ar(0.95),
        "sine of 40, 1 deviation": 100 + np.sin(2 * np.pi * t / 40 + phase) + rng.normal(0, 1, n),
        "sine of 40, 2 deviations": 100
        + 2 * np.sin(2 * np.pi * t / 40 + phase)
        + rng.normal(0, 1, n),
        "falls 5% over 20 builds": 100 * settle + rng.normal(0, 1, n),
        "rises 3% over 30 builds": 100 * rise + rng.normal(0, 1, n),
        "spread triples at 40": 100 + rng.normal(0, 1, n) * np.where(t < 40, 1, 3),
    }


def noise(method: str, histories: int = 500) -> None:
    rng = np.random.default_rng(2026)
    counts: dict[str, list[int]] = {}
    for _ in range(histories):
        for name, x in noise_shapes(rng).items():
            found = detect(x, method)
            seen = counts.setdefault(name, [0, 0, 0])
            seen[0] += len(found)
            seen[1] += sum(a.raised_at < EARLY for a in found)
            seen[2] += x.size
    print(f"{method}: false alerts per 1,000 builds, {histories} histories of 120 a shape")
    print(f"{'noise':<26} {'all':>5} {'first 54':>8}")
    for name, (alerts, early, builds) in counts.items():
        print(
            f"{name:<26} {1000 * alerts / builds:>5.2f} {1000 * early / (histories * EARLY):>8.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--method", default=DEFAULT_METHOD)
    parser.add_argument("--histories", type=int, default=200)
    parser.add_argument("--noise", action="store_true", help="the false alerts it costs")
    args = parser.parse_args()
    if args.noise:
        noise(args.method)
        return
    print(f"{args.method}: steps in 1% noise, {args.histories} histories a row")
    print(
        f"{'step':>4} {'at':>4} {'builds':>6} {'at once':>7} {'dated later':>11} "
        f"{'never dated':>11} {'latest':>6}"
    )
    for at, n, size in ROWS:
        rng = np.random.default_rng([at, n, round(size * 100)])
        at_once = later = never = latest = 0
        for _ in range(args.histories):
            x = rng.normal(100, 1, n)
            x[at:] *= 1 + size
            near = [a for a in detect(x, args.method) if abs(a.index - at) <= 5]
            if not near:
                never += 1
                continue
            first = min(a.raised_at for a in near) - at
            latest = max(latest, first)
            at_once += first <= 6
            later += first > 6
        print(f"{size:>4.0%} {at:>4} {n:>6} {at_once:>7} {later:>11} {never:>11} {latest:>6}")


if __name__ == "__main__":
    main()
