"""The daemon's keeper of artefacts: applies the retention limits every `gc_interval_s` (and
when asked, `labd artefacts gc`), and knows how much disk each suite's artefacts take."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog

from labd.artefacts.files import api_path, artefact_page, disk_usage, jobs_folder
from labd.artefacts.retention import JobFolder, Removal, plan
from labd.config import ArtefactSettings
from labd.events import Event, EventBus, JobFinished, dispatch
from labd.model import Job, id_problem
from labd.store import Store
from labd.tasks import TaskSet

log = structlog.get_logger("labd.artefacts")

UNKNOWN_SUITE = "(unknown)"  # a folder whose job the store does not know
# Files linked in a job's MQTT result message, in name order: about 25 KiB of links, well
# inside the 256 KiB a message may take; the rest are counted, and listed by the API.
RESULT_LINKS = 100
# Job ids a pass's log line names; the rest are counted (a first pass on a full disk may remove
# thousands, and a log line should stay readable).
LOGGED_JOB_IDS = 50


@dataclass
class GcReport:
    """What one pass removed (or, dry, would remove) and what it left."""

    dry_run: bool
    removed: list[Removal] = field(default_factory=list)
    freed_bytes: int = 0
    kept_bytes: int = 0
    failed: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "removed": [vars(r) for r in self.removed],
            "freed_bytes": self.freed_bytes,
            "kept_bytes": self.kept_bytes,
            "failed": self.failed,
        }


@dataclass
class SuiteUsage:
    bytes: int = 0
    jobs: int = 0
    removed_bytes: int = 0  # by every pass since the start


class ArtefactKeeper:
    """A component. `usage` (per suite) is replaced whole, so a scrape may read it any time."""

    name = "artefacts"

    def __init__(
        self, state_dir: Path, settings: ArtefactSettings, store: Store, bus: EventBus
    ) -> None:
        self.jobs_dir = jobs_folder(state_dir)
        self.settings, self.store, self.bus = settings, store, bus
        # Label sets known from the start: the configured suites.
        self.usage: dict[str, SuiteUsage] = {s: SuiteUsage() for s in settings.suites}
        self._ended: dict[str, tuple[str, float]] = {}  # finished jobs: (suite, end time)
        self._folders: dict[str, JobFolder] = {}  # as last measured
        self._lock = asyncio.Lock()
        self._events = bus.subscribe("artefacts", JobFinished)
        self._tasks = TaskSet("artefacts")

    async def start(self) -> None:
        await self.refresh()
        self._tasks.supervise("gc", self._gc_loop, self.bus)
        self._tasks.supervise("events", lambda: dispatch(self._events, self._on_event), self.bus)

    async def stop(self, grace: float) -> None:
        self.bus.unsubscribe(self._events)
        await self._tasks.cancel_all()

    async def links(self, job: Job, host: str) -> dict[str, Any]:
        """The job's artefacts with their full URLs, as the MQTT result's fields: the first
        RESULT_LINKS files in name order (`artefacts`), how many more there are
        (`artefacts_left_out`) and the URL of the API's full, paged, listing
        (`artefacts_listing`); when `artefacts.base_url` is set and they are on this host,
        else nothing."""
        base = self.settings.base_url
        if not base or job.lease_owner not in ("", host):
            return {}
        page = await asyncio.to_thread(artefact_page, self.jobs_dir, job.id, 0, RESULT_LINKS)
        links = [
            {"name": a.name, "kind": a.kind, "content_type": a.content_type, "size": a.size,
             "url": base + api_path(job.id, a.name)}
            for a in page.artefacts
        ]  # fmt: skip
        listing = base + api_path(job.id, "").removesuffix("/")
        return {
            "artefacts": links,
            "artefacts_left_out": page.left_out,
            "artefacts_listing": listing,
        }

    async def _gc_loop(self) -> None:
        # A pass at the start too: a daemon restarted more often than gc_interval_s applies
        # the limits all the same.
        while True:
            await self.collect(dry_run=False)  # logs what it removed
            await asyncio.sleep(self.settings.gc_interval_s)

    async def _on_event(self, event: Event) -> None:
        # A finished job's files are complete now: count them without waiting for a pass.
        if isinstance(event, JobFinished):
            async with self._lock:
                measured = await asyncio.to_thread(self._measure, event.job_id)
                for job_id, (size, changed) in measured.items():
                    suite, ended, finished = await self._job_of(job_id, changed)
                    self._folders[job_id] = JobFolder(job_id, suite, ended, size, finished)
                self._count()

    async def folders(self) -> list[JobFolder]:
        """Every job folder on this host, with its suite, end and size (measured now)."""
        found = await asyncio.to_thread(self._measure)
        folders = []
        for job_id, (size, changed) in sorted(found.items()):
            suite, ended, finished = await self._job_of(job_id, changed)
            folders.append(JobFolder(job_id, suite, ended, size, finished))
        self._folders = {f.job_id: f for f in folders}
        return folders

    def _measure(self, only: str = "") -> dict[str, tuple[int, float]]:
        """(bytes on disk, last change) of every job folder, or of `only`'s."""
        found: dict[str, tuple[int, float]] = {}
        try:
            entries = list(os.scandir(self.jobs_dir))
        except FileNotFoundError:
            return found
        for entry in entries:
            if only and entry.name != only:
                continue
            if entry.is_dir(follow_symlinks=False) and not id_problem(entry.name):
                changed = entry.stat(follow_symlinks=False).st_mtime
                found[entry.name] = (disk_usage(Path(entry.path)), changed)
        return found

    async def _job_of(self, job_id: str, changed: float) -> tuple[str, float, bool]:
        if (known := self._ended.get(job_id)) is not None:
            return known[0], known[1], True
        job = await self.store.get_job(job_id)
        if job is None:
            return UNKNOWN_SUITE, changed, True
        if not job.state.terminal:
            return job.spec.suite, changed, False
        ended = job.finished_at.timestamp() if job.finished_at else changed
        self._ended[job_id] = (job.spec.suite, ended)
        return job.spec.suite, ended, True

    async def refresh(self) -> None:
        """Measure every folder again (the figures /metrics shows)."""
        async with self._lock:
            await self.folders()
            self._count()

    def _count(self) -> None:
        usage = {s: SuiteUsage(removed_bytes=u.removed_bytes) for s, u in self.usage.items()}
        for folder in self._folders.values():
            entry = usage.setdefault(folder.suite, SuiteUsage())
            entry.bytes += folder.bytes
            entry.jobs += 1
        self.usage = usage

    async def collect(self, dry_run: bool, asked_by: str = "") -> GcReport:
        """Apply the limits now; dry, only say what would go. `asked_by`: the principal who
        asked for this pass (empty: the periodic one), for the log."""
        async with self._lock:
            folders = {f.job_id: f for f in await self.folders()}
            report = GcReport(dry_run)
            trigger = {"asked_by": asked_by} if asked_by else {"trigger": "periodic"}
            if dry_run:
                report.removed = self._plan(folders.values())
                report.freed_bytes = sum(r.bytes for r in report.removed)
            else:
                await self._remove_planned(folders, report, trigger)
            report.kept_bytes = sum(f.bytes for f in folders.values())
            if not dry_run:
                _log_pass(report, trigger)
            self._count()
            return report

    def _plan(self, folders: Iterable[JobFolder]) -> list[Removal]:
        settings = self.settings
        return plan(folders, settings.limits, settings.host_max_total_mb, time.time())

    async def _remove_planned(
        self, folders: dict[str, JobFolder], report: GcReport, trigger: dict[str, str]
    ) -> None:
        """Remove what the limits call for from `folders` (left with what stays). A folder that
        cannot be removed stays, counted with what is left of it, and the limits are applied
        again: the next-oldest jobs go in its place. Each failure takes one folder out of the
        running, so this ends."""
        while True:
            for removal in self._plan(folders.values()):
                left, problem = await asyncio.to_thread(self._remove, removal.job_id)
                freed = max(0, removal.bytes - left)  # a failed removal may have freed some
                report.freed_bytes += freed
                self.usage.setdefault(removal.suite, SuiteUsage()).removed_bytes += freed
                if problem:
                    self._could_not_remove(folders, removal, left, problem, trigger)
                    report.failed.append(f"{removal.job_id}: {problem}")
                    break  # plan again: what the limits call for has changed
                report.removed.append(removal)
                del folders[removal.job_id]
                self._ended.pop(removal.job_id, None)
                self._folders.pop(removal.job_id, None)
            else:
                return

    def _could_not_remove(
        self,
        folders: dict[str, JobFolder],
        removal: Removal,
        left: int,
        problem: str,
        trigger: dict[str, str],
    ) -> None:
        log.warning(
            "artefacts of a job could not be removed",
            job_id=removal.job_id,
            suite=removal.suite,
            error=problem,
            bytes_left=left,
            **trigger,
        )
        remaining = replace(folders[removal.job_id], bytes=left)
        self._folders[removal.job_id] = remaining  # what /metrics counts: what du finds
        # Planned from now on as a job still running is: counted, never chosen again.
        folders[removal.job_id] = replace(remaining, finished=False)

    def _remove(self, job_id: str) -> tuple[int, str]:
        """Remove a job's folder: (bytes left behind, why), (0, "") when all went."""
        folder = self.jobs_dir / job_id
        failures: list[tuple[str, BaseException]] = []
        shutil.rmtree(folder, onerror=lambda _f, path, exc: failures.append((path, exc[1])))
        if not failures:
            return 0, ""
        # A folder left non-empty by a file that would not go says nothing more: the file does.
        causes = [f for f in failures if getattr(f[1], "errno", None) != errno.ENOTEMPTY]
        why = [f"{os.path.relpath(path, folder)}: {_reason(e)}" for path, e in causes or failures]
        return disk_usage(folder), "; ".join(why[:3])


def _reason(error: BaseException) -> str:
    return (error.strerror if isinstance(error, OSError) else None) or str(error)


def _log_pass(report: GcReport, trigger: dict[str, str]) -> None:
    """What a pass removed, by job id (the first LOGGED_JOB_IDS of them, the rest counted)."""
    if not report.removed and not report.failed:
        return
    ids = [r.job_id for r in report.removed]
    log.info(
        "artefacts removed by the retention limits",
        jobs=len(ids),
        job_ids=ids[:LOGGED_JOB_IDS],
        job_ids_left_out=max(0, len(ids) - LOGGED_JOB_IDS),
        freed_bytes=report.freed_bytes,
        kept_bytes=report.kept_bytes,
        failed=len(report.failed),
        **trigger,
    )
