"""Keeping a running job's lease: renewed every `heartbeat_s`, and at once when another host
asks to cancel the job; what stops the run when the lease is lost, cancelled or cut off."""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable

import structlog

from labd.config import SchedulerSettings
from labd.store import Lease, Store, out_of_space

log = structlog.get_logger("labd.scheduler")


class Interrupt(enum.Enum):
    """Why a run was stopped before its end."""

    CANCELLED = "cancelled"
    LEASE_LOST = "lease lost"
    CUT_OFF = "lease not renewed"  # the database did not answer for the lease's whole TTL
    SHUTDOWN = "shutdown"
    MAINTENANCE = "maintenance"  # an administrator took the device out at once


# stop_run(job_id, why, what the store could not be told): stops the job's run.
StopRun = Callable[[str, Interrupt, str], None]


class Heartbeats:
    """The heartbeats of the jobs this host runs."""

    def __init__(
        self, store: Store, settings: SchedulerSettings, owner: str, stop_run: StopRun
    ) -> None:
        self.store, self.settings, self.owner = store, settings, owner
        self.stop_run = stop_run
        self._beat_now: dict[str, asyncio.Event] = {}  # by job id: renew its lease at once

    def cancel_heard(self, job_id: str) -> None:
        """Another host asked to cancel `job_id`: if it runs here, its heartbeat reads the
        cancel now rather than in up to `heartbeat_s`."""
        if beat_now := self._beat_now.get(job_id):
            beat_now.set()

    async def keep(self, lease: Lease) -> None:
        """Renew `lease` until cancelled; stop the run when the lease cannot be kept."""
        job_id = lease.job.id
        beat_now = self._beat_now[job_id] = asyncio.Event()
        try:
            await self._beat(lease, beat_now)
        finally:
            if self._beat_now.get(job_id) is beat_now:
                del self._beat_now[job_id]

    async def _beat(self, lease: Lease, beat_now: asyncio.Event) -> None:
        job_id = lease.job.id
        renewed = time.monotonic()
        loop = asyncio.get_running_loop()
        while True:
            timer = loop.call_later(self.settings.heartbeat_s, beat_now.set)
            try:
                await beat_now.wait()
            finally:
                timer.cancel()
            beat_now.clear()
            try:
                held, cancel = await self.store.heartbeat(
                    job_id, lease.token, self.settings.lease_ttl_s
                )
                renewed = time.monotonic()
            except Exception as e:  # a database hiccup: the next beat tries again
                log.warning("lease heartbeat failed", job_id=job_id, error=repr(e))
                if time.monotonic() - renewed < self.settings.lease_ttl_s:
                    continue
                # Cut off from the database for longer than the lease: another host may run
                # the job already. Stop measuring rather than run it twice.
                log.warning("lease not renewed within its TTL; stopping the run", job_id=job_id)
                what = "out of disk space" if out_of_space(e) else "database unreachable"
                self.stop_run(job_id, Interrupt.CUT_OFF, f"{what} on {self.owner}: {e}")
                return
            if not held or cancel:
                self.stop_run(job_id, Interrupt.CANCELLED if held else Interrupt.LEASE_LOST, "")
                return
