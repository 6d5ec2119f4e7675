"""The scheduler: match queued jobs to free devices, hold their leases, settle their outcome.

Order: priority, then fair queuing between submitters, then first in first out (see
`Store._fair_rank`). A lease is renewed every `heartbeat_s`; a daemon that dies stops renewing
and another (or this one after a restart) takes the job back when the lease expires.
Infrastructure failures are retried with exponential backoff; a test that ran is never retried.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import structlog
from sqlalchemy.exc import IntegrityError

from labd.config import SchedulerSettings
from labd.errors import InfrastructureError
from labd.events import (
    DeviceChanged,
    Event,
    EventBus,
    JobQueued,
    JobRequeued,
    Subscription,
    dispatch,
)
from labd.logs import bind_context
from labd.model import AdminState, Device, DeviceState, Job, JobState
from labd.pool import Pool
from labd.runner import Outcome, run_job
from labd.scheduler.accounts import Accounts
from labd.scheduler.heartbeat import Heartbeats, Interrupt
from labd.scheduler.space import StateSpace, storage_fault
from labd.scheduler.start_check import start_check
from labd.scheduler.submit import JobService
from labd.store import (
    Lease,
    LeaseLost,
    Store,
    database_blip,
    out_of_space,
    outlasting,
    passing,
)
from labd.tasks import Failures, TaskSet
from labd.visible import brief

log = structlog.get_logger("labd.scheduler")

# Devices offered work at once: claims overlap their database round trips.
DISPATCH_CONCURRENCY = 8
# A job requeued after an infrastructure failure is left to other devices this long after it
# became due (every host polls the queue each second), then its old device may take it back.
RETRY_ELSEWHERE_GRACE_S = 3.0
# How long a stop waits at least for a dispatch pass under way to finish its claims.
PASS_WAIT_S = 2.0
JOBS_FOLDER_MODE = 0o700  # the jobs' folder is labd's alone (labd.daemon.statedir)


class Scheduler:
    name = "scheduler"

    def __init__(
        self,
        store: Store,
        pool: Pool,
        jobs: JobService,
        bus: EventBus,
        settings: SchedulerSettings,
        owner: str,
        workdir: Path,
    ) -> None:
        self.store = store
        self.pool = pool
        self.jobs = jobs
        self.bus = bus
        self.settings = settings
        self.owner = owner
        self.workdir = workdir
        self.running: dict[str, asyncio.Task[None]] = {}
        self._interrupts: dict[str, Interrupt] = {}
        self.heartbeats = Heartbeats(store, settings, owner, self._stop_run)
        self.accounts = Accounts()
        self._wake = asyncio.Event()
        self._accepting = True
        self._tasks = TaskSet("scheduler")
        self._runs = TaskSet("job")
        self._beats = TaskSet("heartbeat")  # apart from _tasks: they beat on during shutdown
        self._news: Subscription | None = None
        self.space = StateSpace(workdir, settings.min_free_mb, bus, self.wake)
        self._unsettled: dict[str, str] = {}  # why an attempt ended, where that was not written
        # Held through a dispatch pass: a stop waits for the pass, so that a job claimed in it
        # has its run (which a stop requeues) rather than a lease nothing runs.
        self._passing = asyncio.Lock()

    def wake(self) -> None:
        """Look for work now (a job was queued or a device freed up)."""
        self._wake.set()

    async def start(self) -> None:
        # The news that may let a job start: a job queued or back in the queue, a device
        # changed (freed, enabled, back from quarantine).
        news = self.bus.subscribe(f"scheduler:{self.owner}", JobQueued, JobRequeued, DeviceChanged)
        self._news = news
        # This host just started, so nothing it leased before is still running.
        for job in await self.store.expire_leases(owner=self.owner):
            log.warning(
                "took back a job this host held before it restarted",
                job_id=job.id,
                state=job.state.value,
                error=job.error,
            )
            if job.state.terminal:  # out of attempts: its last line, as every job has one
                log.info("job finished", job_id=job.id, state=job.state.value, error=job.error)
        await self.reap()
        await self.space.check()
        self.jobs.leasing_paused = lambda: self.space.low  # why queued jobs wait, said by the API
        self._tasks.supervise("space", self.space.watch, self.bus)
        self._tasks.supervise("news", lambda: dispatch(news, self._on_news), self.bus)
        self._tasks.supervise("dispatch", self._dispatch_loop, self.bus)
        self._tasks.supervise("reaper", self._reap_loop, self.bus)
        if self.store.dialect == "postgresql":  # a cancel asked on another host
            self._tasks.spawn("cancels", self.store.follow_cancels(self.heartbeats.cancel_heard))

    async def _on_news(self, event: Event) -> None:
        self.wake()

    def stop_taking_work(self) -> None:
        """Lease no new job from now on (the daemon calls this as soon as it is told to stop)."""
        self._accepting = False

    async def stop(self, grace: float) -> None:
        """Take no more work; give running jobs `grace` seconds, then requeue what is left."""
        self.stop_taking_work()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        if self._news is not None:
            self.bus.unsubscribe(self._news)
        # A pass under way finishes its claims (one short transaction each) before the loop is
        # cancelled: cancelled between a claim's commit and its run, a job kept a lease that
        # nothing ran, and its attempt was counted when the lease expired.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(grace, PASS_WAIT_S)), self._passing:
                pass
        await self._tasks.cancel_all()
        if self.running:
            log.info("waiting for running jobs", jobs=sorted(self.running), grace_s=grace)
            left = max(0.0, deadline - loop.time())
            _, pending = await asyncio.wait(list(self.running.values()), timeout=left)
            for job_id, task in list(self.running.items()):
                if task in pending:
                    self._interrupts[job_id] = Interrupt.SHUTDOWN
                    task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=10)

    # Dispatch -------------------------------------------------------------------------------

    async def _dispatch_loop(self) -> None:
        failures = Failures("dispatch", log)
        while True:
            # Cleared before dispatching: a wake-up that comes during the pass is kept.
            self._wake.clear()
            self._take_out_for_maintenance()
            try:
                await self.dispatch()
                failures.succeeded()
            except Exception as e:
                failures.failed(e)
            # Also poll once a second: other hosts queue jobs in the shared database too.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._wake.wait()
            # Python 3.11's asyncio.timeout can turn a cancellation that lands as the time-out
            # expires into TimeoutError, which the line above swallows: the loop then ignored
            # the daemon's stop (seen under load in CI). Honour a pending cancellation here.
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError

    async def dispatch(self) -> int:
        """Lease a job for every free device that has matching work; returns how many."""
        async with self._passing:
            return await self._dispatch()

    async def _dispatch(self) -> int:
        available = self.pool.available()
        if not self._accepting or not available or self.space.low:
            return 0
        lanes = await self.store.lanes()
        limit = asyncio.Semaphore(DISPATCH_CONCURRENCY)

        async def offer(device: Device) -> bool:
            driver = self.pool.drivers.get(device.driver)
            scenarios = driver.scenarios() if driver is not None else {}
            keys = [key for key, lane in lanes.items() if lane.fits(device, scenarios)]
            if not keys:
                return False
            async with limit:
                return await self._claim_for(device, keys)

        # Every offer ends before the pass does (a stop waits for the pass), even when one
        # of them failed.
        claimed = await asyncio.gather(*(offer(d) for d in available), return_exceptions=True)
        for outcome in claimed:
            if isinstance(outcome, BaseException):
                raise outcome
        return sum(1 for outcome in claimed if outcome is True)

    async def _claim_for(self, device: Device, keys: list[str]) -> bool:
        try:
            lease = await self.store.claim_job(
                device.id, keys, self.owner, self.settings.lease_ttl_s, RETRY_ELSEWHERE_GRACE_S
            )
        except IntegrityError:  # the database still has a job active on it
            log.warning("device holds an active job in the store; skipped", device=device.id)
            return False
        if lease is None:
            return False
        # The run is registered before anything else is awaited: a cancel, a stop or a
        # maintenance finds it from the claim on (acquiring the device is its first step).
        self.pool.reserve(device.id, lease.job.id)
        self.running[lease.job.id] = self._runs.spawn(lease.job.id, self._run(lease, device))
        return True

    def _take_out_for_maintenance(self) -> None:
        """Interrupt the jobs running on devices an administrator took into maintenance (on
        this host or, through the store, on another): they go back to the queue uncounted."""
        for device_id, job_id in list(self.pool.busy.items()):
            device = self.pool.devices.get(device_id)
            task = self.running.get(job_id)
            if device is None or device.admin is not AdminState.MAINTENANCE or task is None:
                continue
            if job_id not in self._interrupts:
                log.info(
                    "device taken into maintenance; its job goes back to the queue",
                    device=device_id,
                    job_id=job_id,
                )
                self._stop_run(job_id, Interrupt.MAINTENANCE)

    async def _reap_loop(self) -> None:
        failures = Failures("lease reaper", log)
        while True:
            await asyncio.sleep(self.settings.reap_interval_s)
            try:
                await self.reap()
                failures.succeeded()
            except Exception as e:
                failures.failed(e)

    async def reap(self) -> None:
        """Take back jobs whose lease expired (their daemon died or hung), and time out the
        jobs still queued past their deadline."""
        # The store publishes each job's JobRequeued or JobFinished (the requeued wake us).
        for job in await self.store.expire_leases(why=self._unsettled):
            self._unsettled.pop(job.id, None)
            log.warning("lease expired", job_id=job.id, state=job.state.value, error=job.error)
            if job.state.terminal:  # out of attempts: its last line, as every job has one
                log.info("job finished", job_id=job.id, state=job.state.value, error=job.error)
        reasons = {}
        for job in await self.store.overdue_jobs():
            assert job.queue_deadline is not None  # overdue: it has one
            waited = (job.queue_deadline - job.submitted_at).total_seconds()
            why = await self.jobs.why_waiting(job)
            reasons[job.id] = f"not started within its queue_timeout_s ({waited:g} s): {why}"
        for job in await self.store.time_out_queued(reasons):
            log.warning("job timed out in the queue", job_id=job.id, error=job.error)
            log.info("job finished", job_id=job.id, state=job.state.value, error=job.error)

    # One job ----------------------------------------------------------------------------------

    async def _run(self, lease: Lease, device: Device) -> None:
        job = lease.job
        with bind_context(job_id=job.id, device=device.id, attempt=job.attempts):
            log.info("job leased", suite=job.spec.suite, test=job.spec.test)
            infra_failure = ""
            try:
                infra_failure = await self._execute(lease, device)
            except Exception:
                log.exception("job bookkeeping failed; the lease will expire and be retried")
            finally:
                self.running.pop(job.id, None)
                self._interrupts.pop(job.id, None)
                await self.pool.release(device.id, infra_failure)
                self.wake()

    async def _execute(self, lease: Lease, device: Device) -> str:
        """Run the job under its lease; settle the outcome. Returns an infrastructure error."""
        job, token = lease.job, lease.token
        driver = self.pool.drivers[device.driver]
        heart = self._beats.spawn(job.id, self.heartbeats.keep(lease))
        deadline = asyncio.timeout(job.spec.timeout_s)
        try:
            await self.pool.acquire(device.id, job.id)
            try:
                running = await outlasting(
                    lambda: self.store.mark_running(job.id, token),
                    "starting the job",
                    within=self.settings.lease_ttl_s,
                )
            except Exception as e:
                if not passing(e):
                    raise
                # Nothing ran; the lease expires and the job goes back to the queue.
                self._unsettled[job.id] = f"database unreachable on {self.owner}: {e}"
                log.warning("the job could not be started: the database did not answer")
                return ""
            if not running:
                log.info("the job was not started: its lease moved on or it was cancelled")
                return ""
            params, problem = await start_check(job, device, driver, self.jobs.policy)
            if params is None:
                # The spec's fault, not the device's: fail the job, count nothing against it.
                log.warning("the job cannot start on this device", error=problem)
                await self._finish(job, token, JobState.FAILED, f"cannot start: {problem}")
                return ""
            log.info("job running", iterations=job.spec.warmup + job.spec.iterations)
            # Private, as labd made it at start: a jobs' folder removed by hand would come back
            # with the job's own folder, under the umask (0755).
            await asyncio.to_thread(self.workdir.mkdir, JOBS_FOLDER_MODE, True, True)
            workdir = self.workdir / job.id
            policy = self.accounts.take(job.id, self.jobs.policy)
            async with deadline:
                outcome = await run_job(
                    job,
                    device,
                    driver,
                    params,
                    self.store,
                    self.bus,
                    workdir,
                    self.jobs.replay,
                    measurement=self.jobs.measurement,
                    perfherder=self.jobs.perfherder,
                    policy=policy,
                    lease_token=token,
                )
        except TimeoutError as e:
            if not deadline.expired():  # a driver's own time-out, not the job's
                return await self._attempt_failed(e, lease, device.id)
            outcome = Outcome(JobState.TIMED_OUT, await self._timed_out(job, device.id))
        except asyncio.CancelledError:
            reason = self._interrupts.get(job.id, Interrupt.SHUTDOWN)
            await self._interrupted(job, token, reason)
            if reason is Interrupt.SHUTDOWN:
                raise
            # We cancelled the runner ourselves; this task itself goes on to clean up.
            if task := asyncio.current_task():
                task.uncancel()
            return ""
        except LeaseLost:
            # The store refused a write: another host owns the job now. Nothing of this run
            # is kept, and the device did nothing wrong.
            log.warning("lease lost: the store refused this host's write; the run is stopped")
            return ""
        except Exception as e:
            return await self._attempt_failed(e, lease, device.id)
        finally:
            heart.cancel()
            self.accounts.give_back(job.id)
        if outcome.state in (JobState.FAILED, JobState.TIMED_OUT) and (
            gone := self._went_offline(device.id)
        ):
            # A phone that left its driver's listing while its connections stayed open (a hung
            # USB transport): the test did not fail, the device did.
            lost = InfrastructureError(
                f"device {device.id} went offline during the job ({gone}); the job then "
                f"{outcome.state.value}: {outcome.error}"
            )
            return await self._attempt_failed(lost, lease, device.id)
        await self._finish(job, token, outcome.state, outcome.error)
        return ""

    def _went_offline(self, device_id: str) -> str:
        """Why device_id is offline now, at the end of its job (the pool leaves a busy
        device's going offline as it is until the job ends); "" when it is not."""
        device = self.pool.devices.get(device_id)
        return device.reason if device and device.state is DeviceState.OFFLINE else ""

    async def _attempt_failed(self, e: Exception, lease: Lease, device_id: str) -> str:
        """Requeue (or fail) an attempt that raised `e`; returns the error when its device is
        held responsible."""
        job, token = lease.job, lease.token
        if database_blip(e):
            # This host's disk or its database, not the device: retried elsewhere first;
            # a full disk also pauses leasing here until it is freed.
            full = out_of_space(e)
            what = "out of disk space" if full else "database unreachable"
            error = f"{what} on {self.owner}: {e}"
            log.warning("job attempt failed", error=error)
            if full:
                await self.space.check()
            try:
                await self._retry_or_fail(job, token, error, device_id)
            except Exception:
                # Not written either: the lease will expire, and the expiry says why.
                self._unsettled[job.id] = error
                raise
            return ""
        if fault := storage_fault(e, self.workdir):
            # The jobs' folder (read-only, removed by hand, failing): this host's condition.
            # Retried elsewhere, nothing held against the device; leasing here pauses while
            # the folder cannot be written.
            error = f"the jobs' folder on {self.owner} failed: {fault.strerror}: {fault.filename}"
            log.warning("job attempt failed", error=error)
            await self.space.check()
            await self._retry_or_fail(job, token, error, device_id)
            return ""
        if isinstance(e, InfrastructureError):
            error = f"infrastructure failure: {e}"
        else:  # the driver's or the scenario's own exception: its type says where to look
            error = f"driver bug: {type(e).__name__}: {e}" if str(e) else f"driver bug: {e!r}"
            if job.error == brief(error) and lease.failed_on not in ("", device_id):
                # The same bug on two devices is the scenario's: one bad job must not
                # quarantine every device it is retried on.
                error += f" (on {lease.failed_on} and {device_id}: the job's, not a device's)"
                log.warning("job attempt failed", error=error, exc_info=True)
                await self._finish(job, token, JobState.FAILED, error)
                return ""
        log.warning(
            "job attempt failed", error=error, exc_info=not isinstance(e, InfrastructureError)
        )
        held = await self._retry_or_fail(job, token, error, device_id)
        return error if held else ""

    async def _timed_out(self, job: Job, device_id: str) -> str:
        """Why the job timed out, with how far it got: which scenario hung is the question."""
        why = f"job exceeded its {job.spec.timeout_s:g} s (timeout_s)"
        try:
            done = await self.store.count_iterations(job.id, job.attempts)
        except Exception:  # the store is down: the time-out is still the reason
            return why
        scenario = job.spec.scenario
        return f"{why}; scenario {scenario!r} on {device_id} had recorded {done} iteration(s)"

    def _stop_run(self, job_id: str, reason: Interrupt, unsettled: str = "") -> None:
        """Stop the run of `job_id` for `reason`; `unsettled`: why its attempt ended, where
        the store could not be told. A run already being stopped is left to it: cancelled
        twice, its runner was cut off while it ended the job (a local cancel is also heard
        back as the database's notice)."""
        if job_id in self._interrupts:
            return
        self._interrupts[job_id] = reason
        if unsettled:
            self._unsettled[job_id] = unsettled
        if task := self.running.get(job_id):
            task.cancel()

    async def cancel(self, job_id: str) -> Job | None:
        """Cancel in any state: queued at once, running by interrupting its runner."""
        before = await self.store.get_job(job_id)
        job = await self.store.request_cancel(job_id)
        if job is None or before is None:
            return job
        if before.state is JobState.QUEUED and job.state is JobState.CANCELLED:
            log.info("job finished", job_id=job.id, state=job.state.value, error=job.error)
        if job_id in self.running:
            self._stop_run(job_id, Interrupt.CANCELLED)
        return job

    async def _interrupted(self, job: Job, token: str, reason: Interrupt) -> None:
        if reason is Interrupt.CANCELLED:
            await self._finish(job, token, JobState.CANCELLED, "cancelled while running")
        elif reason is Interrupt.SHUTDOWN:
            # Not the job's fault: requeue without counting the attempt.
            if await self.store.requeue_job(job.id, token, "requeued at shutdown", refund=True):
                log.info("job requeued at shutdown")
        elif reason is Interrupt.MAINTENANCE:
            # Neither the job's fault nor the device's: requeued uncounted, nothing blamed.
            why = f"requeued: device {job.device_id} was taken into maintenance"
            if await self.store.requeue_job(job.id, token, why, refund=True):
                log.info("job requeued: its device was taken into maintenance")
        elif reason is Interrupt.CUT_OFF:
            log.warning(
                "the run was stopped and its measured program killed: the database did not "
                "answer for the lease's whole TTL (away, or its disk full); the job goes back "
                "to the queue once its lease expires"
            )
        else:
            log.warning(
                "lease lost: the run was stopped and its measured program killed; "
                "another host owns the job now"
            )

    async def _retry_or_fail(self, job: Job, token: str, error: str, device_id: str) -> bool:
        """Requeue or fail the job; False when the lease had moved on (nothing was written)."""
        if job.attempts >= job.spec.max_attempts:
            return await self._finish(
                job, token, JobState.FAILED, f"{error} (attempt {job.attempts}, no retries left)"
            )
        delay = min(
            self.settings.retry_backoff_s * 2 ** (job.attempts - 1),
            self.settings.retry_backoff_max_s,
        )
        error = brief(error)  # as kept and published, the same for the same error (blame)
        requeued = await outlasting(
            lambda: self.store.requeue_job(
                job.id, token, error, delay=delay, avoid_device=device_id
            ),
            "requeueing the job",
            within=self.settings.lease_ttl_s,
        )
        if not requeued:
            log.warning("lease lost before the job could be requeued", error=error)
            return False
        log.info("job will be retried", retry_in_s=delay, error=error)
        return True

    async def _finish(self, job: Job, token: str, state: JobState, error: str) -> bool:
        error = brief(error)
        settled = await outlasting(  # publishes JobFinished; a database blip waits
            lambda: self.store.finish_job(job.id, token, state, error),
            "settling the job",
            within=self.settings.lease_ttl_s,
        )
        if settled:
            log.info("job finished", job_id=job.id, state=state.value, error=error)
            return True
        log.warning("lease lost before the job could be settled", state=state.value)
        return False
