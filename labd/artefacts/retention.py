"""Which jobs' artefacts go: a pure function of what is on disk, the limits and the time.

A job's folder is removed whole, and only once the job has ended. In order:
1. by age: older than its suite's `max_age_days` (from the job's end);
2. by a suite's size: over its `max_total_mb`, its oldest jobs first;
3. by the host's size: over `host_max_total_mb`, the oldest jobs first, whatever the suite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

MB = 1024 * 1024
DAY = 86400.0


@dataclass(frozen=True)
class JobFolder:
    """A job's artefacts as found on disk. `ended` is the job's end (Unix time), or the
    folder's last change when the store does not know the job."""

    job_id: str
    suite: str
    ended: float
    bytes: int
    finished: bool  # False while the job may still write (queued again, leased, running)


@dataclass(frozen=True)
class Removal:
    job_id: str
    suite: str
    bytes: int
    age_days: float
    reason: str


Limits = Callable[[str], tuple[float, float]]
"""A suite's (max age in days, max MB), 0 meaning no limit."""


def plan(
    folders: Iterable[JobFolder], limits: Limits, host_max_mb: float, now: float
) -> list[Removal]:
    """The removals the limits call for, oldest first within each step."""
    every = list(folders)
    kept = sorted((f for f in every if f.finished), key=lambda f: (f.ended, f.job_id))
    # Jobs still running take disk too, though they cannot give any back yet.
    busy: dict[str, int] = {}
    for f in every:
        if not f.finished:
            busy[f.suite] = busy.get(f.suite, 0) + f.bytes
    removals: list[Removal] = []

    def remove(folder: JobFolder, reason: str) -> None:
        age = max(0.0, now - folder.ended) / DAY
        removals.append(Removal(folder.job_id, folder.suite, folder.bytes, age, reason))

    still: list[JobFolder] = []
    for folder in kept:
        max_age = limits(folder.suite)[0]
        if max_age > 0 and now - folder.ended > max_age * DAY:
            remove(folder, f"older than {max_age:g} days")
        else:
            still.append(folder)
    by_suite: dict[str, list[JobFolder]] = {}
    for folder in still:
        by_suite.setdefault(folder.suite, []).append(folder)
    gone: set[str] = set()
    for suite, folders in sorted(by_suite.items()):
        max_mb = limits(suite)[1]
        total = sum(f.bytes for f in folders) + busy.get(suite, 0)
        for folder in folders:  # oldest first
            if max_mb <= 0 or total <= max_mb * MB:
                break
            remove(folder, f"suite {suite or '(unknown)'} over {max_mb:g} MB")
            gone.add(folder.job_id)
            total -= folder.bytes
    if host_max_mb > 0:
        left = [f for f in still if f.job_id not in gone]
        total = sum(f.bytes for f in left) + sum(busy.values())
        for folder in left:
            if total <= host_max_mb * MB:
                break
            remove(folder, f"this host's artefacts over {host_max_mb:g} MB")
            total -= folder.bytes
    return removals
