"""One job on one device. Raw values of every iteration are stored as they come, each with the
conditions read before and after it; an iteration under bad conditions, or whose values the
scenario cannot vouch for, is flagged with the reason (and set aside, and retried, as
configured). An A/B job runs its two variants interleaved on the device."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError

from labd.auth import spec_secrets
from labd.capture import CaptureError
from labd.config import MeasurementSettings, PerfherderSettings, ReplaySettings
from labd.errors import CannotStart, InfrastructureError, TestFailure, UsageError
from labd.events import EventBus, JobStarted
from labd.model import METRIC_NAME_RULE, Device, Iteration, Job, JobState, Policy, is_metric_name
from labd.redact import redact_text
from labd.runner.conditions import judge
from labd.runner.fingerprint import base_fingerprint, conditions_hash
from labd.runner.network import MissWatch, test_network
from labd.runner.variants import Slot, schedule
from labd.sdk import Driver, RunContext, Scenario
from labd.stats import refusal
from labd.store import Store, outlasting
from labd.visible import brief, quoted

log = structlog.get_logger("labd.runner")
NOTES_KEPT = 20  # an iteration's notes kept (a log of a thousand bad marks names 20)

CONDITIONS_TIMEOUT_S = 30.0


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
    *,
    measurement: MeasurementSettings | None = None,
    perfherder: PerfherderSettings | None = None,
    policy: Policy | None = None,
    lease_token: str | None = None,
) -> Outcome:
    """Run every iteration of job on device. InfrastructureError propagates (the caller
    retries); a failing iteration is recorded with its error and the job reported failed; a
    spec that cannot start (CannotStart) or input the device cannot take (UsageError) fails
    the job at once. Values are written under `lease_token` (the scheduler's lease):
    LeaseLost propagates once it moved on.

    Errors may quote what the program wrote (its stderr): the job's secrets (`params.env`
    values, secret fields) are masked in every error and flag before it is stored or logged."""
    secrets = spec_secrets(job.spec.model_dump(mode="json"))
    try:
        outcome = await _run(
            job, device, driver, params, store, bus, workdir, replay, measurement, perfherder,
            policy, lease_token, secrets,
        )  # fmt: skip
    except CannotStart as e:
        error = redact_text(str(e), secrets)
        log.warning("the job cannot start on this device", error=error)
        return Outcome(JobState.FAILED, f"cannot start on {device.id}: {error}")
    except CaptureError as e:
        # The screen or capture source failed (a display gone, a capture card unplugged):
        # the device's condition, retried like any other (the analysis's own verdicts on a
        # recording are the scenario's TestFailure).
        raise InfrastructureError(f"capture failed: {redact_text(str(e), secrets)}") from None
    except TestFailure as e:
        # Outside an iteration (its setup): the test's own failure, the same on any device
        # (a phone that does not cool under the job's own limit): the job fails, nothing is
        # held against the device, where it counted as a driver bug and quarantined phones.
        error = brief(redact_text(str(e), secrets))
        log.warning("the job's set-up failed", error=error)
        return Outcome(JobState.FAILED, f"set-up failed on {device.id}: {error}")
    except UsageError as e:
        # A value the job gave that this device's input cannot take (a key it has no name
        # for): the job's mistake, the same on every device, so no retry and no blame.
        error = redact_text(str(e), secrets)
        log.warning("the job gave input the device cannot take", error=error)
        return Outcome(JobState.FAILED, f"invalid input for {device.id}: {error}")
    except InfrastructureError as e:
        # The scheduler records it as the job's error: masked, without the original.
        if type(e) is InfrastructureError and (masked := redact_text(str(e), secrets)) != str(e):
            raise InfrastructureError(masked) from None
        raise
    return Outcome(outcome.state, redact_text(outcome.error, secrets))


async def _run(
    job: Job,
    device: Device,
    driver: Driver,
    params: BaseModel,
    store: Store,
    bus: EventBus,
    workdir: Path,
    replay: ReplaySettings | None,
    measurement: MeasurementSettings | None,
    perfherder: PerfherderSettings | None,
    policy: Policy | None,
    lease_token: str | None,
    secrets: list[str],
) -> Outcome:
    spec = job.spec
    rules = measurement or MeasurementSettings()
    scenario_cls = driver.scenarios()[spec.scenario]
    runs: dict[str, Scenario] = {}
    for variant in spec.variants():
        variant_params = (
            scenario_cls.Params.model_validate(spec.params_of(variant)) if variant else params
        )
        fingerprint = base_fingerprint(spec, device, driver, variant)
        folder = workdir / variant if variant else workdir
        ctx = RunContext(
            job.id, job.attempts, device, folder, fingerprint, policy=policy or Policy(),
            resources=driver.resources(device),  # where the scenario's bindings are found
        )  # fmt: skip
        runs[variant] = scenario_cls(variant_params, ctx)
    plan = schedule(spec)
    failed: list[str] = []
    aside: list[str] = []
    measured: list[dict[str, float]] = []
    misses: MissWatch | None = None
    async with contextlib.AsyncExitStack() as stack:
        if spec.network is not None:
            first = next(iter(runs.values())).ctx
            network = test_network(spec.network, replay or ReplaySettings(), driver, device, first)
            misses = await stack.enter_async_context(network)
            for scenario in runs.values():
                scenario.ctx.network = first.network
                scenario.ctx.fingerprint["network"] = first.fingerprint["network"]
        for scenario in runs.values():
            # Torn down also when its setup fails part-way: what it applied is undone (a
            # phone's airplane mode, its governors), as the SDK promises.
            stack.push_async_callback(_teardown, scenario, spec.scenario)
            await scenario.setup()
        bus.publish(
            JobStarted(
                job_id=job.id,
                device_id=device.id,
                attempt=job.attempts,
                total_iterations=spec.planned_iterations(),
            )
        )
        retries, position = rules.retry_flagged, 0
        unstable: dict[str, str] = {}  # with stop_when_stable: the metrics not stable yet, why
        while position < len(plan):
            slot = plan[position]
            iteration = await _iteration(
                runs[slot.variant], slot, position, driver, device, rules, secrets, misses
            )
            position += 1
            await _keep(store, iteration, lease_token)  # publishes IterationDone
            if iteration.error and not slot.warmup:
                failed.append(iteration.error)
            elif iteration.set_aside and not slot.warmup:
                aside.append(iteration.flags[0])
                if retries > 0:  # one more of the same variant, in its place
                    retries -= 1
                    plan.insert(position, Slot(slot.variant, False))
            elif not slot.warmup and not iteration.error:
                measured.append(iteration.values)
            log.debug(
                "iteration done",
                index=iteration.index,
                variant=slot.variant,
                warmup=slot.warmup,
                values=iteration.values,
                error=iteration.error,
                flags=iteration.flags,
            )
            # In a thread: the first call imports scipy (seconds on a loaded machine), and a
            # blocked event loop misses its lease heartbeats.
            if spec.stop_when_stable:
                stable, unstable = await asyncio.to_thread(
                    _stable, list(measured), spec.stable_effect
                )
                if stable:
                    log.info("stopping early: every metric is stable", measured=len(measured))
                    break
        else:
            if spec.stop_when_stable and measured and not failed:
                # Said, or a job that ran to its cap reads as one that stopped when stable.
                log.warning(
                    "not stable at the cap",
                    measured=len(measured),
                    iterations=spec.iterations,
                    metrics=unstable,
                )
    if failed:
        planned = spec.iterations * len(runs)
        return Outcome(
            JobState.FAILED,
            f"{len(failed)} of {planned} measured iterations failed; first: {failed[0]}",
        )
    if aside and not measured:
        return Outcome(
            JobState.FAILED,
            f"every measured iteration ({len(aside)}) was set aside; first: {aside[0]}",
        )
    if len(aside) > len(measured):
        # The few kept would stand for the test: a program that hangs 5 runs in 8 showed as
        # its 3 quick ones, in the summary, the history and Perfherder.
        return Outcome(
            JobState.FAILED,
            f"{len(aside)} of {len(aside) + len(measured)} measured iterations were set aside, "
            f"more than were kept: the {len(measured)} kept cannot stand for the test; first: "
            f"{aside[0]}",
        )
    if perfherder is not None:
        await _job_log(store, job, workdir, perfherder)
    return Outcome(JobState.SUCCEEDED)


async def _keep(store: Store, iteration: Iteration, lease_token: str | None) -> None:
    """Store the iteration, waiting out a database blip (the lease's heartbeat stops the run
    if the database stays away longer than the lease)."""
    tries = 0

    async def add() -> None:
        nonlocal tries
        tries += 1
        try:
            await store.add_iteration(iteration, lease_token)
        except IntegrityError:
            if tries == 1:
                raise
            # An earlier try committed, its answer lost with the connection: it is stored.

    await outlasting(add, f"storing iteration {iteration.index}")


async def _job_log(store: Store, job: Job, workdir: Path, settings: PerfherderSettings) -> None:
    """The PERFHERDER_DATA line in the job's log; an export that cannot be made is logged,
    never the job's failure (its raw values are all stored)."""
    from labd.runner.joblog import write_job_log

    try:
        path = await write_job_log(store, job, workdir, settings)
    except Exception as e:
        log.warning("no PERFHERDER_DATA for this job", error=str(e))
    else:
        log.info("PERFHERDER_DATA written", path=str(path))


async def _iteration(
    scenario: Scenario,
    slot: Slot,
    index: int,
    driver: Driver,
    device: Device,
    rules: MeasurementSettings,
    secrets: list[str],
    misses: MissWatch | None = None,
) -> Iteration:
    """Run one iteration between two readings of the device's conditions; its error and
    flags with the job's secrets masked."""
    ctx = scenario.ctx
    ctx.flags, ctx.notes = [], []
    before = await _conditions(driver, device)
    started = datetime.now(UTC)
    values: dict[str, float] = {}
    error = ""
    try:
        values = await scenario.run_iteration(index)
        if not isinstance(values, dict):  # the scenario's code, never the device: as bad values
            kind = type(values).__name__
            values = {}
            raise TestFailure(f"run_iteration returned {kind}, not a dict of metric values")
    except CannotStart:
        raise  # every further iteration would fail the same way
    except TestFailure as e:
        error = redact_text(str(e), secrets)  # may quote the program's stderr
    values, refused = _taken(values, index)
    error = brief(error or redact_text(refused, secrets))
    finished = datetime.now(UTC)
    missed = await misses.flags() if misses is not None else []
    after = await _conditions(driver, device)
    raised = [*ctx.flags, *missed, *judge(before, after, rules)]
    flags = [redact_text(f, secrets) for f in raised]
    fingerprint = {
        **ctx.fingerprint,
        "conditions": {"before": before, "after": after},
        "conditions_hash": conditions_hash(ctx.fingerprint),
        "metrics": {name: _metric(scenario, name) for name in values},
    }
    if ctx.notes:
        notes = [brief(redact_text(n, secrets)) for n in ctx.notes[:NOTES_KEPT]]
        if len(ctx.notes) > NOTES_KEPT:
            notes.append(f"and {len(ctx.notes) - NOTES_KEPT} more")
        fingerprint["notes"] = notes
        log.warning("iteration values left out", iteration=index, notes=notes)
    return Iteration(
        job_id=ctx.job_id,
        attempt=ctx.attempt,
        index=index,
        warmup=slot.warmup,
        values=values,
        error=error,
        started_at=started,
        finished_at=finished,
        device_id=device.id,
        fingerprint=fingerprint,
        variant=slot.variant,
        flags=flags,
        set_aside=bool(flags) and not error and rules.set_aside_flagged,
    )


def _taken(values: dict[str, float], index: int) -> tuple[dict[str, float], str]:
    """The values labd takes (labd.stats.refusal), and the iteration's failure when the
    scenario reported another: a NaN, an infinity, a boolean or 1e300 is no measurement, and
    stored it would break the store's JSON, the statistics and the Perfherder export."""
    taken, refused = {}, []
    for name, value in values.items():
        if not is_metric_name(name):
            refused.append(f"metric name {quoted(name)[:140]} is not one: {METRIC_NAME_RULE}")
        elif (reason := refusal(value)) is None:
            taken[name] = value
        else:
            refused.append(f"metric {name}: {reason}")
    if not refused:
        return values, ""
    return taken, f"{'; '.join(refused)} (iteration {index})"


def _metric(scenario: Scenario, name: str) -> dict[str, Any]:
    """The unit and direction the scenario declares for a reported metric (readers put the
    manifest's own [[metrics]] over them: labd.metric_specs)."""
    known = type(scenario).metric_spec(name)
    unit = known.unit if known else ""
    higher = known.higher_is_better is True if known else False
    return {"unit": unit, "higher_is_better": higher}


async def _conditions(driver: Driver, device: Device) -> dict[str, Any]:
    """The driver's reading; a reading that fails is recorded as such, never fatal."""
    try:
        async with asyncio.timeout(CONDITIONS_TIMEOUT_S):
            return await driver.conditions(device)
    except TimeoutError:
        why = f"conditions() took over {CONDITIONS_TIMEOUT_S:g} s"
        log.warning("cannot read the device's conditions", driver=driver.name, error=why)
        return {"unreadable": why}
    except Exception as e:
        log.warning("cannot read the device's conditions", driver=driver.name, error=repr(e))
        return {"unreadable": str(e) or type(e).__name__}


async def _teardown(scenario: Scenario, name: str) -> None:
    try:
        await scenario.teardown()
    except Exception:
        log.exception("scenario teardown failed", scenario=name)


def _stable(measured: list[dict[str, float]], effect: float) -> tuple[bool, dict[str, str]]:
    """The adaptive stopping rule: every metric stable or not judged (labd.stats'
    `stability`); and why each one that is not stable yet is not."""
    from labd.stats import stability_of

    found = stability_of(measured, effect)
    unstable = {name: why for name, (stable, why) in found.items() if stable is False}
    return bool(found) and not unstable, unstable
