"""Android dispatch latency on the host's side, against the adb stand-in (the adb host
protocol on loopback, tests/adb_standin.py) and its stand-in phone (tests/android_phone.py,
which answers `cmd input tap` by drawing on its scene): the persistent shell labd uses, next
to one `adb shell input tap` per call (new connection, transport and shell each time), through
the same stand-in. As an independent check, the persistent path's mean is compared with the
loop's wall time per tap (the timer around each dispatch must not miss time).
A real device adds its own cost on top of both: with `input` a Java process
start per call (226 ms to 1 s measured elsewhere); with `cmd input` a binder call into
InputManager, no process start.

Run: python benchmarks/android_input_bench.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))
from labd_android import AndroidDriver, AndroidOptions, PersistentShell
from labd_android.input import AndroidInput
from labd_android.shell import run
from tests.adb_standin import AdbStandIn
from tests.android_phone import Phone


def main() -> None:
    adb = AdbStandIn()
    adb.add(Phone("emulator-5554", devtools=False))
    driver = AndroidDriver(AndroidOptions(adb_port=adb.port), "bench")
    device = driver.adb_device("emulator-5554")
    keys = AndroidInput(PersistentShell(device))
    keys.tap(0, 0)  # the first event finds `cmd input`: not timed as a dispatch
    keys.latencies_ms.clear()
    began = time.perf_counter()
    for i in range(1000):
        keys.tap(i % 360, i % 640)
    wall_ms = (time.perf_counter() - began) * 1000 / 1000
    persistent = np.array(keys.latencies_ms)
    single = []
    for i in range(300):
        began = time.perf_counter()
        run(device, ["input", "tap", str(i % 360), str(i % 640)])
        single.append((time.perf_counter() - began) * 1000)
    adb.close()
    print("path | calls | p50 ms | p99 ms")
    for name, values in (
        ("persistent shell (cmd input tap)", persistent),
        ("adb shell input tap, one per call", np.array(single)),
    ):
        print(
            f"{name} | {len(values)} | {np.percentile(values, 50):.3f} | "
            f"{np.percentile(values, 99):.3f}"
        )
    mean = persistent.mean()
    print(f"check: persistent mean {mean:.3f} ms, loop wall time per tap {wall_ms:.3f} ms")


if __name__ == "__main__":
    main()
