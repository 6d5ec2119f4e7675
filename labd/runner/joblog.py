"""The job's own log, with the line Treeherder's log parser reads."""

from __future__ import annotations

import asyncio
from pathlib import Path

from labd.config import PerfherderSettings
from labd.model import Job
from labd.perfherder import perfherder_line
from labd.store import Store, results_view


async def write_job_log(
    store: Store, job: Job, workdir: Path, settings: PerfherderSettings
) -> Path:
    """The job's own log (`job.log` in its folder): the `PERFHERDER_DATA:` line Treeherder's
    log parser looks for, ready to upload with the CI task's artifacts."""
    results = await results_view(store, job)
    line = perfherder_line(results, settings)
    path = workdir / "job.log"

    def write() -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    await asyncio.to_thread(write)
    return path
