"""Accepting jobs: validate a spec against the lab, persist it, announce it.

Everything knowable at submit time is checked here, so a bad manifest is refused at once with
every reason instead of failing on a device later.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from pydantic import BaseModel, ValidationError

from labd.auth import Principal, RateLimiter
from labd.config import MeasurementSettings, PerfherderSettings, ReplaySettings, SchedulerSettings
from labd.errors import AuthError, InvalidSpec, UsageError
from labd.events import EventBus, JobRejected
from labd.model import (
    AdminState,
    Device,
    DeviceState,
    Job,
    JobState,
    Policy,
    TestSpec,
    id_problem,
    parse_spec,
)
from labd.perfherder import perfherder
from labd.replay import load, profile_for
from labd.runner import archive_path
from labd.sdk import Driver
from labd.store import NonceSeen, RawValuesRemoved, Store, results_view
from labd.validation import describe_errors, did_you_mean, numbers_of_the_wrong_kind
from labd.visible import brief

log = structlog.get_logger("labd.scheduler")

DEVICES_MAX_AGE_S = 5.0


# Submits checking archives at once (a CI burst of network jobs) load them one after another,
# so the check's memory is that of one archive, not of one per submit thread.
_ONE_ARCHIVE_AT_A_TIME = threading.Lock()


class JobService:
    """The one way jobs enter the queue (HTTP API, MQTT and CLI all come through here)."""

    def __init__(
        self,
        store: Store,
        drivers: Mapping[str, Driver],
        bus: EventBus,
        replay: ReplaySettings | None = None,
        measurement: MeasurementSettings | None = None,
        perfherder: PerfherderSettings | None = None,
        policy: Policy | None = None,
        limiter: RateLimiter | None = None,
        queue_timeout_s: float = SchedulerSettings().queue_timeout_s,
    ) -> None:
        self.store = store
        self.queue_timeout_s = queue_timeout_s  # a spec's own queue_timeout_s overrides it
        self.policy = policy or Policy()
        self.limiter = limiter or RateLimiter()
        self.drivers = drivers
        self.bus = bus
        self.replay = replay or ReplaySettings()
        self.measurement = measurement or MeasurementSettings()
        self.perfherder = perfherder or PerfherderSettings()
        self._devices: tuple[float, list[Device]] | None = None  # (read at, the lab's devices)
        # Why this host leases nothing now ("" when it does); the scheduler sets it.
        self.leasing_paused: Callable[[], str] = lambda: ""

    async def submit(
        self,
        data: Any,
        source: str,
        job_id: str = "",
        submitter: str = "",
        principal: Principal | None = None,
        nonce: tuple[str, str, float] | None = None,
    ) -> tuple[Job, bool]:
        """Validate and persist; returns (job, created). Raises InvalidSpec with every reason.
        With a principal (the way every MQTT and API request comes), its rate limit and its
        quota of unfinished jobs (AuthError `rate_limited`, `quota_exceeded`) and its scenarios
        are checked too. A signed request's `nonce` already acted on raises NonceSeen first:
        a replay costs its victim no part of its rate."""
        if nonce is not None and await self.store.nonce_seen(nonce[0], nonce[1]):
            raise NonceSeen(nonce[1])
        if principal is not None:
            self.limiter.take(principal)
        job_id = job_id or uuid.uuid4().hex
        if problem := id_problem(job_id, "id"):
            raise InvalidSpec([f"{source}: {problem}"])
        submitter = principal.name if principal else submitter
        try:
            spec = data if isinstance(data, TestSpec) else parse_spec(data, source)
            if principal is not None:
                self._check_scenarios(spec, principal, source)
            await self.check(spec, source)
            waits = spec.queue_timeout_s or self.queue_timeout_s
            try:
                job, created = await self.store.submit_job(
                    job_id,
                    spec,
                    submitter or "anonymous",
                    nonce=nonce,
                    queue_timeout_s=waits,
                    max_unfinished=principal.max_active_jobs if principal else None,
                )
            except AuthError as e:  # its quota, counted where the job is inserted
                raise AuthError(e.reason, f"{source}: {e}") from e
        except InvalidSpec as e:
            log.info("job rejected", job_id=job_id, source=source, problems=e.problems)
            self.bus.publish(JobRejected(job_id=job_id, source=source, problems=e.problems))
            raise
        except AuthError as e:  # its quota
            log.info("job rejected", job_id=job_id, source=source, problems=[str(e)])
            rejected = JobRejected(job_id=job_id, source=source, problems=[str(e)], reason=e.reason)
            self.bus.publish(rejected)
            raise
        if created:
            log.info(
                "job queued",
                job_id=job.id,
                suite=spec.suite,
                test=spec.test,
                submitter=job.submitter,
                priority=spec.priority,
            )
        return job, created

    async def perfherder_export(self, job: Job) -> dict[str, Any]:
        """The job's PERFHERDER_DATA payload by this daemon's [perfherder] settings, the one its
        `job.log` holds (a client's own settings would name another series). A succeeded
        job's only: a failed or cancelled run's figures would join the series as if they were
        good. UsageError says why there is none."""
        if job.state is not JobState.SUCCEEDED:
            raise UsageError(
                f"job {job.id!r} is {job.state.value}: only a succeeded job is exported to "
                "Perfherder (its raw values: --format csv or json)"
            )
        view = await results_view(self.store, job)
        if removed := view.get("raw_values_removed"):  # its replicates are raw values
            raise RawValuesRemoved(job.id, removed)
        return perfherder(view, self.perfherder)

    def _check_scenarios(self, spec: TestSpec, principal: Principal, source: str) -> None:
        if not principal.may_run(spec.scenario):
            allowed = ", ".join(sorted(principal.scenarios))
            raise InvalidSpec(
                [
                    f"{source}: scenario: principal {principal.name!r} may not run "
                    f"{spec.scenario!r} (allowed: {allowed})"
                ]
            )

    def params_of(self, spec: TestSpec, driver: Driver) -> BaseModel:
        """The scenario's parameters as its own model (validated again on the runner)."""
        return driver.scenarios()[spec.scenario].Params.model_validate(spec.params)

    def _network_problems(self, spec: TestSpec, source: str) -> list[str]:
        if spec.network is None:
            return []
        problems = []
        try:
            profile_for(spec.network)
        except UsageError as e:
            problems.append(f"{source}: network.profile: {str(e).split(': ', 1)[1]}")
        path, problem = archive_path(spec.network, self.replay)
        if problem:
            problems.append(f"{source}: {problem}")
        else:
            url = spec.params.get("url")
            page = url if isinstance(url, str) and url.startswith("http") else None
            problems += self._archive_problems(path, spec.network.ignore_params, page, source)
        return problems

    def _archive_problems(
        self, path: Any, ignore: list[str], url: str | None, source: str
    ) -> list[str]:
        """The archive is loaded as the replay server will load it (within
        replay.max_archive_mb): one that cannot be served, or that lacks the page (a 404 from
        the replay server), is refused now rather than failing every attempt."""
        try:
            with _ONE_ARCHIVE_AT_A_TIME:  # each load holds a few times the archive's size
                archive = load(path, int(self.replay.max_archive_mb * 2**20), ignore)
        except UsageError as e:
            return [f"{source}: network.archive: {e}"]
        if url is not None and archive.find("GET", url) is None:
            return [f"{source}: params.url: {url} is not in the archive {path.name}"]
        return []

    def _offering(self, spec: TestSpec) -> list[Driver]:
        """Drivers offering the scenario, those of the job's platform when it names one: X11
        and Android both offer page-load, each with its own parameters, and a job for one is
        checked against that one only. (None on its platform: all of them, and the device
        check says why none fits.)"""
        offering = [d for d in self.drivers.values() if spec.scenario in d.scenarios()]
        platform = spec.device.platform
        return [d for d in offering if d.platform == platform] or offering

    async def check(self, spec: TestSpec, source: str) -> None:
        offering = self._offering(spec)
        if not offering:
            known = sorted({s for d in self.drivers.values() for s in d.scenarios()})
            hint = did_you_mean(spec.scenario, known) or f" (known: {', '.join(known)})"
            raise InvalidSpec([f"{source}: scenario: unknown scenario {spec.scenario!r}{hint}"])
        problems: list[str] = []
        for driver, variant in ((d, v) for d in offering for v in spec.variants()):
            scenario = driver.scenarios()[spec.scenario]
            where = f"ab.{variant}." if variant else ""  # an A/B job: each variant's params
            given = spec.params_of(variant)
            if wrong := numbers_of_the_wrong_kind(scenario.Params, given):  # cpu = true: CPU 1
                problems += [f"{source}: {where}params.{problem}" for problem in wrong]
                continue
            try:
                params = scenario.Params.model_validate(given)
            except ValidationError as e:
                problems += [
                    p.replace(f"{source}: ", f"{source}: {where}params.", 1)
                    for p in describe_errors(e, scenario.Params, source)
                ]
                continue
            problems += [
                f"{source}: {where}{p}" if where else f"{source}: {p}"
                for p in scenario.check(params)
            ]
            problems += [
                f"{source}: {where}{p}" if where else f"{source}: {p}"
                for p in scenario.policy_problems(params, self.policy)
            ]
            produced = {m.name for m in scenario.default_metrics}
            for n, metric in enumerate(spec.metrics):
                if produced and metric.name not in produced:
                    problems.append(
                        f"{source}: metrics.{n}.name: scenario {spec.scenario!r} does not "
                        f"produce {metric.name!r} (it produces {', '.join(sorted(produced))})"
                    )
        if spec.network is not None:  # reading the archive is blocking work: off the loop
            problems += await asyncio.to_thread(self._network_problems, spec, source)
        # A device list a few seconds old may say yes (should the device have left since, the
        # job waits and why_waiting says so); only a fresh one may refuse the job. Asked
        # whatever else is wrong: a refusal names every problem.
        if not await self._fitting_devices(
            spec, offering, DEVICES_MAX_AGE_S
        ) and not await self._fitting_devices(spec, offering):
            problems.append(
                f"{source}: device: no device in the lab matches "
                f"{spec.device.describe()} and runs scenario {spec.scenario!r}"
            )
        if problems:
            # Each kept short: one can quote a request's whole value (5,000 tags: 44 KB, sent
            # back, published and logged twice).
            raise InvalidSpec([brief(p) for p in sorted(set(problems), key=problems.index)])

    async def _fitting_devices(
        self, spec: TestSpec, offering: list[Driver], max_age: float = 0.0
    ) -> list[Device]:
        now = time.monotonic()
        if self._devices is None or now - self._devices[0] > max_age:
            self._devices = (now, await self.store.list_devices())
        names = {d.name for d in offering}
        return [d for d in self._devices[1] if d.driver in names and spec.device.matches(d)]

    async def why_waiting(self, job: Job) -> str:
        """For a queued job: which devices could take it and why none has yet."""
        devices = await self._fitting_devices(job.spec, self._offering(job.spec))
        if not devices:
            return f"no device matches {job.spec.device.describe()} any more"
        paused = self.leasing_paused()
        parts = []
        for device in devices:
            if device.state is DeviceState.BUSY:
                running = await self.store.active_job_on(device.id)
                # No job on it: its host stopped saying otherwise (dead, or between states).
                said = f"{device.id} busy (job {running})" if running else f"{device.id} busy"
            elif device.state is DeviceState.AVAILABLE:
                said = f"{device.id} available"
            else:
                said = f"{device.id} {device.state.value}"
                said += f": {device.reason}" if device.reason else ""
            if device.admin is not AdminState.ENABLED:  # it takes no job until enabled
                said += f" (admin: {device.admin.value})"
            elif device.state is DeviceState.AVAILABLE and not paused:
                said += " (next dispatch will take it)"
            parts.append(said)
        waiting = f"waiting for one of {len(devices)} matching device(s): " + "; ".join(parts)
        if paused:
            return f"this host leases no job: {paused}; {waiting}"
        return waiting
