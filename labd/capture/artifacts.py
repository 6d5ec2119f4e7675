"""What is kept beside the numbers: a browser-playable video of the analysed span, the heat
map as PNG, the per-frame progress as JSON.

The video is VP8 in WebM: the opencv-python-headless wheel cannot encode H.264, and VP8 encodes
about four times faster than VP9 through it (37 against 140 ms a 1080p frame here) while every
browser plays both. Frames are scaled down to `max_width` and encoded on a thread of their own,
so the encoder runs on the second core while the analysis goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from labd.capture.errors import CaptureError

Image = NDArray[np.uint8]
_STOP = None


MIN_VIDEO_FPS = 30.0
# At most 108,000 frames of video (an hour at 30 a second): a recording that holds one frame
# for a day (a variable-rate file of two kilobytes) asked for 2.6 million, hours of
# encoding. Past it the video ends, on the recording's last frame.
MAX_SLOTS = 3600 * 30


class VideoArtifact:
    """Writes frames to a WebM file from a background thread."""

    def __init__(self, path: Path, fps: float, size: tuple[int, int], max_width: int) -> None:
        width, height = size
        scale = min(1.0, max_width / width)
        # VP8 wants even dimensions.
        self.size = (max(2, int(width * scale) // 2 * 2), max(2, int(height * scale) // 2 * 2))
        self.path = path
        # At least 30 frames a second: a variable-rate capture's first frames can make a low
        # estimate, and the frames that come faster would be left out.
        self.fps = max(MIN_VIDEO_FPS, fps)
        self.t0: float | None = None
        self.pending: Image | None = None  # the latest frame, shown until the next one's slot
        self.slot = 0  # the pending frame's place in the video
        with _quiet_stderr():  # OpenCV prints that WebM has no VP80 tag, then writes fine
            self.writer = cv2.VideoWriter(
                str(path), cv2.VideoWriter.fourcc(*"VP80"), self.fps, self.size
            )
        if not self.writer.isOpened():
            if not path.parent.is_dir():
                raise CaptureError(f"{path}: no such directory {path.parent}")
            raise CaptureError(f"{path}: cannot write a WebM (VP8) video here")
        self.frames: queue.Queue[Image | None] = queue.Queue(maxsize=16)
        self.thread = threading.Thread(target=self._encode, name="video-artifact", daemon=True)
        self.thread.start()

    def _encode(self) -> None:
        while (frame := self.frames.get()) is not _STOP:
            if (frame.shape[1], frame.shape[0]) != self.size:
                self.writer.write(cv2.resize(frame, self.size, interpolation=cv2.INTER_AREA))
            else:
                self.writer.write(frame)
        self.writer.release()

    def write(self, frame: Image, t_ms: float) -> None:
        """`frame`, captured at `t_ms`. The video runs at a constant rate, so each frame is
        held until the next one's time: a recording that sends frames only on change (a
        phone's `screenrecord`) shows each change when the capture saw it. Of two frames
        that fall in one slot of the video, the later is shown."""
        if self.t0 is None:
            self.t0 = t_ms
        slot = min(MAX_SLOTS, max(self.slot, round((t_ms - self.t0) * self.fps / 1000)))
        if self.pending is not None:
            for _ in range(slot - self.slot):
                self.frames.put(self.pending)
        self.pending, self.slot = frame, slot

    def close(self, end_ms: float | None = None) -> Path:
        """Finish the video; the last frame shows until `end_ms` (the red screen's time)."""
        if self.pending is not None and self.t0 is not None:
            end = self.slot + 1
            if end_ms is not None:
                end = min(MAX_SLOTS, max(end, round((end_ms - self.t0) * self.fps / 1000)))
            for _ in range(end - self.slot):
                self.frames.put(self.pending)
        self.frames.put(_STOP)
        self.thread.join()
        return self.path


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence C-level writes to stderr for a moment."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def write_heatmap(path: Path, changes: NDArray[np.float32]) -> Path:
    """Each pixel coloured by how often it changed: blue never, red most often."""
    peak = float(changes.max())
    scaled = (
        np.zeros(changes.shape, np.uint8)
        if peak == 0
        else (changes * (255.0 / peak)).astype(np.uint8)
    )
    if not cv2.imwrite(str(path), cv2.applyColorMap(scaled, cv2.COLORMAP_JET)):
        if not path.parent.is_dir():
            raise CaptureError(f"{path}: no such directory {path.parent}")
        raise CaptureError(f"{path}: cannot write the heat map")
    return path


def write_json(path: Path, payload: Any) -> Path:
    try:
        path.write_text(json.dumps(payload, indent=1) + "\n")
    except OSError as e:
        raise CaptureError(f"{path}: cannot write it ({e.strerror or e})") from e
    return path
