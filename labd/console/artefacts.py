"""A job's artefacts in the console: the same files, names and checks as the API's artefact
routes (`labd.artefacts`: no link followed, nothing outside the job's folder, byte ranges so
a player can seek), behind the console's sign-in instead of a bearer token; and filmstrip
stills of the frames where visual progress changed, cut from the WebM on demand by a child
process with bounded size, memory and time (`labd.console.stills`), and kept in memory for the
last few videos."""

from __future__ import annotations

import asyncio
import json
import os
import textwrap
from collections import OrderedDict
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from labd.artefacts import (
    INLINE,
    Artefact,
    ArtefactError,
    ArtefactPage,
    artefact_page,
    content_type,
    encoded_separator,
    open_artefact,
    path_problem,
)
from labd.console.stills import FILMSTRIP_WIDTH, Stills, StillsRefused, cut
from labd.daemon.artefact_routes import OpenedFile
from labd.tasks import TaskSet

FILMSTRIP_MOST = 24  # stills in one filmstrip: the changes, evenly thinned past this
KEPT_FILMSTRIPS = 8
CUTTERS = 2  # videos cut at once: one slow video (30 s at most) leaves the other slot free
PAGE_FILES = 200  # files the job page lists; the rest are counted and left to the API
EVIDENCE_KINDS = frozenset({"video", "heatmap", "progress"})
# labd.capture writes about 150 bytes a frame: 4 MiB is some 28,000 frames, eight minutes
# of a 60 fps capture. Reading 7 MB of 200,000 frames took a second of the daemon's time.
PROGRESS_MOST_BYTES = 4 * 1024 * 1024
CURVE_MOST = 1000  # points of the visual-progress curve: past the pixels of its width
KEPT_PROGRESS = 8  # progress files kept parsed (a page and its stills read each)
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
    # A share of the final frame: labd.capture writes 0.0 to 1.0 (the last frame is 1.0).
    progress: float = Field(ge=0.0, le=1.0)


class _Progress(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    frames: list[_Frame]


Filmstrip = Stills | StillsRefused  # the stills, or why there are none
# job, video, (the video's mtime, progress.json's mtime and size): the stills cut are the
# frames where progress.json says progress changed, so a new progress.json cuts them again.
_Key = tuple[str, str, tuple[float, int, int]]


class ArtefactFiles:
    """Lists and serves the artefacts a job keeps on this host."""

    def __init__(self, jobs_dir: Path) -> None:
        self.jobs_dir = jobs_dir
        self._stills: OrderedDict[_Key, Filmstrip] = OrderedDict()
        # A page asks for all its stills at once: the first request starts the video's cut,
        # the others wait for that same task. A refusal is kept like stills: not tried again.
        self._cutting: dict[_Key, asyncio.Task[Filmstrip]] = {}
        self._cutters = asyncio.Semaphore(CUTTERS)
        self._tasks = TaskSet("console-stills")
        self._frames: OrderedDict[tuple[str, str, int, int], list[dict[str, Any]]] = OrderedDict()

    async def close(self, _: web.Application | None = None) -> None:
        """Stop the cuts under way (their children are killed)."""
        await self._tasks.cancel_all()

    async def listing(self, job_id: str) -> ArtefactPage:
        """The first PAGE_FILES files (the job page's table), how many in all, and every
        video, heat map and progress curve (the evidence), walked in a thread."""
        return await asyncio.to_thread(
            artefact_page, self.jobs_dir, job_id, 0, PAGE_FILES, EVIDENCE_KINDS
        )

    async def serve(self, request: web.Request) -> web.StreamResponse:
        job_id, name = request.match_info["id"], request.match_info["name"]
        if problem := encoded_separator(request.raw_path):
            return web.Response(status=400, text=f"{problem}\n")
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
        if isinstance(stills, StillsRefused):
            # An image, so that the page's <img> shows the reason where the still would be.
            return web.Response(
                status=422, body=refusal_image(str(stills)), content_type="image/svg+xml"
            )
        if why := stills.past_end(frame):  # an image again: the page's <img> says why
            return web.Response(
                status=404, body=refusal_image(why, "No still"), content_type="image/svg+xml"
            )
        if frame not in stills.jpegs:
            return web.Response(status=404, text=f"frame {frame} is not in the filmstrip\n")
        return web.Response(body=stills.jpegs[frame], content_type="image/jpeg")

    async def progress(self, job_id: str, name: str) -> list[dict[str, Any]]:
        """The per-frame progress an analysis kept (`frames` of progress.json), each frame a
        dict with float `t_ms` and `progress`. Raises ProgressError for a malformed file."""
        fd, info = await asyncio.to_thread(open_artefact, self.jobs_dir, job_id, name)
        key = (job_id, name, info.st_mtime_ns, info.st_size)
        if (known := self._frames.get(key)) is not None:
            os.close(fd)
            self._frames.move_to_end(key)
            return known
        frames = await asyncio.to_thread(_read_frames, fd)
        self._frames[key] = frames
        while len(self._frames) > KEPT_PROGRESS:
            self._frames.popitem(last=False)
        return frames

    def refused(self, job_id: str, video: str) -> str:
        """Why the video's filmstrip was refused, if it was ('' when not, or not yet cut)."""
        found = self.kept(job_id, video)
        return str(found) if isinstance(found, StillsRefused) else ""

    def kept(self, job_id: str, video: str) -> Filmstrip | None:
        """The video's stills or refusal, once cut (None before)."""
        found = [v for (j, name, _), v in self._stills.items() if (j, name) == (job_id, video)]
        return found[-1] if found else None

    async def _filmstrip(self, job_id: str, video: str, progress: str) -> Filmstrip:
        progress_fd, progress_info = await asyncio.to_thread(
            open_artefact, self.jobs_dir, job_id, progress
        )
        os.close(progress_fd)
        fd, info = await asyncio.to_thread(open_artefact, self.jobs_dir, job_id, video)
        key = (job_id, video, (info.st_mtime, progress_info.st_mtime_ns, progress_info.st_size))
        try:
            known = self._known(key)
            if known is None:
                wanted = {k for k, _, _ in changes(await self.progress(job_id, progress))}
                known = self._known(key)  # another request may have started it meanwhile
                if known is None:
                    # Its own task: a browser that goes away must not cancel it for the others.
                    known = self._tasks.spawn(f"{job_id}/{video}", self._cut(key, fd, wanted))
                    self._cutting[key] = known
                    fd = -1  # the task closes it
        finally:
            if fd >= 0:
                os.close(fd)
        return await asyncio.shield(known) if isinstance(known, asyncio.Task) else known

    def _known(self, key: _Key) -> Filmstrip | asyncio.Task[Filmstrip] | None:
        """The kept stills (or refusal) of this video, else its cut under way, else None."""
        if (kept := self._stills.get(key)) is not None:
            self._stills.move_to_end(key)
            return kept
        return self._cutting.get(key)

    async def _cut(self, key: _Key, fd: int, wanted: set[int]) -> Filmstrip:
        try:
            async with self._cutters:
                # Read through the descriptor: the very file checked, whatever its path now.
                stills: Filmstrip = await cut(fd, wanted)
        except StillsRefused as e:
            stills = e
        finally:
            os.close(fd)
            del self._cutting[key]
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
        data = file.read(PROGRESS_MOST_BYTES + 1)
    if len(data) > PROGRESS_MOST_BYTES:
        raise ProgressError(
            f"it is larger than the {PROGRESS_MOST_BYTES:,} bytes the console reads (labd "
            f"writes about 150 bytes a frame: some {PROGRESS_MOST_BYTES // 150:,} frames)"
        )
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as e:  # not JSON, not UTF-8, nested past the stack
        raise ProgressError(f"not JSON ({type(e).__name__})") from None
    if not isinstance(document, dict):
        raise ProgressError(f"expected an object with 'frames', got a {type(document).__name__}")
    try:
        parsed = _Progress.model_validate(document)
    except ValidationError as e:
        raise ProgressError(_first_error(e)) from None
    return [frame.model_dump() for frame in parsed.frames]


def _first_error(e: ValidationError) -> str:
    """The first thing wrong, by frame and field: `frame 9, progress: input should be less
    than or equal to 1 (got 9)`."""
    first = e.errors()[0]
    loc = first["loc"]
    if len(loc) >= 3 and loc[0] == "frames" and isinstance(loc[1], int):
        where = f"frame {loc[1]}, " + ".".join(str(part) for part in loc[2:])
    else:
        where = ".".join(str(part) for part in loc) or "(top level)"
    message = first["msg"][:1].lower() + first["msg"][1:]
    got = first.get("input")
    shown = f" (got {got!r})" if isinstance(got, int | float) and not isinstance(got, bool) else ""
    return f"{where}: {message}{shown}"


def curve_points(frames: list[dict[str, Any]], most: int = CURVE_MOST) -> list[tuple[float, float]]:
    """(ms, progress) of the visual-progress curve, at most `most` points: the first frame,
    each frame where progress changed and the last (a step curve needs no other); past
    `most`, in each of most/4 spans of time its first, lowest, highest and last point, so every
    rise and fall stays drawn."""
    points: list[tuple[float, float]] = []
    for k, f in enumerate(frames):
        if k in (0, len(frames) - 1) or f["progress"] != frames[k - 1]["progress"]:
            points.append((float(f["t_ms"]), float(f["progress"])))
    if len(points) <= most:
        return points
    spans = max(1, most // 4)
    start, end = points[0][0], points[-1][0]
    width = (end - start) / spans or 1.0
    buckets: dict[int, list[int]] = {}
    for n, (t, _) in enumerate(points):
        buckets.setdefault(min(spans - 1, int((t - start) / width)), []).append(n)
    kept: set[int] = set()
    for members in buckets.values():
        lowest = min(members, key=lambda n: points[n][1])
        highest = max(members, key=lambda n: points[n][1])
        kept |= {members[0], lowest, highest, members[-1]}
    return [points[n] for n in sorted(kept)]


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


def refusal_image(why: str, lead: str = "No stills") -> bytes:
    """A still-sized SVG that says why there is no still."""
    lines = textwrap.wrap(f"{lead}: {why}.", 40)
    text = "".join(
        f"<text x='8' y='{18 + 14 * n}'>{escape(line)}</text>" for n, line in enumerate(lines)
    )
    height = 26 + 14 * len(lines)
    return (
        "<svg xmlns='http://www.w3.org/2000/svg' "
        f"width='{FILMSTRIP_WIDTH}' height='{height}' font-family='sans-serif' font-size='11'>"
        f"<rect width='100%' height='100%' fill='#f3e8e8'/>{text}</svg>"
    ).encode()
