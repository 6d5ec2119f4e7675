"""Dispatch across hosts: 1, 2 and 3 labd schedulers (separate processes) sharing one
PostgreSQL queue of 10,000+ jobs.

Each host runs the real pool and scheduler with its own simulated devices (instant jobs, so
dispatch itself is the bottleneck) from the same start time for the same window. Prints per
host count: jobs dispatched per second (all hosts together), the p50 and p99 latency of one
claim (SELECT ... FOR UPDATE SKIP LOCKED and the lease UPDATE, from the host's side) and the
queue depth at the end of the window.

Run: python -m benchmarks.dispatch_hosts_bench [--devices 25] [--seconds 10] [--jobs 20000]
PostgreSQL: a fresh database per host count on localhost:5432 (trust auth), dropped after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np

from benchmarks.scheduler_bench import MODELS, InstantScenario, fill
from labd.config import PoolSettings, SchedulerSettings
from labd.events import EventBus, JobLeased
from labd.logs import configure_logging
from labd.pool import Pool
from labd.scheduler import JobService, Scheduler
from labd.sdk import Device, Driver, NoOptions, Scenario
from labd.store import Store


class HostSimDriver(Driver):
    """`count` in-memory devices of this host, of the models the queue's lanes ask for."""

    name = "sim"
    platform = "sim"

    def __init__(self, count: int, host: str) -> None:
        super().__init__(NoOptions(), host)
        self.count = count

    async def discover(self) -> list[Device]:
        return [
            Device(
                id=f"{self.host}-{n:03d}",
                driver="sim",
                platform="sim",
                model=MODELS[n % len(MODELS)],
                tags=["even" if n % 2 == 0 else "odd"],
            )
            for n in range(self.count)
        ]

    def scenarios(self) -> Mapping[str, type[Scenario]]:
        return {"instant": InstantScenario}


async def worker(url: str, host: str, devices: int, start_at: float, seconds: float) -> None:
    """One host: wait for the common start, dispatch for `seconds`, print what it measured."""
    store = await Store.open(url, host=host)
    claims: list[float] = []
    claim = store.claim_job

    async def timed_claim(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        lease = await claim(*args, **kwargs)
        if lease is not None:
            claims.append(time.perf_counter() - began)
        return lease

    store.claim_job = timed_claim  # type: ignore[method-assign]
    driver = HostSimDriver(devices, host)
    bus = EventBus()
    store.bus = bus  # the store publishes JobLeased once a claim commits
    pool_settings = PoolSettings(discovery_interval_s=3600, health_interval_s=3600)
    pool = Pool({"sim": driver}, {}, store, bus, pool_settings, host)
    jobs = JobService(store, {"sim": driver}, bus)
    leased = bus.subscribe("leased", JobLeased, maxsize=10_000_000)
    with tempfile.TemporaryDirectory() as tmp:
        scheduler = Scheduler(store, pool, jobs, bus, SchedulerSettings(), host, Path(tmp))
        await pool.start()
        await asyncio.sleep(max(0.0, start_at - time.time()))
        began = time.perf_counter()
        await scheduler.start()
        await asyncio.sleep(seconds)
        scheduler.stop_taking_work()
        elapsed = time.perf_counter() - began
        count = leased.depth
        await scheduler.stop(5)
        await pool.stop(1)
    await store.close()
    print(json.dumps({"host": host, "leased": count, "elapsed": elapsed, "claims": claims}))


async def queued(url: str) -> int:
    store = await Store.open(url)
    try:
        return (await store.count_jobs()).get("queued", 0)
    finally:
        await store.close()


async def one_count(hosts: int, args: argparse.Namespace) -> dict[str, float]:
    name = f"labd_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(host="127.0.0.1", user="postgres", database="postgres")
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql+asyncpg://postgres@127.0.0.1/{name}"
    try:
        store = await Store.open(url)
        await fill(store, 0, args.jobs)
        await store.close()
        start_at = time.time() + 3 + hosts  # every worker has opened its store by then
        me = [sys.executable, "-m", "benchmarks.dispatch_hosts_bench", "--worker", url]
        times = [str(args.devices), str(start_at), str(args.seconds)]
        procs = [
            subprocess.Popen([*me, f"bench-h{n}", *times], stdout=subprocess.PIPE)
            for n in range(hosts)
        ]
        reports = []
        for proc in procs:
            out, _ = await asyncio.to_thread(proc.communicate)
            reports.append(json.loads(out.decode().strip().splitlines()[-1]))
        left = await queued(url)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    claims = np.array([c for r in reports for c in r["claims"]]) * 1000
    window = max(r["elapsed"] for r in reports)
    return {
        "hosts": hosts,
        "per_s": sum(r["leased"] for r in reports) / window,
        "p50_ms": float(np.percentile(claims, 50)) if claims.size else float("nan"),
        "p99_ms": float(np.percentile(claims, 99)) if claims.size else float("nan"),
        "left": left,
    }


async def main(argv: list[str]) -> None:
    if argv[:1] == ["--worker"]:
        configure_logging("warning", "json")
        url, host, devices, start_at, seconds = argv[1:]
        await worker(url, host, int(devices), float(start_at), float(seconds))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", default="1,2,3", help="host counts to measure (default 1,2,3)")
    p.add_argument("--devices", type=int, default=25, help="devices per host (default 25)")
    p.add_argument("--jobs", type=int, default=20_000, help="jobs queued at the start")
    p.add_argument("--seconds", type=float, default=10, help="dispatch window (default 10)")
    args = p.parse_args(argv)
    configure_logging("warning", "json")
    print(f"{'hosts':>5} {'dispatched/s':>12} {'claim p50 ms':>12} {'claim p99 ms':>12} "
          f"{'queued at end':>13}")  # fmt: skip
    for hosts in (int(h) for h in args.hosts.split(",")):
        r = await one_count(hosts, args)
        print(
            f"{hosts:>5} {r['per_s']:>12.0f} {r['p50_ms']:>12.1f} {r['p99_ms']:>12.1f} "
            f"{r['left']:>13.0f}",
            flush=True,
        )
    print(
        f"({args.devices} simulated devices per host, instant jobs, {args.jobs} queued at the "
        f"start, {args.seconds:g} s window; one PostgreSQL on this machine)"
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
