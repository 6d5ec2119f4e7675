"""X11 dispatch latency: from the XTEST call to the event's arrival in an X client, on Xvfb.

The recording client (tests/xrecorder.py) stamps each event with CLOCK_MONOTONIC, which every
process of the machine shares. 1,000 pointer moves and 1,000 key presses, one at a time.
Target: p99 at most 2 ms.

Run: python benchmarks/x11_input_bench.py   (needs Xvfb)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))

from labd_x11 import X11Input


def main() -> None:
    read_end, write_end = os.pipe()
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_end), "-screen", "0", "640x480x24", "-nolisten", "tcp"],
        pass_fds=(write_end,),
        stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    display = ":" + os.fdopen(read_end).readline().strip()
    recorder = subprocess.Popen(
        [sys.executable, "-m", "tests.xrecorder", display], stdout=subprocess.PIPE, text=True
    )
    assert recorder.stdout is not None
    recorder.stdout.readline()
    x11 = X11Input(display)
    results = {}
    try:
        for kind in ("pointer move", "key press"):
            latencies = []
            for i in range(1000):
                began = time.monotonic()
                if kind == "pointer move":
                    x11.move(10 + i % 600, 10 + i % 400)
                else:
                    x11.key("a")
                event = json.loads(recorder.stdout.readline())
                latencies.append((event["t"] - began) * 1000)
            results[kind] = np.percentile(latencies, [50, 90, 99, 100])
    finally:
        x11.close()
        recorder.kill()
        xvfb.kill()
    print("event | p50 ms | p90 ms | p99 ms | max ms")
    for kind, (p50, p90, p99, worst) in results.items():
        print(f"{kind} | {p50:.3f} | {p90:.3f} | {p99:.3f} | {worst:.3f}")


if __name__ == "__main__":
    main()
