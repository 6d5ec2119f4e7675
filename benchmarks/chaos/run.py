"""The chaos campaign: 3 labd hosts on a private PostgreSQL and Mosquitto, faults on a seeded
schedule, invariants checked from the recorded history.

    python -m benchmarks.chaos.run --short            # what the test suite runs (~1 min)
    python -m benchmarks.chaos.run --seed 7           # the long run: 200 jobs, 20 faults

Prints the faults by kind with their recovery times (from the end of a fault until every host
it hit wrote and published a new event), the jobs, and each invariant with its violations.
Exit status 1 when any invariant was violated.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.chaos.faults import Injected, Planned, inject, schedule
from benchmarks.chaos.invariants import Verdict, check
from benchmarks.chaos.lab import Host, Recorder, Timing, retained_statuses, sim_spec, submit_jobs
from benchmarks.chaos.proxy import Proxy
from benchmarks.chaos.services import PrivateMosquitto, PrivatePostgres
from labd.model import Iteration, Job
from labd.store import Store


@dataclass(frozen=True)
class Plan:
    jobs: int
    iterations: int
    iteration_s: float
    faults: int
    every_kind_once: bool
    gap_s: tuple[float, float]
    seed: int
    hosts: int = 3
    devices: int = 2
    deadline_s: float = 600.0


SHORT = Plan(jobs=100, iterations=4, iteration_s=0.25, faults=8, every_kind_once=True,
             gap_s=(1.0, 2.0), seed=1, deadline_s=240)  # fmt: skip
LONG = Plan(jobs=200, iterations=5, iteration_s=0.5, faults=20, every_kind_once=False,
            gap_s=(3.0, 8.0), seed=7, deadline_s=900)  # fmt: skip


@dataclass
class Report:
    plan: Plan
    faults: list[Injected] = field(default_factory=list)
    recovery: dict[int, float | None] = field(default_factory=dict)  # fault index -> seconds
    verdicts: list[Verdict] = field(default_factory=list)
    states: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    undelivered: int = 0  # outbox rows left when the invariants were checked

    @property
    def violations(self) -> int:
        return sum(v.violations for v in self.verdicts)


async def campaign(plan: Plan, root: Path) -> Report:
    report = Report(plan)
    timing = Timing()
    # The servers run as their own users: their files live where those users can reach them.
    servers = Path(tempfile.mkdtemp(prefix="labd-chaos-servers-"))
    servers.chmod(0o755)
    pg, broker = PrivatePostgres(servers), PrivateMosquitto(servers)
    await asyncio.to_thread(pg.start)
    await asyncio.to_thread(broker.start)
    lab = f"chaos-{uuid.uuid4().hex[:8]}"
    prefix = f"labd/v1/{lab}"
    hosts: list[Host] = []
    proxies: list[Proxy] = []
    recorder = Recorder(broker.port, prefix)
    recording = asyncio.get_running_loop().create_task(recorder.run(), name="chaos:recorder")
    try:
        async with asyncio.timeout(30):
            await recorder.connected.wait()
        for n in range(plan.hosts):
            to_pg, to_broker = Proxy(f"h{n}-pg", pg.port), Proxy(f"h{n}-mqtt", broker.port)
            for proxy in (to_pg, to_broker):
                await proxy.start()
                proxies.append(proxy)
            host = Host(f"chaos-h{n}", lab, root, to_pg, to_broker, plan.devices, timing)
            host.start()
            hosts.append(host)
        direct = pg.url
        await _wait_devices(direct, hosts, plan.hosts * plan.devices)
        specs = {
            f"job-{n:04d}": sim_spec(n, plan.iterations, plan.iteration_s) for n in range(plan.jobs)
        }
        # Some jobs are held back until the last fault has ended: every host then has work
        # to show that it recovered (on a fast machine the queue ran dry before the last
        # faults ended, and their recovery could not be measured).
        held = list(specs)[-2 * plan.hosts * plan.devices :]
        start = time.monotonic()
        await submit_jobs(direct, hosts[0].name, {k: v for k, v in specs.items() if k not in held})
        faults = schedule(plan.seed, plan.faults, plan.hosts, 2.0, plan.gap_s, plan.every_kind_once)
        report.faults = await _run_faults(faults, hosts, pg, broker, timing, start)
        await submit_jobs(direct, hosts[0].name, {k: specs[k] for k in held})
        await _wait_finished(direct, list(specs), plan.deadline_s - (time.monotonic() - start))
        report.seconds = time.monotonic() - start
        report.undelivered = await _wait_outboxes_empty(direct, 60)
        await asyncio.sleep(1.0)  # the last deliveries reach the recorder
        statuses = await retained_statuses(broker.port, prefix)
        jobs, iterations, event_seq = await _read_store(direct, list(specs))
        report.states = dict(sorted(_count(j.state.value for j in jobs).items()))
        report.verdicts = check(
            jobs, iterations, event_seq, recorder.messages, statuses, [h.name for h in hosts]
        )
        report.recovery = _recovery(report.faults, recorder)
        with (root / "recorded.jsonl").open("w") as out:  # the history, for a closer look
            for m in recorder.messages:
                out.write(json.dumps({"at": m.at, "topic": m.topic, "body": m.body}) + "\n")
    finally:
        for host in hosts:
            report.exit_codes[host.name] = await asyncio.to_thread(host.stop)
        recording.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await recording
        for proxy in proxies:
            await proxy.stop()
        await asyncio.to_thread(broker.stop)
        await asyncio.to_thread(pg.stop)
        shutil.rmtree(servers, ignore_errors=True)
    return report


async def _run_faults(
    plan: list[Planned],
    hosts: list[Host],
    pg: PrivatePostgres,
    broker: PrivateMosquitto,
    timing: Timing,
    start: float,
) -> list[Injected]:
    done = []
    for planned in plan:
        await asyncio.sleep(max(0.0, start + planned.at_s - time.monotonic()))
        done.append(await inject(planned, hosts, pg, broker, timing))
    return done


async def _wait_devices(url: str, hosts: list[Host], count: int) -> None:
    store = await _open(url)
    try:
        async with asyncio.timeout(60):
            while True:
                if gone := [why for h in hosts if (why := h.exited())]:
                    raise RuntimeError("; ".join(gone))
                if len(await store.list_devices()) >= count:
                    return
                await asyncio.sleep(0.2)
    finally:
        await store.close()


async def _open(url: str) -> Store:
    async with asyncio.timeout(60):
        while True:
            try:
                return await Store.open(url)
            except Exception:  # the database may be restarting
                await asyncio.sleep(0.5)


async def _wait_finished(url: str, ids: list[str], within: float) -> None:
    store = await _open(url)
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(within, 1.0)):
                while True:
                    counts = await store.count_jobs()
                    if sum(counts.get(s, 0) for s in ("queued", "leased", "running")) == 0:
                        return
                    await asyncio.sleep(0.5)
    finally:
        await store.close()


async def _wait_outboxes_empty(url: str, within: float) -> int:
    """Wait for every host's outbox to drain; the rows still there after `within` s."""
    import sqlalchemy as sa

    from labd.store.tables import outbox

    store = await _open(url)
    query = sa.select(sa.func.count()).select_from(outbox)
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                while True:
                    if not await store.read(lambda conn: conn.scalar(query)):
                        return 0
                    await asyncio.sleep(0.5)
        return int(await store.read(lambda conn: conn.scalar(query)) or 0)
    finally:
        await store.close()


async def _read_store(
    url: str, ids: list[str]
) -> tuple[list[Job], dict[str, list[Iteration]], dict[str, int]]:
    import sqlalchemy as sa

    from labd.store.tables import jobs as jobs_table

    store = await _open(url)
    try:
        jobs = [job for job_id in ids if (job := await store.get_job(job_id)) is not None]
        iterations = {job.id: await store.iterations(job.id) for job in jobs}
        query = sa.select(jobs_table.c.id, jobs_table.c.event_seq)
        rows = await store.read(lambda conn: conn.execute(query).all())
        return jobs, iterations, {job_id: int(seq) for job_id, seq in rows}
    finally:
        await store.close()


def _recovery(faults: list[Injected], recorder: Recorder) -> dict[int, float | None]:
    """Per fault: seconds from its end until every host it hit wrote an event after the end
    and the recorder received it; None when that never happened (the jobs held back until
    the last fault ended give every host work)."""
    found: dict[int, float | None] = {}
    for n, fault in enumerate(faults):
        waits = []
        for host in fault.hosts:
            arrivals = [
                m.at
                for m in recorder.messages
                if m.body.get("host") == host and float(m.body.get("time", 0)) >= fault.ended
            ]
            waits.append(min(arrivals) - fault.ended if arrivals else None)
        found[n] = None if None in waits else max(w for w in waits if w is not None)
    return found


def _count(values: object) -> dict[str, int]:
    tally: dict[str, int] = defaultdict(int)
    for v in values:  # type: ignore[attr-defined]
        tally[v] += 1
    return tally


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def render(report: Report) -> str:
    plan = report.plan
    lines = [
        f"chaos run: seed {plan.seed}, {plan.hosts} hosts x {plan.devices} simulated devices, "
        f"{plan.jobs} jobs of {plan.iterations}+1 iterations x {plan.iteration_s:g} s, "
        f"{report.seconds:.0f} s",
        "",
        "| fault | injected | recovered | recovery p50 (s) | recovery p99 (s) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    by_kind: dict[str, list[float | None]] = defaultdict(list)
    for n, fault in enumerate(report.faults):
        by_kind[fault.kind].append(report.recovery.get(n))
    for kind, times in sorted(by_kind.items()):
        known = [t for t in times if t is not None]
        p50 = f"{statistics.median(known):.2f}" if known else "n/a"
        p99 = f"{_percentile(known, 0.99):.2f}" if known else "n/a"
        lines.append(f"| {kind} | {len(times)} | {len(known)} | {p50} | {p99} |")
    lines += ["", "jobs by end state: " + ", ".join(f"{k} {v}" for k, v in report.states.items())]
    lines += [f"outbox rows undelivered when checked: {report.undelivered}"]
    lines += ["", "| invariant | violations |", "| --- | ---: |"]
    for verdict in report.verdicts:
        lines.append(f"| {verdict.name} | {verdict.violations} |")
    for verdict in report.verdicts:
        lines += [f"  {verdict.name}: {example}" for example in verdict.examples]
    start = report.faults[0].started if report.faults else 0.0
    lines += ["", "faults (s from the first): " + ", ".join(
        f"{f.started - start:.0f} {f.kind} {'/'.join(f.hosts) if len(f.hosts) == 1 else 'all'}"
        for f in report.faults
    )]  # fmt: skip
    codes = ", ".join(f"{h} {c}" for h, c in report.exit_codes.items())
    lines += ["", f"host exit codes after SIGTERM: {codes}"]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--short", action="store_true", help="the quick run the test suite does")
    p.add_argument("--seed", type=int, help="fault schedule seed")
    p.add_argument("--jobs", type=int, help="jobs to run")
    p.add_argument("--faults", type=int, help="faults to inject")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (logs)")
    args = p.parse_args(argv)
    plan = SHORT if args.short else LONG
    overrides = {"seed": args.seed, "jobs": args.jobs, "faults": args.faults}
    plan = Plan(**{**plan.__dict__, **{k: v for k, v in overrides.items() if v is not None}})
    root = Path(tempfile.mkdtemp(prefix="labd-chaos-"))
    report = asyncio.run(campaign(plan, root))
    print(render(report))
    if args.keep:
        print(f"logs in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if report.violations or any(report.exit_codes.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
