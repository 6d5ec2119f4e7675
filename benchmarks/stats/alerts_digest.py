"""A digest of every alert each method raises on a fixed set of histories, to show that a
speed-up leaves the alerts as they were: run it on two versions and compare the lines.

The set: 30 labelled histories of 300 builds per family (seed 11) and 10 of pure noise of 500
builds per family (seed 111), 400 in all. Each line: method, histories, alerts, SHA-256 of the
alerts' fields (floats by their exact repr).

Run: python benchmarks/stats/alerts_digest.py [--methods ets+rank+vote,ets+rank]
    (another version's code: PYTHONPATH=/path/to/that/checkout python benchmarks/stats/...)
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from families import FAMILIES, generate

import labd
from labd.stats.detection import METHODS, detect


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--methods", default=",".join(METHODS))
    args = parser.parse_args()
    rows = [s.values for f in FAMILIES for s in generate(f, 30, seed=11, n=300)]
    rows += [s.values for f in FAMILIES for s in generate(f, 10, seed=111, n=500, events=False)]
    print(f"labd from {Path(labd.__file__).parent}")
    for method in args.methods.split(","):
        start = time.process_time()
        digest, count = hashlib.sha256(), 0
        for row in rows:
            for alert in detect(row, method):
                digest.update(repr(sorted(alert.as_dict().items())).encode())
                count += 1
            digest.update(b"|")
        cpu = time.process_time() - start
        print(
            f"{method:<15} {len(rows)} histories {count:>5} alerts "
            f"{digest.hexdigest()[:16]} ({cpu:.1f} s CPU)"
        )


if __name__ == "__main__":
    main()
