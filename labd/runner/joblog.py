"""The job's own log, with the line Treeherder's log parser reads."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from labd.config import PerfherderSettings
from labd.model import Job
from labd.perfherder import perfherder, perfherder_line
from labd.store import Store, results_view


async def write_job_log(
    store: Store, job: Job, workdir: Path, settings: PerfherderSettings
) -> Path:
    """The job's own log (`job.log` in its folder): the `PERFHERDER_DATA:` line Treeherder's
    log parser looks for, ready to upload with the CI task's artifacts."""
    results = await results_view(store, job)
    line = perfherder_line(perfherder(results, settings))
    path = workdir / "job.log"

    def write() -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        replace_own_file(path, line + "\n")

    await asyncio.to_thread(write)
    return path


def replace_own_file(path: Path, text: str) -> None:
    """`path` made a new regular file of labd's holding `text`, whatever was there. The job's
    folder belongs to the account its program ran as, which may have left anything at that
    name: a link (labd, as root, appended to the file it named), a named pipe (the write
    waited for a reader forever), a second name of another file, or a file of its own with a
    PERFHERDER_DATA line ahead of labd's. A file written beside it (a name no one else can
    have opened: O_EXCL) and renamed over it replaces the name without following or opening
    what it named; a folder there is an OSError."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    temporary = Path(name)
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
