"""A job's artefacts, read-only, behind the console's sign-in: the WebM of an iteration, its
heat map and per-frame progress, and filmstrip stills of the frames where visual progress
changed (cut from the WebM on demand, kept in memory for the last few videos).

Only files under the job's own folder in the state directory are served, whatever path an
iteration's record names; the video is served with byte ranges, so a player can seek.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

from aiohttp import web

from labd.model import Iteration, Job
from labd.store import Store

KINDS = {"video": "video/webm", "heatmap": "image/png", "progress": "application/json"}
FILMSTRIP_WIDTH = 240
FILMSTRIP_MOST = 24  # stills in one filmstrip: the changes, evenly thinned past this
KEPT_FILMSTRIPS = 8


class ArtefactFiles:
    """Finds and serves the artefacts the runner kept for a job's iterations."""

    def __init__(self, store: Store, jobs_dir: Path) -> None:
        self.store, self.jobs_dir = store, jobs_dir
        self._stills: OrderedDict[tuple[str, float], dict[int, bytes]] = OrderedDict()

    async def with_artefacts(self, job: Job) -> list[Iteration]:
        """The last attempt's iterations that kept artefacts, in order."""
        its = await self.store.iterations(job.id, attempt=job.attempts)
        return [it for it in its if it.fingerprint.get("artifacts")]

    def path(self, job: Job, iteration: Iteration, kind: str) -> Path | None:
        """The artefact's file if it is one of the job's own and still there."""
        named = iteration.fingerprint.get("artifacts", {}).get(kind)
        if kind not in KINDS or not isinstance(named, str):
            return None
        own = (self.jobs_dir / job.id).resolve()
        found = Path(named).resolve()
        if not found.is_relative_to(own) or not found.is_file():
            return None
        return found

    async def locate(self, request: web.Request, kind: str) -> tuple[Job, Iteration, Path]:
        job_id = request.match_info["id"]
        job = await self.store.get_job(job_id)
        if job is None:
            raise web.HTTPNotFound(text=f"no job {job_id!r}\n")
        try:
            index = int(request.match_info["iteration"])
        except ValueError:
            raise web.HTTPNotFound(text="an iteration is a number\n") from None
        found = [it for it in await self.with_artefacts(job) if it.index == index]
        path = await asyncio.to_thread(self.path, job, found[0], kind) if found else None
        if path is None:
            raise web.HTTPNotFound(
                text=f"job {job_id!r} kept no {kind} for iteration {index} on this host\n"
            )
        return job, found[0], path

    async def serve(self, request: web.Request) -> web.StreamResponse:
        kind = request.match_info["kind"]
        if kind not in KINDS:
            raise web.HTTPNotFound(text=f"no artefact kind {kind!r} ({', '.join(KINDS)})\n")
        _, _, path = await self.locate(request, kind)
        return web.FileResponse(path, headers={"Content-Type": KINDS[kind]})

    async def still(self, request: web.Request) -> web.Response:
        """One filmstrip still (JPEG), by its frame number in the video."""
        _, _, video = await self.locate(request, "video")
        _, _, progress = await self.locate(request, "progress")
        try:
            frame = int(request.match_info["frame"])
        except ValueError:
            raise web.HTTPNotFound(text="a frame is a number\n") from None
        stills = await self._filmstrip(video, progress)
        if frame not in stills:
            raise web.HTTPNotFound(text=f"frame {frame} is not in the filmstrip\n")
        return web.Response(body=stills[frame], content_type="image/jpeg")

    async def _filmstrip(self, video: Path, progress: Path) -> dict[int, bytes]:
        key = (str(video), (await asyncio.to_thread(video.stat)).st_mtime)
        if (kept := self._stills.get(key)) is not None:
            self._stills.move_to_end(key)
            return kept
        frames = await asyncio.to_thread(read_progress, progress)
        wanted = {k for k, _, _ in changes(frames)}
        stills = await asyncio.to_thread(cut_stills, video, wanted)
        self._stills[key] = stills
        while len(self._stills) > KEPT_FILMSTRIPS:
            self._stills.popitem(last=False)
        return stills


def read_progress(path: Path) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = json.loads(path.read_text())["frames"]
    return frames


def changes(frames: list[dict[str, Any]]) -> list[tuple[int, float, float]]:
    """(video frame, ms, progress) of the first frame and of each frame where the visual
    progress changed; the video holds the analysed frames in order, so frame k of the video is
    the k-th of the progress file. Thinned evenly to FILMSTRIP_MOST, the last always kept."""
    out: list[tuple[int, float, float]] = []
    last = None
    for k, f in enumerate(frames):
        if f["progress"] != last:
            out.append((k, float(f["t_ms"]), float(f["progress"])))
            last = f["progress"]
    if len(out) > FILMSTRIP_MOST:
        step = len(out) / (FILMSTRIP_MOST - 1)
        out = [out[int(i * step)] for i in range(FILMSTRIP_MOST - 1)] + [out[-1]]
    return out


def cut_stills(video: Path, wanted: set[int]) -> dict[int, bytes]:
    """JPEG stills of the `wanted` frames of a video, read in one pass (a WebM does not seek
    to an exact frame reliably)."""
    import cv2

    stills: dict[int, bytes] = {}
    capture = cv2.VideoCapture(str(video))
    try:
        k = 0
        while len(stills) < len(wanted):
            ok, image = capture.read()
            if not ok:
                break
            if k in wanted:
                height, width = image.shape[:2]
                size = (FILMSTRIP_WIDTH, max(1, round(height * FILMSTRIP_WIDTH / width)))
                small = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
                stills[k] = cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, 80])[1].tobytes()
            k += 1
    finally:
        capture.release()
    return stills
