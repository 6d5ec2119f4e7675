"""Marker parsing speed, one core: lines per second through LaunchCollector.feed.

Three logs of 1,000,000 lines: every line a Raptor mark (brief format), every line a mark in
adb's threadtime format, and a realistic mix where 2% of lines are marks among other
processes' chatter. Target: at least 500,000 lines/s. Each log is parsed five times by a fresh
collector (this VM's speed wanders by a quarter from run to run): the median and the slowest.

Run: python benchmarks/markers_bench.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
from labd.markers import LaunchCollector
from tests.markers_log import brief_iteration, threadtime_iteration

N = 1_000_000
CHATTER = [
    "06-19 20:43:25.380   421   421 D wpa_supplicant: wlan0: RX ctrl_iface - hexdump(len=4): 50",
    "06-19 20:43:25.381  1021  1090 I chatty  : uid=1000(system) Binder:1021_5 expire 3 lines",
    "06-19 20:43:25.382  2210  2230 W Adreno-GSL: <gsl_ldd_control:549>: ioctl fd 32 code 0xc01",
]


def log_of(kind: str) -> list[str]:
    lines: list[str] = []
    epoch = 1_434_771_804_212
    while len(lines) < N:
        if kind == "brief":
            lines += brief_iteration(epoch, noise=False)
        elif kind == "threadtime":
            lines += threadtime_iteration(epoch)
        else:
            marks = threadtime_iteration(epoch)
            for mark in marks:
                lines.append(mark)
                lines += CHATTER * 16  # 48 chatter lines per mark: about 2% marks
        epoch += 60_000
    return lines[:N]


def main() -> None:
    print("log | lines | median lines/s | slowest lines/s | iterations")
    for kind in ("brief", "threadtime", "mixed 2% marks"):
        lines = log_of(kind.split()[0])
        rates = []
        for _ in range(5):
            collector = LaunchCollector()
            began = time.perf_counter()
            done = sum(1 for line in lines if collector.feed(line) is not None)
            rates.append(N / (time.perf_counter() - began))
        print(f"{kind} | {N:,} | {statistics.median(rates):,.0f} | {min(rates):,.0f} | {done:,}")


if __name__ == "__main__":
    main()
