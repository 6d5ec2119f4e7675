"""Measurement quality of the page-load lab, in the manner of Larres et al.'s Tables 3 and 4:
the coefficient of variation of visually complete time over 20 iterations with labd's
stabilisation off, each setting alone (the browser alone on half the CPUs, no address-space
randomisation, profile in tmpfs) and all together, and Levene's test of each against "off".

Runs the real scenario (Chromium on an Xvfb the x11 driver starts, the example page through
the replay server, profile "none", a fresh browser per iteration) outside the daemon.

Run: python benchmarks/pageload/stabilisation_bench.py [--iterations 20] [--browser chromium]
(about 15 minutes: five samples of 21 page loads)
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
SETUPS = {  # Larres et al.'s Table 4 (each alone) and Table 3 (all together)
    "off": [],
    "exclusive_cpu": ["exclusive_cpu"],
    "no_aslr": ["no_aslr"],
    "tmpfs": ["tmpfs"],
    "all": ["exclusive_cpu", "no_aslr", "tmpfs"],
}


async def sample(stabilise: list[str], iterations: int, browser: str, workdir: Path) -> list[float]:
    name = "-".join(stabilise) or "off"
    store = await Store.open(f"sqlite+aiosqlite:///{workdir / name}.db")
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
            job, device, driver, params, store, EventBus(), workdir / name, jobs.replay
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
    rows = {
        name: asyncio.run(sample(settings, args.iterations, args.browser, workdir))
        for name, settings in SETUPS.items()
    }
    print(f"\nVisually complete, {args.browser}, example page, profile none\n")
    print("stabilisation | n | mean ms | stddev ms | CoV | max diff | Levene W, p vs off")
    for name, values in rows.items():
        mean, sd = statistics.mean(values), statistics.stdev(values)
        spread = 100 * max(abs(v - mean) for v in values) / mean
        test = "-" if name == "off" else "{:.2f}, {:.3f}".format(*stats.levene(rows["off"], values))
        print(f"{name} | {len(values)} | {mean:.1f} | {sd:.1f} | {100 * sd / mean:.2f}% "
              f"| {spread:.1f}% | {test}")  # fmt: skip


if __name__ == "__main__":
    main()
