"""One job on one device. Raw values of every iteration are stored as they come."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog
from pydantic import BaseModel

from labd.config import ReplaySettings
from labd.errors import TestFailure
from labd.events import EventBus, IterationDone, JobStarted
from labd.model import Device, Driver, Iteration, Job, JobState, RunContext
from labd.runner.network import test_network
from labd.store import Store

log = structlog.get_logger("labd.runner")

# The IterationDone event is the stored iteration less its timestamps and fingerprint.
ITERATION_EVENT_FIELDS = {"job_id", "device_id", "attempt", "index", "warmup", "values", "error"}


@dataclass(frozen=True)
class Outcome:
    state: JobState
    error: str = ""


async def run_job(
    job: Job,
    device: Device,
    driver: Driver,
    params: BaseModel,
    store: Store,
    bus: EventBus,
    workdir: Path,
    replay: ReplaySettings | None = None,
) -> Outcome:
    """Run every iteration of job on device. InfrastructureError propagates (the caller
    retries); a failing iteration is recorded with its error and the job reported failed."""
    spec = job.spec
    scenario_cls = driver.scenarios()[spec.scenario]
    fingerprint = {
        "device": device.id,
        "platform": device.platform,
        "model": device.model,
        "os_version": device.os_version,
        "driver": f"{driver.name} {driver.version}",
    }
    ctx = RunContext(job.id, job.attempts, device, workdir, fingerprint)
    scenario = scenario_cls(params, ctx)
    total = spec.warmup + spec.iterations
    failed: list[str] = []
    measured: list[dict[str, float]] = []
    async with contextlib.AsyncExitStack() as stack:
        if spec.network is not None:
            network = test_network(spec.network, replay or ReplaySettings(), driver, device, ctx)
            await stack.enter_async_context(network)
        await scenario.setup()
        bus.publish(
            JobStarted(
                job_id=job.id, device_id=device.id, attempt=job.attempts, total_iterations=total
            )
        )
        try:
            for index in range(total):
                warmup = index < spec.warmup
                started = datetime.now(UTC)
                values: dict[str, float] = {}
                error = ""
                try:
                    values = await scenario.run_iteration(index)
                except TestFailure as e:
                    error = str(e)
                    if not warmup:
                        failed.append(error)
                iteration = Iteration(
                    job_id=job.id,
                    attempt=job.attempts,
                    index=index,
                    warmup=warmup,
                    values=values,
                    error=error,
                    started_at=started,
                    finished_at=datetime.now(UTC),
                    device_id=device.id,
                    fingerprint=dict(ctx.fingerprint),
                )
                await store.add_iteration(iteration)
                if not warmup and not error:
                    measured.append(values)
                log.debug("iteration done", index=index, warmup=warmup, values=values, error=error)
                duration = (iteration.finished_at - iteration.started_at).total_seconds()
                fields = iteration.model_dump(include=ITERATION_EVENT_FIELDS)
                bus.publish(IterationDone(**fields, duration_s=duration))
                if spec.stop_when_stable and _stable(measured, spec.stable_effect):
                    log.info("stopping early: every metric is stable", measured=len(measured))
                    break
        finally:
            try:
                await scenario.teardown()
            except Exception:
                log.exception("scenario teardown failed", scenario=spec.scenario)
    if failed:
        return Outcome(
            JobState.FAILED,
            f"{len(failed)} of {spec.iterations} measured iterations failed; first: {failed[0]}",
        )
    return Outcome(JobState.SUCCEEDED)


def _stable(measured: list[dict[str, float]], effect: float) -> bool:
    """The adaptive stopping rule: every metric's interval within half the effect."""
    from labd.stats.calibrate import enough_iterations

    names = {name for values in measured for name in values}
    return bool(names) and all(
        enough_iterations([v[name] for v in measured if name in v], effect, max_n=10**9)[0]
        for name in names
    )
