"""Free space where jobs write their folders (and SQLite its database): below the configured
floor no new job is leased, so one job that filled the disk costs nobody else an attempt and
no device its good name. Leasing resumes by itself once space is freed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import structlog
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from labd.events import ComponentDown, ComponentUp, EventBus
from labd.store import free_bytes

log = structlog.get_logger("labd.scheduler")

COMPONENT = "storage"
CHECK_EVERY_S = 5.0
MIB = 2**20


class StateSpace(Collector):
    """Watches the free space at `path`; `low` says why leasing pauses ("" while it need not)."""

    def __init__(
        self, path: Path, min_free_mb: int, bus: EventBus, on_recovered: Callable[[], None]
    ) -> None:
        self.path, self.min_free = path, min_free_mb * MIB
        self.bus, self.on_recovered = bus, on_recovered
        self.low = ""
        self.free: int | None = None
        self._unmeasured = ""
        self._announced = False  # storage's first state said, up or down

    async def watch(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(CHECK_EVERY_S)

    async def check(self) -> None:
        """Measure now; say so (log, event, /readyz) when the state changes."""
        try:
            self.free = await asyncio.to_thread(lambda: free_bytes(existing(self.path)))
        except OSError as e:
            # Unknown is not low: a lab must not stop over a measurement. Said once.
            if str(e) != self._unmeasured:
                log.warning("cannot measure free space", path=str(self.path), error=str(e))
            self.free, self._unmeasured = None, str(e)
            self._set("")
            return
        self._unmeasured = ""
        if self.free >= self.min_free:
            self._set("")
        else:
            self._set(
                f"only {self.free / MIB:.0f} MiB free at {self.path} (scheduler.min_free_mb "
                f"is {self.min_free // MIB}): no new job is leased until space is freed"
            )

    def _set(self, low: str) -> None:
        was, first = self.low, not self._announced
        self.low, self._announced = low, True
        if low:
            if not was:
                log.warning("leasing paused: the state directory is low on space", reason=low)
            if low != was:  # /readyz and the host status show the latest figure
                self.bus.publish(
                    ComponentDown(component=COMPONENT, error=low, retry_in_s=CHECK_EVERY_S)
                )
        elif was or first:  # labd_component_up exists from the start
            self.bus.publish(ComponentUp(component=COMPONENT))
            if was:
                log.info(
                    "leasing resumed: the state directory has space again", free_bytes=self.free
                )
                self.on_recovered()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        free = GaugeMetricFamily(
            "labd_state_free_bytes",
            "Free space in the state directory, where jobs write and SQLite keeps its database.",
        )
        if self.free is not None:
            free.add_metric([], self.free)
        yield free


def existing(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists (the jobs' folder is made by the first job)."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path
