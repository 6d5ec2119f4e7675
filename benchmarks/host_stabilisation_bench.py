"""Host stabilisation and the spread of the `command` scenario, in the manner of Larres et
al.'s Table 3: CoV per setup and Levene's test of each setup's variance against none.

    python benchmarks/host_stabilisation_bench.py [--runs 40] [--program python3 -c pass]

Each setup runs the program through the real CommandScenario (launcher included), one setup
after the other (host tuning is applied per job), 2 warm-ups each. What host tuning applied
(performance governor, turbo/boost off) or why not is printed above the tables.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path
from typing import Any

from scipy import stats

from labd.sdk import Device, RunContext
from labd_host.command import CommandParams, CommandScenario

SETUPS: dict[str, dict[str, Any]] = {
    "none": {"host_tuning": False},
    "host tuning": {"host_tuning": True},
    "cpu + no ASLR + tmpfs": {"host_tuning": False, "cpu": 0, "disable_aslr": True, "tmpfs": True},
    "all": {"host_tuning": True, "cpu": 0, "disable_aslr": True, "tmpfs": True},
}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--program", nargs="+", default=["python3", "-c", "pass"])
    args = parser.parse_args()
    device = Device(id="host", driver="host", platform="host")
    scenarios = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, params in SETUPS.items():
            ctx = RunContext("bench", 1, device, Path(tmp) / name.replace(" ", "-"))
            scenarios[name] = CommandScenario(CommandParams(command=args.program, **params), ctx)
        values: dict[str, dict[str, list[float]]] = {n: {} for n in SETUPS}
        for name, scenario in scenarios.items():
            await scenario.setup()  # tuning applies per job: measured one setup at a time
            for index in range(args.runs + 2):  # 2 warm-ups
                measured = await scenario.run_iteration(index)
                if index >= 2:
                    for metric, value in measured.items():
                        values[name].setdefault(metric, []).append(value)
            record = scenario.ctx.fingerprint["stabilisation"]
            await scenario.teardown()
            print(f"{name}: governor {record['cpu_governor']}; turbo {record['turbo']}")
    for metric in ("cpu_time_ms", "wall_time_ms"):
        print(f"\n{metric} of {' '.join(args.program)}, {args.runs} runs per setup\n")
        print("| setup | mean | stddev | CoV | Levene W, p vs none |")
        print("| --- | ---: | ---: | ---: | ---: |")
        base = values["none"][metric]
        for name in SETUPS:
            sample = values[name][metric]
            mean, sd = statistics.mean(sample), statistics.stdev(sample)
            test = "-" if name == "none" else "{:.2f}, {:.3f}".format(*stats.levene(base, sample))
            print(f"| {name} | {mean:.2f} ms | {sd:.2f} ms | {100 * sd / mean:.1f}% | {test} |")


if __name__ == "__main__":
    asyncio.run(main())
