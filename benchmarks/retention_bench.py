"""The database's retention at a lab's scale: how fast a pass removes old jobs' raw iterations,
what it costs the event loop meanwhile, and the space it gives back.

Loads --jobs succeeded jobs of 11 iterations (10 measured and a warm-up, the default job)
whose records have the shape and size of a real host job's (a fingerprint with its conditions,
about 2 KB), ended 400 days ago, on SQLite and on a fresh PostgreSQL database (dropped after;
skipped when PostgreSQL does not answer on localhost:5432). Then one `Retention(365, 0)` pass
runs while a task sleeps 10 ms at a time and records how late it wakes (the event loop's lag).
Space: SQLite's pages in use (the file keeps its size; freed pages are reused), PostgreSQL's
`pg_total_relation_size` of the jobs, iterations and digests after `VACUUM`.

Run: python benchmarks/retention_bench.py [--jobs 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

from labd.model import BuildInfo, Iteration, TestSpec
from labd.store import Retention, Store
from labd.store.tables import iterations, jobs

NOW = datetime.now(UTC)
CONDITIONS = {
    "cpu_governor": "performance", "cpu_freq_khz": [2_400_000] * 2, "throttle_count": 0,
    "load_1m": 0.41, "mem_available_kib": 23_000_000, "temperature_c": {"cpu": 41.5},
    "swap_used_kib": 0, "aslr": 0, "pinned_cpus": [0], "kernel": "6.1.0-27-amd64",
}  # fmt: skip


def record(job_id: str, index: int) -> dict:
    it = Iteration(
        job_id=job_id, attempt=1, index=index, warmup=index == 0,
        values={"wall_time_ms": 20.0 + index, "cpu_time_ms": 8.0 + index / 10,
                "max_rss_kib": 7900.0},
        started_at=NOW, finished_at=NOW, device_id="host-vm",
        fingerprint={"model": "host-vm", "os": "Debian 12", "python": "3.11.2",
                     "conditions": {"before": CONDITIONS, "after": CONDITIONS},
                     "command": ["python3", "-c", "pass"], "labd": "0.9"},
    )  # fmt: skip
    return it.model_dump(mode="json")


async def load(store: Store, count: int) -> None:
    command = {"command": ["python3", "-c", "pass"]}
    spec = TestSpec(suite="bench", test="startup", scenario="command", params=command,
                    iterations=10, warmup=1)  # fmt: skip
    ended = store.clock.now() - 400 * 86400
    for n in range(count):
        job_id = f"job-{n:06d}"
        await store.submit_job(
            job_id, spec.model_copy(update={"build": BuildInfo(revision=f"r{n}")}), "ci"
        )
        rows = [
            {"job_id": job_id, "attempt": 1, "idx": i, "record": record(job_id, i)}
            for i in range(11)
        ]
        done = (
            jobs.update()
            .where(jobs.c.id == job_id)
            .values(state="succeeded", attempts=1, finished_at=ended)
        )

        def write(conn: sa.Connection, rows: list = rows, done: sa.Update = done) -> None:
            conn.execute(iterations.insert(), rows)
            conn.execute(done)

        await store.write(write)


async def space(store: Store) -> int:
    """Bytes the database's jobs, iterations and digests take."""
    if store.dialect == "sqlite":

        def pages(conn: sa.Connection) -> int:
            size = conn.exec_driver_sql("PRAGMA page_size").scalar() or 0
            used = (conn.exec_driver_sql("PRAGMA page_count").scalar() or 0) - (
                conn.exec_driver_sql("PRAGMA freelist_count").scalar() or 0
            )
            return int(size * used)

        return await store.read(pages)
    async with store.engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        tables = ("jobs", "iterations", "job_digests")
        for table in tables:
            await conn.exec_driver_sql(f"VACUUM {table}")
        total = await conn.exec_driver_sql(
            "SELECT " + " + ".join(f"pg_total_relation_size('{t}')" for t in tables)
        )
        return int(total.scalar() or 0)


async def measure(url: str, count: int) -> dict[str, float]:
    store = await Store.open(url)
    try:
        await load(store, count)
        before = await space(store)
        lags: list[float] = []
        stop = asyncio.Event()

        async def probe() -> None:
            loop = asyncio.get_running_loop()
            while not stop.is_set():
                start = loop.time()
                await asyncio.sleep(0.01)
                lags.append(loop.time() - start - 0.01)

        async with asyncio.TaskGroup() as group:
            group.create_task(probe())
            start = time.perf_counter()
            pruned = await Retention(store, 365, 0).apply()
            took = time.perf_counter() - start
            stop.set()
        after = await space(store)
        assert pruned.raw_jobs == count, pruned
        lags.sort()
        return {
            "jobs/s": count / took,
            "lag p99 ms": 1000 * lags[int(0.99 * (len(lags) - 1))],
            "lag max ms": 1000 * lags[-1],
            "KB/job before": before / count / 1024,
            "KB/job after": after / count / 1024,
            "median lag ms": 1000 * statistics.median(lags),
        }
    finally:
        await store.close()


async def postgres_database() -> tuple[str, str] | None:
    import asyncpg

    name = f"labd_bench_{uuid.uuid4().hex[:10]}"
    try:
        conn = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/postgres", timeout=3)
    except (OSError, asyncpg.PostgresError):
        return None
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    return name, f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"


async def drop(name: str) -> None:
    import asyncpg

    conn = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/postgres")
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'labd.db'}"
        rows.append(("SQLite", await measure(url, args.jobs)))
    if (pg := await postgres_database()) is not None:
        try:
            rows.append(("PostgreSQL", await measure(pg[1], args.jobs)))
        finally:
            await drop(pg[0])
    columns = list(rows[0][1])
    print(f"{args.jobs:,} ended jobs of 11 iterations, one retention pass")
    print("| backend | " + " | ".join(columns) + " |")
    print("| --- |" + " ---: |" * len(columns))
    for name, found in rows:
        print(f"| {name} | " + " | ".join(f"{found[c]:,.1f}" for c in columns) + " |")


if __name__ == "__main__":
    asyncio.run(main())
