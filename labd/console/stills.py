"""Filmstrip stills cut from a WebM the measured program may have written, in a child process.

A job's program is not trusted, and neither is its video: a 160 KB VP8 file can declare 8192 x
8192 frames, and decoding ten of them took 14 s and 1 GB in the daemon. So the decoder never
runs in the daemon. A child (this file run as a script: `python -I stills.py FD FRAME...`,
which imports nothing of labd, so it starts in a fifth of a second) reads the stream's
dimensions first and refuses a video larger than labd records (MAX_SIDE, MAX_PIXELS), checks
every decoded frame again (VP8 may change size at any key frame), and runs under a data limit
(CHILD_MEMORY); the daemon kills it after CUT_TIMEOUT_S. It answers one JSON line on stdout.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import resource
import sys
from dataclasses import dataclass
from typing import Any

FILMSTRIP_WIDTH = 240
# labd's own videos are scaled to `video_max_width` (at most 4096, default 960): nothing it
# records is larger than DCI 4K, in landscape or portrait.
MAX_SIDE = 4096
MAX_PIXELS = 4096 * 2160
CHILD_MEMORY = 512 * 1024 * 1024  # RLIMIT_DATA of the child: a 4K VP8 cut needs 320 to 384 MB
CUT_TIMEOUT_S = 30.0  # one video's stills: 4K VP8 decodes at some 21 ms a frame (1,300 frames)
ANSWER_BYTES = 4 * 1024 * 1024  # 24 stills of 240 px wide JPEG need some 300 KB


class StillsRefused(Exception):
    """No stills for this video; the message says why, in one line, for the person."""


@dataclass(frozen=True)
class Stills:
    """The JPEG stills cut, by frame; and, when the video ended before the last frame asked
    for, how many frames it holds (the frames past it have no still)."""

    jpegs: dict[int, bytes]
    video_frames: int | None = None

    def past_end(self, frame: int) -> str:
        """Why `frame` has no still because the video is shorter, or ''."""
        if self.video_frames is None or frame < self.video_frames:
            return ""
        return (
            f"frame {frame} is past the end of the video, which holds {self.video_frames:,} "
            "frames (frames count from 0)"
        )


def too_large(width: int, height: int) -> str:
    """Why frames of this size are not decoded, or '' when they may be."""
    if width > MAX_SIDE or height > MAX_SIDE or width * height > MAX_PIXELS:
        return (
            f"the video's frames are {width}x{height}, larger than labd records "
            f"(at most {MAX_SIDE} pixels a side and {MAX_PIXELS:,} in all)"
        )
    return ""


async def cut(fd: int, wanted: set[int]) -> Stills:
    """JPEG stills of the `wanted` frames of the open video `fd`, cut by a child process.
    Raises StillsRefused when the child refuses the video, fails, or takes longer than
    CUT_TIMEOUT_S (it is killed). Cancelling this kills the child too."""
    from labd.process import child_setup  # not at the top: the child runs this file alone

    child = await asyncio.create_subprocess_exec(
        sys.executable, "-I", __file__, str(fd), *map(str, sorted(wanted)),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, pass_fds=(fd,),
        preexec_fn=child_setup(None, disable_aslr=False),
        env={**os.environ, "MALLOC_ARENA_MAX": "2", "OPENCV_FFMPEG_THREADS": "1"},
    )  # fmt: skip
    try:
        async with asyncio.timeout(CUT_TIMEOUT_S):
            answer = await _read_all(child)
            await child.wait()
    except TimeoutError:
        raise StillsRefused(
            f"cutting the stills took longer than {CUT_TIMEOUT_S:.0f} s and was stopped"
        ) from None
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    try:
        parsed: dict[str, Any] = json.loads(answer)
    except ValueError:
        raise StillsRefused(
            "the video could not be decoded within the console's memory bound"
            if child.returncode
            else "the video could not be decoded"
        ) from None
    if refused := parsed.get("refused"):
        raise StillsRefused(str(refused))
    jpegs = {int(k): base64.b64decode(v) for k, v in parsed["stills"].items()}
    return Stills(jpegs, parsed.get("ended_after"))


async def _read_all(child: asyncio.subprocess.Process) -> bytes:
    """The child's stdout to its end, at most ANSWER_BYTES of it."""
    assert child.stdout is not None
    chunks: list[bytes] = []
    size = 0
    while chunk := await child.stdout.read(64 * 1024):
        size += len(chunk)
        if size > ANSWER_BYTES:
            raise StillsRefused("the stills came out larger than a filmstrip's")
        chunks.append(chunk)
    return b"".join(chunks)


def cut_stills(fd: int, wanted: set[int]) -> dict[str, Any]:
    """The child's work: {"stills": {frame: base64 JPEG}} read in one pass (a WebM does not
    seek to an exact frame reliably), with "ended_after": the video's frames when it ended
    before the last one wanted; or {"refused": why}."""
    import cv2

    cv2.setNumThreads(1)
    capture = cv2.VideoCapture(f"/proc/self/fd/{fd}", cv2.CAP_FFMPEG)
    try:
        if not capture.isOpened():
            return {"refused": "the video could not be opened"}
        width = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH))
        height = int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
        if why := too_large(width, height):
            return {"refused": why}
        stills: dict[str, str] = {}
        last = max(wanted, default=-1)
        for k in range(last + 1):
            ok, image = capture.read()
            if not ok:
                return {"stills": stills, "ended_after": k}
            height, width = image.shape[:2]
            if why := too_large(width, height):
                return {"refused": f"frame {k}: {why}"}
            if k in wanted:
                size = (FILMSTRIP_WIDTH, max(1, round(height * FILMSTRIP_WIDTH / width)))
                small = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
                jpeg = cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, 80])[1]
                stills[str(k)] = base64.b64encode(jpeg.tobytes()).decode()
        return {"stills": stills}
    finally:
        capture.release()


def main(argv: list[str]) -> int:
    # Before the decoder maps anything: past this, an allocation fails and the child exits.
    resource.setrlimit(resource.RLIMIT_DATA, (CHILD_MEMORY, CHILD_MEMORY))
    fd, wanted = int(argv[0]), {int(k) for k in argv[1:]}
    print(json.dumps(cut_stills(fd, wanted)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
