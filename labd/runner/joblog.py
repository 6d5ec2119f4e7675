"""The job's own log, with the line Treeherder's log parser reads."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import TextIO

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
        with open_own_file(path) as out:
            out.write(line + "\n")

    await asyncio.to_thread(write)
    return path


def open_own_file(path: Path) -> TextIO:
    """`path` opened to append, as a regular file of its own. The job's folder belongs to the
    account its program ran as, which may have left anything at that name: a link (labd, as
    root, appended to the file it named), a named pipe (the write waited for a reader forever,
    holding a thread), a second name of another file. Each is refused with OSError."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        raise OSError(e.errno, f"{path.name}: not a file labd may write ({e.strerror})") from e
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise OSError(f"{path.name}: not a file labd may write (the program left another kind)")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "a", encoding="utf-8")
