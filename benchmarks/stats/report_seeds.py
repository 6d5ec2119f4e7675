"""Methods on the leave-one-family-out benchmark's report seeds and on TCPD: per-family
precision, recall, F1 and false alerts per 1,000 noise builds. For a change to a detector that
has no setting to choose: run it on the code before and after.

Run: python benchmarks/stats/report_seeds.py [METHOD ...]   (default: the default method, ets)
    (another version's code: PYTHONPATH=/path/to/that/checkout python benchmarks/stats/...)
"""

from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from detection_bench import tcpd_f1
from families import FAMILIES
from lofo_bench import NOISE_REPORT_SEED, REPORT_SEED, counts, f1_of

import labd
from labd.stats.detection import DEFAULT_METHOD

Task = tuple[str, str, bool]


def run(task: Task) -> tuple[Task, list[int]]:
    """(method, family, labelled?) -> its counts on the report seeds (lofo_bench.counts)."""
    method, family, labelled = task
    if labelled:
        return task, counts({"method": method}, family, REPORT_SEED, 60, 300, True)
    return task, counts({"method": method}, family, NOISE_REPORT_SEED, 100, 500, False)


def main() -> None:
    print(f"labd from {Path(labd.__file__).parent}")
    for method in sys.argv[1:] or (DEFAULT_METHOD, "ets"):
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
                f"{method:<13} {family:<16} precision {precision:.3f} recall {recall:.3f} "
                f"F1 {f1:.3f} false/1000 {false[-1]:.2f}"
            )
        tcpd = float(np.mean(list(tcpd_f1(method).values())))
        print(
            f"{method}: mean F1 {np.mean(f1s):.3f}, weakest {min(f1s):.3f}; worst false/1000 "
            f"{max(false):.2f}; TCPD mean F1 {tcpd:.3f}"
        )


if __name__ == "__main__":
    main()
