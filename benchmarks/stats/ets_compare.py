"""The library's default method and `ets` on the leave-one-family-out benchmark's report seeds
and on TCPD: per-family precision, recall, F1 and false alerts per 1,000 noise builds. For a
change to a detector that has no setting to choose: run it on the code before and after.

Run: python benchmarks/stats/ets_compare.py
    (another version's code: PYTHONPATH=/path/to/that/checkout python benchmarks/stats/...)
"""

from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from detection_bench import match, tcpd_f1
from families import FAMILIES, generate
from lofo_bench import NOISE_REPORT_SEED, REPORT_SEED, f1_of

import labd
from labd.stats.detection import DEFAULT_METHOD, detect

Task = tuple[str, str, bool]


def run(task: Task) -> tuple[Task, tuple[int, int, int, int, int]]:
    """(method, family, labelled?) -> tp, fp, fn, alerts on noise, noise builds."""
    method, family, labelled = task
    tp = fp = fn = alerts = builds = 0
    if labelled:
        for s in generate(family, 60, REPORT_SEED, n=300, events=True):
            found = detect(s.values, method)
            pairs = match(s.changes, [a.index for a in found])
            tp, fp, fn = (
                tp + len(pairs),
                fp + len(found) - len(pairs),
                fn + len(s.changes) - len(pairs),
            )
    else:
        for s in generate(family, 100, NOISE_REPORT_SEED, n=500, events=False):
            alerts, builds = alerts + len(detect(s.values, method)), builds + len(s.values)
    return task, (tp, fp, fn, alerts, builds)


def main() -> None:
    print(f"labd from {Path(labd.__file__).parent}")
    for method in (DEFAULT_METHOD, "ets"):
        tasks = [(method, f, labelled) for f in FAMILIES for labelled in (True, False)]
        with ProcessPoolExecutor(2) as pool:
            out = dict(pool.map(run, tasks))
        f1s, false = [], []
        for family in FAMILIES:
            precision, recall, f1 = f1_of(*out[(method, family, True)][:3])
            alerts, builds = out[(method, family, False)][3:]
            f1s.append(f1)
            false.append(1000 * alerts / builds)
            print(
                f"{method:<9} {family:<16} precision {precision:.3f} recall {recall:.3f} "
                f"F1 {f1:.3f} false/1000 {false[-1]:.2f}"
            )
        tcpd = float(np.mean(list(tcpd_f1(method).values())))
        print(
            f"{method}: mean F1 {np.mean(f1s):.3f}, weakest {min(f1s):.3f}; worst false/1000 "
            f"{max(false):.2f}; TCPD mean F1 {tcpd:.3f}"
        )


if __name__ == "__main__":
    main()
