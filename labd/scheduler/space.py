"""Free space where jobs write their folders (and SQLite its database): below the configured
floor no new job is leased, so one job that filled the disk costs nobody else an attempt and
no device its good name. Leasing resumes by itself once space is freed."""

from __future__ import annotations

import asyncio
import errno
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import structlog
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from labd.events import ComponentDown, ComponentUp, EventBus
from labd.store import causes, free_bytes

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
        unwritable = await asyncio.to_thread(write_problem, existing(self.path))
        if unwritable:
            self._set(f"{unwritable}: no new job is leased until it can be written again")
        elif self.free >= self.min_free:
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
                log.warning("leasing paused: the jobs' folder cannot take them", reason=low)
            if low != was:  # /readyz and the host status show the latest figure
                self.bus.publish(
                    ComponentDown(component=COMPONENT, error=low, retry_in_s=CHECK_EVERY_S)
                )
        elif was or first:  # labd_component_up exists from the start
            self.bus.publish(ComponentUp(component=COMPONENT))
            if was:
                log.info(
                    "leasing resumed: the jobs' folder can take them again", free_bytes=self.free
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


# What a write in the jobs' folder fails with when the fault is the host's storage: read-only,
# denied, gone (a folder removed by hand), an I/O error, full.
STORAGE_ERRNOS = frozenset(
    {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT, errno.EIO, errno.ENOSPC, errno.EDQUOT}
)


def write_problem(folder: Path) -> str:
    """Why a file cannot be made in `folder` ("" when it can): a read-only remount leaves
    free space, so space alone does not say the folder can take a job."""
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".labd-probe-"):
            return ""
    except OSError as e:
        return f"cannot write in {folder}: {e.strerror or e}"


def storage_fault(error: BaseException, folder: Path) -> OSError | None:
    """The storage error, among `error` and its causes, about a path in `folder` (the jobs'
    folder): the host's condition, not the device's nor the job's."""
    for cause in causes(error):
        if (
            isinstance(cause, OSError)
            and cause.errno in STORAGE_ERRNOS
            and cause.filename
            and Path(str(cause.filename)).resolve().is_relative_to(folder.resolve())
        ):
            return cause
    return None
