"""A job's artefacts in the console: the same files, names and checks as the API's artefact
routes (`labd.artefacts`: no link followed, nothing outside the job's folder, byte ranges so
a player can seek), behind the console's sign-in instead of a bearer token; and filmstrip
stills of the frames where visual progress changed, cut from the WebM on demand and kept in
memory for the last few videos."""

from __future__ import annotations

import asyncio
import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiohttp import web
from pydantic import BaseModel, ConfigDict, ValidationError

from labd.artefacts import (
    INLINE,
    Artefact,
    ArtefactError,
    ArtefactPage,
    artefact_page,
    content_type,
    open_artefact,
    path_problem,
)
from labd.daemon.artefact_routes import OpenedFile

FILMSTRIP_WIDTH = 240
FILMSTRIP_MOST = 24  # stills in one filmstrip: the changes, evenly thinned past this
KEPT_FILMSTRIPS = 8
PAGE_FILES = 200  # files the job page lists; the rest are counted and left to the API
EVIDENCE_KINDS = frozenset({"video", "heatmap", "progress"})
Evidence = dict[str, Artefact]  # kind (video, heatmap, progress) -> file, of one iteration


def url(job_id: str, name: str) -> str:
    """Where the console serves one artefact."""
    return f"/console/jobs/{quote(job_id, safe='')}/artefacts/{quote(name)}"


def still_url(job_id: str, video: str, frame: int) -> str:
    return f"/console/jobs/{quote(job_id, safe='')}/still?video={quote(video)}&frame={frame}"


class ProgressError(ValueError):
    """A progress.json that is not what an analysis writes: the measured program can write
    one, so its shape is checked before anything reads it."""


class _Frame(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)

    t_ms: float
    progress: float


class _Progress(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    frames: list[_Frame]


class ArtefactFiles:
    """Lists and serves the artefacts a job keeps on this host."""

    def __init__(self, jobs_dir: Path) -> None:
        self.jobs_dir = jobs_dir
        self._stills: OrderedDict[tuple[str, str, float], dict[int, bytes]] = OrderedDict()
        # One filmstrip cut at a time: a page asks for all its stills at once, and the first
        # request's cut serves the rest from memory.
        self._cutting = asyncio.Lock()

    async def listing(self, job_id: str) -> ArtefactPage:
        """The first PAGE_FILES files (the job page's table), how many in all, and every
        video, heat map and progress curve (the evidence), walked in a thread."""
        return await asyncio.to_thread(
            artefact_page, self.jobs_dir, job_id, 0, PAGE_FILES, EVIDENCE_KINDS
        )

    async def serve(self, request: web.Request) -> web.StreamResponse:
        job_id, name = request.match_info["id"], request.match_info["name"]
        try:
            fd, _ = await asyncio.to_thread(open_artefact, self.jobs_dir, job_id, name)
        except ArtefactError as e:
            return web.Response(status=e.status, text=f"{e}\n")
        kind = content_type(name)
        headers = {
            "Content-Type": kind,
            # A file a job wrote is never a page of the console's origin. Not cached, like every
            # console answer (the headers middleware adds Cache-Control: no-store).
            "Content-Security-Policy": "sandbox; default-src 'none'",
        }
        if kind not in INLINE:
            headers["Content-Disposition"] = 'attachment; filename="{}"'.format(
                name.rsplit("/", 1)[-1].replace('"', "")
            )
        return OpenedFile(fd, headers)

    async def still(self, request: web.Request) -> web.Response:
        """One filmstrip still (JPEG): ?video=NAME&frame=N, N a frame of the video where
        visual progress changed."""
        job_id, video = request.match_info["id"], request.query.get("video", "")
        try:
            frame = int(request.query.get("frame", ""))
        except ValueError:
            return web.Response(status=400, text="frame: a number of the video's frames\n")
        if problem := path_problem(video) or (
            None if video.endswith(".webm") else "video: a .webm artefact"
        ):
            return web.Response(status=400, text=f"{problem}\n")
        progress = f"{video.rsplit('/', 1)[0]}/progress.json" if "/" in video else "progress.json"
        try:
            stills = await self._filmstrip(job_id, video, progress)
        except ArtefactError as e:
            return web.Response(status=e.status, text=f"{e}\n")
        except ProgressError as e:
            return web.Response(status=422, text=f"{progress}: {e}; no frames\n")
        if frame not in stills:
            return web.Response(status=404, text=f"frame {frame} is not in the filmstrip\n")
        return web.Response(body=stills[frame], content_type="image/jpeg")

    async def progress(self, job_id: str, name: str) -> list[dict[str, Any]]:
        """The per-frame progress an analysis kept (`frames` of progress.json), each frame a
        dict with float `t_ms` and `progress`. Raises ProgressError for a malformed file."""
        fd, _ = await asyncio.to_thread(open_artefact, self.jobs_dir, job_id, name)
        return await asyncio.to_thread(_read_frames, fd)

    async def _filmstrip(self, job_id: str, video: str, progress: str) -> dict[int, bytes]:
        async with self._cutting:
            return await self._cut(job_id, video, progress)

    async def _cut(self, job_id: str, video: str, progress: str) -> dict[int, bytes]:
        fd, info = await asyncio.to_thread(open_artefact, self.jobs_dir, job_id, video)
        try:
            key = (job_id, video, info.st_mtime)
            if (kept := self._stills.get(key)) is not None:
                self._stills.move_to_end(key)
                return kept
            frames = await self.progress(job_id, progress)
            wanted = {k for k, _, _ in changes(frames)}
            # Read through the descriptor: the very file checked, whatever its path now.
            stills = await asyncio.to_thread(cut_stills, Path(f"/proc/self/fd/{fd}"), wanted)
        finally:
            os.close(fd)
        self._stills[key] = stills
        while len(self._stills) > KEPT_FILMSTRIPS:
            self._stills.popitem(last=False)
        return stills


def evidence(listing: list[Artefact]) -> dict[tuple[str, int], Evidence]:
    """The iterations (variant, index) that kept a video, heat map or progress, in order."""
    found: dict[tuple[str, int], Evidence] = {}
    for artefact in listing:
        if artefact.iteration is not None and artefact.kind in EVIDENCE_KINDS:
            found.setdefault((artefact.variant, artefact.iteration), {})[artefact.kind] = artefact
    return dict(sorted(found.items(), key=lambda item: (item[0][1], item[0][0])))


def _read_frames(fd: int) -> list[dict[str, Any]]:
    with os.fdopen(fd, "rb") as file:
        data = file.read()
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as e:  # not JSON, not UTF-8, nested past the stack
        raise ProgressError(f"not JSON ({type(e).__name__})") from None
    if not isinstance(document, dict):
        raise ProgressError(f"expected an object with 'frames', got a {type(document).__name__}")
    try:
        parsed = _Progress.model_validate(document)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ProgressError(f"{where}: {first['msg'][:1].lower()}{first['msg'][1:]}") from None
    return [frame.model_dump() for frame in parsed.frames]


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
