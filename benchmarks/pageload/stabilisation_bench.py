"""Measurement quality of the page-load lab, in the manner of Larres et al.'s Table 3: the
coefficient of variation of visually complete time over 20 iterations with labd's
stabilisation on (browser pinned to one CPU, profile in tmpfs) and off, and Levene's test
between the two samples.

Runs the real scenario (Chromium on an Xvfb the x11 driver starts, the example page through
the replay server, profile "none", a fresh browser per iteration) outside the daemon.

Run: python benchmarks/pageload/stabilisation_bench.py [--iterations 20] [--browser chromium]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

from scipy import stats

from labd.config import ReplaySettings
from labd.events import EventBus
from labd.runner.run import run_job
from labd.scheduler.submit import JobService
from labd.store import Store
from labd_x11 import X11Driver, X11Options

ROOT = Path(__file__).parents[2]


async def sample(stabilise: bool, iterations: int, browser: str, workdir: Path) -> list[float]:
    store = await Store.open(f"sqlite+aiosqlite:///{workdir / f'bench-{stabilise}.db'}")
    driver = X11Driver(X11Options(xvfb=["1280x800"]), "bench")
    try:
        device = await store.upsert_device((await driver.discover())[0])
        jobs = JobService(
            store, {"x11": driver}, EventBus(), replay=ReplaySettings(archive_dir=str(ROOT))
        )
        spec = {
            "suite": "bench", "test": "stabilisation", "scenario": "page-load",
            "iterations": iterations, "warmup": 1, "timeout_s": 3600,
            "params": {"url": "http://www.labd.test/", "browser": browser,
                       "stabilise": stabilise, "keep_video": False},
            "network": {"archive": "examples/page/site.har", "profile": "none"},
        }  # fmt: skip
        job, _ = await jobs.submit(spec, "bench.toml", submitter="bench")
        params = jobs.params_of(job.spec, driver)
        outcome = await run_job(
            job, device, driver, params, store, EventBus(), workdir / str(stabilise), jobs.replay
        )
        values = [
            i.values["visually_complete_ms"]
            for i in await store.iterations(job.id)
            if not i.warmup and not i.error and "visually_complete_ms" in i.values
        ]
        print(
            f"stabilise={stabilise}: {outcome.state.value}, {len(values)} values", file=sys.stderr
        )
        return values
    finally:
        await driver.close()
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--browser", default="chromium")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="labd-stabilisation-"))
    rows = {}
    for stabilise in (False, True):
        rows[stabilise] = asyncio.run(sample(stabilise, args.iterations, args.browser, workdir))
    print(f"\nVisually complete, {args.browser}, example page, profile none\n")
    print("stabilisation | n | mean ms | stddev ms | CoV")
    for stabilise, values in rows.items():
        mean, sd = statistics.mean(values), statistics.stdev(values)
        name = "on" if stabilise else "off"
        print(f"{name} | {len(values)} | {mean:.1f} | {sd:.1f} | {100 * sd / mean:.2f}%")
    statistic, p = stats.levene(rows[False], rows[True])
    print(f"\nLevene's test (off vs on): W = {statistic:.3f}, p = {p:.4f}")


if __name__ == "__main__":
    main()
