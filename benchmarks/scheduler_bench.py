"""Scheduler at lab scale: 1,000 simulated devices, 100,000 queued jobs, SQLite and PostgreSQL.

Prints, per backend: the cost of one dispatch (claiming the best job for a device) at 1k, 10k
and 100k queued jobs; jobs leased per second and jobs completed per second by the real
scheduler, pool and runner with every device busy; p99 event-loop lag meanwhile; peak RSS.

Run: python benchmarks/scheduler_bench.py [--backend sqlite|postgres|both] [--seconds 20]
PostgreSQL: a fresh database on localhost:5432 (user postgres, trust auth), dropped after.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import resource
import statistics
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

import asyncpg
import numpy as np
import sqlalchemy as sa

from labd.config import PoolSettings, SchedulerSettings
from labd.daemon.looplag import monitor_loop_lag
from labd.events import EventBus, JobLeased
from labd.logs import configure_logging
from labd.model import Device, DeviceSelector, TestSpec
from labd.pool import Pool
from labd.scheduler import JobService, Scheduler
from labd.sdk import Driver, NoOptions, Scenario
from labd.store import Store, lane_key
from labd.store.base import spec_hash
from labd.store.tables import jobs
from labd.store.tables import lanes as lanes_table

MODELS = [f"model-{n}" for n in range(10)]


class InstantScenario(Scenario):
    name = "instant"

    async def run_iteration(self, index: int) -> dict[str, float]:
        return {"value": float(index)}


class SimDriver(Driver):
    """1,000 devices that exist only in memory, of 10 models with a few tags."""

    name = "sim"
    platform = "sim"

    def __init__(self, count: int) -> None:
        super().__init__(NoOptions(), "bench")
        self.count = count

    async def discover(self) -> list[Device]:
        return [
            Device(
                id=f"sim-{n:04d}",
                driver="sim",
                platform="sim",
                model=MODELS[n % len(MODELS)],
                tags=["even" if n % 2 == 0 else "odd"],
                host="bench",
            )
            for n in range(self.count)
        ]

    def scenarios(self) -> Mapping[str, type[Scenario]]:
        return {"instant": InstantScenario}


def selectors() -> list[DeviceSelector]:
    """20 lanes: per model, and per model and tag."""
    lanes = [DeviceSelector(platform="sim", model=m) for m in MODELS]
    lanes += [DeviceSelector(platform="sim", model=m, tags=["even"]) for m in MODELS]
    return lanes


async def fill(store: Store, start: int, stop: int) -> None:
    """Queue jobs start..stop directly (setup cost is not what is measured)."""
    lanes = selectors()
    rows = []
    for n in range(start, stop):
        selector = lanes[n % len(lanes)]
        spec = TestSpec(
            suite="bench",
            test="instant",
            scenario="instant",
            iterations=1,
            warmup=0,
            priority=n % 3,
            device=selector,
        )
        rows.append(
            {
                "id": f"job-{n:06d}",
                "state": "queued",
                "priority": spec.priority,
                "fair_rank": n,
                "lane": lane_key(selector, spec.scenario),
                "submitter": f"ci-{n % 5}",
                "spec": spec.model_dump(mode="json"),
                "spec_hash": spec_hash(spec),
                "attempts": 0,
                "max_attempts": 3,
                "submitted_at": time.time(),
            }
        )
    for at in range(0, len(rows), 5000):  # itertools.batched needs Python 3.12
        async with store.engine.begin() as conn:
            await conn.execute(jobs.insert(), rows[at : at + 5000])
    if store.dialect == "postgresql":  # as autovacuum would soon after a bulk load
        async with store.engine.begin() as conn:
            await conn.execute(sa.text("ANALYZE jobs"))
    async with store.engine.begin() as conn:  # register the lanes as a submit would
        known = set((await conn.execute(sa.select(lanes_table.c.key))).scalars())
        for selector in lanes:
            key = lane_key(selector, "instant")
            if key not in known:
                await conn.execute(
                    lanes_table.insert().values(
                        key=key, selector=selector.model_dump(), scenario="instant"
                    )
                )


async def dispatch_cost(store: Store, devices: list[Device], samples: int) -> float:
    """Median ms to claim the best job for one device (then the job is put back)."""
    lanes = await store.lanes()
    times = []
    for device in itertools.islice(itertools.cycle(devices), samples):
        keys = [k for k, lane in lanes.items() if lane.fits(device, {"instant"})]
        start = time.perf_counter()
        lease = await store.claim_job(device.id, keys, "bench", 30)
        times.append((time.perf_counter() - start) * 1000)
        assert lease is not None
        await store.requeue_job(lease.job.id, lease.token, "", refund=True)
    return statistics.median(times)


async def run_backend(
    url: str, label: str, n_jobs: int, n_devices: int, seconds: float
) -> dict[str, object]:
    store = await Store.open(url)
    driver = SimDriver(n_devices)
    devices = await driver.discover()
    costs = {}
    queued = 0
    for depth in (1_000, 10_000, n_jobs):
        await fill(store, queued, depth)
        queued = depth
        costs[depth] = await dispatch_cost(store, devices, 200)

    bus = EventBus()
    store.bus = bus  # the store publishes JobLeased once a claim commits
    settings = PoolSettings(discovery_interval_s=3600, health_interval_s=3600)
    pool = Pool({"sim": driver}, {}, store, bus, settings, "bench")
    service = JobService(store, {"sim": driver}, bus)
    with tempfile.TemporaryDirectory() as tmp:
        scheduler = Scheduler(store, pool, service, bus, SchedulerSettings(), "bench", Path(tmp))
        lags: list[float] = []
        lag_task = asyncio.get_running_loop().create_task(monitor_loop_lag(lags.append, 0.01))
        leased = bus.subscribe("leased", JobLeased, maxsize=10_000_000)
        await pool.start()
        before = await store.count_jobs()
        start = time.perf_counter()
        await scheduler.start()
        await asyncio.sleep(seconds)
        elapsed = time.perf_counter() - start
        await scheduler.stop(5)
        after = await store.count_jobs()
        lag_task.cancel()
        n_leased = leased.depth
        await pool.stop(1)
    await store.close()
    done = after.get("succeeded", 0) - before.get("succeeded", 0)
    return {
        "backend": label,
        "cost_ms": costs,
        "leased_per_s": n_leased / elapsed,
        "done_per_s": done / elapsed,
        "lag_p99_ms": float(np.percentile(lags, 99)) * 1000 if lags else float("nan"),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


async def with_postgres(fn: object) -> dict[str, object]:
    name = f"labd_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(host="127.0.0.1", user="postgres", database="test")
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        assert callable(fn)
        return await fn(f"postgresql+asyncpg://postgres@127.0.0.1/{name}")  # type: ignore[no-any-return]
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--devices", type=int, default=1_000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    configure_logging(args.log_level, "json")
    results = []
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite+aiosqlite:///{tmp}/bench.db"
            results.append(await run_backend(url, "sqlite", args.jobs, args.devices, args.seconds))
    if args.backend in ("postgres", "both"):
        results.append(
            await with_postgres(
                lambda url: run_backend(url, "postgres", args.jobs, args.devices, args.seconds)
            )
        )
    depths = list(results[0]["cost_ms"])  # type: ignore[call-overload]
    head = " ".join(f"{f'dispatch@{d // 1000}k ms':>16}" for d in depths)
    print(f"{'backend':<9} {head} {'leased/s':>9} {'done/s':>7} {'lag p99 ms':>10} {'RSS MB':>7}")
    for r in results:
        costs = " ".join(f"{r['cost_ms'][d]:>16.2f}" for d in depths)  # type: ignore[index]
        print(
            f"{r['backend']:<9} {costs} {r['leased_per_s']:>9.0f} {r['done_per_s']:>7.0f} "
            f"{r['lag_p99_ms']:>10.1f} {r['rss_mb']:>7.0f}"
        )
    print(f"({args.devices} devices, {args.jobs} queued jobs, {args.seconds:g} s of dispatching)")


if __name__ == "__main__":
    asyncio.run(main())
