"""A retention pass on real folders: removing is asked for explicitly (an empty, misspelt or
mistyped request removes nothing), a folder that cannot be removed is not counted as removed,
stays counted as kept and the next-oldest jobs go in its place, and the log names the jobs."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import structlog
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from labd.artefacts import ArtefactKeeper
from labd.artefacts.keeper import LOGGED_JOB_IDS
from labd.auth import Audit
from labd.auth.principals import Principal, Role
from labd.config import ArtefactSettings
from labd.daemon.artefact_routes import ArtefactRoutes
from labd.daemon.guard import CALLER, Caller
from labd.events import EventBus
from labd.model import Job, JobState, TestSpec
from tests.unit.fakes import JobMemory

KIB = 1024
ADMIN = Principal("admin", Role.ADMIN)


def _du(path: Path) -> int:
    """Bytes on disk as GNU du counts them (an independent measure)."""
    out = subprocess.run(["du", "-s", "-B1", str(path)], capture_output=True, text=True)
    return int(out.stdout.split()[0])


def _jobs(state_dir: Path, ages_days: dict[str, float], kib: int = 300) -> list[Job]:
    """A finished job per id, ended that many days ago, with `kib` KiB of files in `sub/`."""
    now = datetime.now(UTC)
    jobs = []
    for job_id, days in ages_days.items():
        folder = state_dir / "jobs" / job_id / "sub"
        folder.mkdir(parents=True)
        (folder / "blob.bin").write_bytes(os.urandom(kib * KIB))
        (folder.parent / "job.log").write_text("log\n")
        ended = now - timedelta(days=days)
        spec = TestSpec(suite="s", test="t", scenario="x")
        jobs.append(Job(id=job_id, spec=spec, state=JobState.SUCCEEDED, submitted_at=ended,
                        finished_at=ended))  # fmt: skip
    return jobs


def _keeper(state_dir: Path, jobs: list[Job], **limits: Any) -> ArtefactKeeper:
    settings = ArtefactSettings.model_validate({"max_age_days": 0, **limits})
    return ArtefactKeeper(state_dir, settings, JobMemory(jobs), EventBus())  # type: ignore[arg-type]


@contextmanager
def _undeletable(file: Path) -> Iterator[None]:
    """`file` cannot be unlinked, for real: as root it is made immutable (chattr +i; skipped
    where the file system or the container refuses that), otherwise its folder is made
    read-only."""
    if os.geteuid() != 0:
        file.parent.chmod(0o500)
        try:
            yield
        finally:
            file.parent.chmod(0o700)
        return
    made = subprocess.run(["chattr", "+i", str(file)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"chattr +i refused here: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(file)], check=True)


async def _post_gc(routes: ArtefactRoutes, raw: bytes | None) -> tuple[int, Any]:
    @web.middleware
    async def as_admin(request: web.Request, handler: Any) -> web.StreamResponse:
        request[CALLER] = Caller(ADMIN, "test")
        return await handler(request)  # type: ignore[no-any-return]

    app = web.Application(middlewares=[as_admin])
    app.router.add_post("/api/v1/artefacts/gc", routes.gc)
    async with TestClient(TestServer(app)) as client:
        response = await client.post("/api/v1/artefacts/gc", data=raw)
        return response.status, await response.json()


def _routes(keeper: ArtefactKeeper, jobs: list[Job]) -> ArtefactRoutes:
    return ArtefactRoutes(JobMemory(jobs), keeper, "h", Audit(EventBus()))  # type: ignore[arg-type]


async def test_a_gc_request_removes_only_when_asked_exactly(tmp_path: Path) -> None:
    jobs = _jobs(tmp_path, {"old": 40})
    routes = _routes(_keeper(tmp_path, jobs, max_age_days=30), jobs)
    refused = {
        None: "request body is empty",
        b"{}": "dry_run is missing",
        b'{"dryRun": true}': "unknown key 'dryRun' (did you mean 'dry_run'?)",
        b'{"dryrun": true}': "unknown key 'dryrun' (did you mean 'dry_run'?)",
        b'{"dry_run": true, "x": 1}': "unknown key 'x';",
        b'{"dry_run": true, "dry_run": false}': "key 'dry_run' given more than once",
        b'{"dry_run": "false"}': "dry_run must be true or false, got 'false'",
        b'{"dry_run": 0}': "dry_run must be true or false, got 0",
        b"[]": 'request body must be {"dry_run": true|false}',
        b"[" * 100_000: "nested more than 64 levels deep",
    }
    for raw, words in refused.items():
        status, answer = await _post_gc(routes, raw)
        assert status == 400 and words in answer["errors"][0], (raw and raw[:30], answer)
        assert (tmp_path / "jobs" / "old").exists(), raw and raw[:30]

    status, dry = await _post_gc(routes, b'{"dry_run": true}')
    assert status == 200 and dry["dry_run"] is True
    assert [r["job_id"] for r in dry["removed"]] == ["old"]
    assert (tmp_path / "jobs" / "old").exists()
    status, done = await _post_gc(routes, b'{"dry_run": false}')
    assert status == 200 and [r["job_id"] for r in done["removed"]] == ["old"]
    assert not (tmp_path / "jobs" / "old").exists()


async def test_a_folder_that_cannot_be_removed_stays_counted_and_the_next_oldest_goes(
    tmp_path: Path,
) -> None:
    # Three folders of about 300 KiB; 700 KiB allowed: removing the oldest would be enough,
    # but it cannot go, so the next-oldest goes in its place.
    jobs = _jobs(tmp_path, {"stuck": 3, "next": 2, "newest": 1})
    keeper = _keeper(tmp_path, jobs, host_max_total_mb=700 / 1024)
    folders = tmp_path / "jobs"
    with (
        _undeletable(folders / "stuck" / "sub" / "blob.bin"),
        structlog.testing.capture_logs() as logs,
    ):
        report = await keeper.collect(dry_run=False)
        left = _du(folders / "stuck")

    assert [r.job_id for r in report.removed] == ["next"]
    assert not (folders / "next").exists() and (folders / "newest").exists()
    (failure,) = report.failed
    # The file that would not go, as the immutable attribute or the read-only folder says it.
    assert failure in (
        "stuck: sub/blob.bin: Operation not permitted",
        "stuck: sub/blob.bin: Permission denied",
    )
    assert report.kept_bytes == left + _du(folders / "newest")
    assert keeper.usage["s"].bytes == report.kept_bytes  # what /metrics shows, as du counts
    assert keeper.usage["s"].jobs == 2
    (warning,) = [e for e in logs if e["event"] == "artefacts of a job could not be removed"]
    assert warning["log_level"] == "warning" and warning["job_id"] == "stuck"
    assert warning["bytes_left"] == left and warning["error"] == failure.removeprefix("stuck: ")
    (summary,) = [e for e in logs if e["event"] == "artefacts removed by the retention limits"]
    assert summary["jobs"] == 1 and summary["job_ids"] == ["next"] and summary["failed"] == 1


async def test_both_passes_log_the_removed_job_ids_up_to_a_bound(tmp_path: Path) -> None:
    many = LOGGED_JOB_IDS + 5
    jobs = _jobs(tmp_path, {f"j{n:03}": 40 + n for n in range(many)}, kib=1)
    keeper = _keeper(tmp_path, jobs, max_age_days=30)
    with structlog.testing.capture_logs() as logs:
        await keeper.collect(dry_run=False)  # as the periodic pass calls it
    (line,) = [e for e in logs if e["event"] == "artefacts removed by the retention limits"]
    assert line["jobs"] == many and len(line["job_ids"]) == LOGGED_JOB_IDS
    assert line["job_ids"][0] == f"j{many - 1:03}"  # the oldest first
    assert line["job_ids_left_out"] == 5 and line["trigger"] == "periodic"

    more = _jobs(tmp_path, {"asked": 50})
    routes = _routes(_keeper(tmp_path, more, max_age_days=30), more)
    with structlog.testing.capture_logs() as logs:
        assert (await _post_gc(routes, b'{"dry_run": false}'))[0] == 200
    (line,) = [e for e in logs if e["event"] == "artefacts removed by the retention limits"]
    assert line["job_ids"] == ["asked"] and line["asked_by"] == "admin"
