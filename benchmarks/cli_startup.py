"""How fast the `labd` command starts (target: under 300 ms for --help and version).

Run: python benchmarks/cli_startup.py [--runs 20]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

COMMANDS = {"labd --help": ["--help"], "labd version": ["version"]}


def time_command(args: list[str], runs: int) -> list[float]:
    exe = shutil.which("labd")
    argv = [exe, *args] if exe else [sys.executable, "-m", "labd", *args]
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    runs = parser.parse_args().runs
    print(f"{'command':<14} {'median ms':>10} {'p90 ms':>8} {'max ms':>8}  target")
    for name, args in COMMANDS.items():
        s = sorted(time_command(args, runs))
        p90 = s[int(0.9 * (len(s) - 1))]
        verdict = "ok" if statistics.median(s) < 300 else "SLOW"
        print(f"{name:<14} {statistics.median(s):>10.0f} {p90:>8.0f} {s[-1]:>8.0f}  <300 {verdict}")


if __name__ == "__main__":
    main()
