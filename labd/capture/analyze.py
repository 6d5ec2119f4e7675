"""From a recording to what users saw, in two streaming passes over the frames.

Pass 1 finds the green screen (and from it the content area), the first frame after it, the red
screen, and which frames differ from their predecessor; it builds the heat map, checkerboard and
tearing figures and writes the video artifact. Pass 2 visits only the frames that changed and
measures each against the last frame before the red screen (visual progress, load histogram).
Memory stays bounded: a few frames and per-frame numbers, whatever the length.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import cv2
import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from labd.capture import visual
from labd.capture.artifacts import VideoArtifact, write_heatmap, write_json
from labd.capture.colors import PRESETS, RGB
from labd.capture.errors import SyncError
from labd.capture.sources import Recording
from labd.capture.sync import (
    Rect,
    SyncMatch,
    exact_block,
    find_sync,
    fraction_matching,
    scan_step,
    subsample,
)

Image = NDArray[np.uint8]


class Checkerboard(BaseModel):
    model_config = ConfigDict(extra="forbid")
    colors: tuple[RGB, RGB] = ((255, 255, 255), (192, 192, 192))
    square: int = Field(16, ge=2, description="side of a square in pixels")


class AnalysisOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    start_color: RGB = PRESETS["green"]
    end_color: RGB = PRESETS["red"]
    tolerance: int = Field(
        100, ge=0, le=765, description="sum of channel differences that still matches a sync colour"
    )
    sync_threshold: float = Field(0.9, gt=0, le=1, description="share of the area that must match")
    min_sync_area: float = Field(
        0.25, gt=0, le=1, description="smallest sync screen, as a share of the frame"
    )
    pixel_threshold: int = Field(
        12, ge=0, le=255, description="channel difference that counts as a change"
    )
    min_changed: float = Field(
        5e-5, ge=0, description="share of channel values that must change for a new frame"
    )
    progress: Literal["histogram", "pixel"] = "histogram"
    ignore_white: bool = True
    checkerboard: Checkerboard | None = None
    tearing_colors: list[RGB] = Field(default_factory=list)
    video_max_width: int = Field(960, ge=16)


class FrameProgress(BaseModel):
    index: int
    t_ms: float
    unique: bool
    progress: float
    similarity: float  # share of pixels equal to the last frame (the load histogram)


class VisualMetrics(BaseModel):
    source: str
    start_frame: int
    end_frame: int
    frames_analysed: int
    fps_capture: float
    variable_frame_rate: bool
    dropped_frames: int
    unique_frames: int
    unique_fps: float
    first_visual_change_ms: float | None
    last_visual_change_ms: float | None
    visually_complete_ms: float
    visual_complete_85_ms: float
    visual_complete_95_ms: float
    visual_complete_99_ms: float
    speed_index: float
    speed_index_method: str
    duration_ms: float
    sync_confidence: float
    start_confidence: float
    end_confidence: float
    content_area: Rect
    checkerboard_percent: float | None = None
    torn_frames: list[int] | None = None
    artifacts: dict[str, str] = Field(default_factory=dict)
    frames: list[FrameProgress] = Field(default_factory=list, exclude=True)


@dataclass
class Artifacts:
    video: Path | None = None
    heatmap: Path | None = None
    progress: Path | None = None


@dataclass
class _Scan:
    """What pass 1 learns."""

    times: list[float] = field(default_factory=list)
    start: int = -1
    end: int = -1
    area: Rect | None = None
    start_match: SyncMatch | None = None
    end_confidence: float = 0.0
    unique: list[int] = field(default_factory=list)
    start_image: Image | None = None
    final_image: Image | None = None
    heat: NDArray[np.float32] | None = None
    checkerboard: list[float] = field(default_factory=list)
    torn: list[int] = field(default_factory=list)


class _Pass1:
    def __init__(self, options: AnalysisOptions, video: Path | None) -> None:
        self.o = options
        self.scan = _Scan()
        self.video_path = video
        self.video: VideoArtifact | None = None
        self.green: tuple[int, Image, SyncMatch] | None = None
        self.green_first: int | None = None
        self.red_first: int | None = None
        self.previous: Image | None = None
        self.unique_checks: list[float] = []
        self.references: list[Image] = []

    def feed(self, index: int, t: float, image: Image) -> bool:
        """Take one frame; False once the red screen is reached."""
        self.scan.times.append(t)
        if self.scan.area is None:
            self._before_content(index, image)
            if self.scan.area is None:
                return True
        area = self.scan.area
        assert area is not None
        content = area.crop(image)
        step = scan_step(content.shape[1])
        if (
            fraction_matching(subsample(content, step), self.o.end_color, self.o.tolerance)
            >= self.o.sync_threshold
        ):
            self.scan.end = index
            self.scan.end_confidence = fraction_matching(
                content, self.o.end_color, self.o.tolerance
            )
            return False
        self._content(index, content)
        return True

    def _before_content(self, index: int, image: Image) -> None:
        o = self.o
        if self.green is not None:
            rect = self.green[2].rect
            step = scan_step(rect.w)
            still = fraction_matching(subsample(rect.crop(image), step), o.start_color, o.tolerance)
            if still < o.sync_threshold:
                self._content_starts(index)
                return
        match = find_sync(image, o.start_color, o.tolerance, o.min_sync_area)
        if match is not None and match.confidence >= o.sync_threshold:
            if self.green_first is None:
                self.green_first = index
            if self.green is None or match.rect.area >= self.green[2].rect.area:
                self.green = (index, image.copy(), match)
        elif self.green is None and self.red_first is None:
            red = find_sync(image, o.end_color, o.tolerance, o.min_sync_area)
            if red is not None and red.confidence >= o.sync_threshold:
                self.red_first = index

    def _content_starts(self, index: int) -> None:
        assert self.green is not None
        o = self.o
        exact = exact_block(self.green[1], o.start_color, o.tolerance, o.min_sync_area)
        match = exact if exact is not None else self.green[2]
        self.scan.area = match.rect
        self.scan.start_match = match
        self.scan.start = index
        self.green = None
        if o.checkerboard is not None or o.tearing_colors:
            like = np.zeros((match.rect.h, match.rect.w, 3), np.uint8)
            self.references = [visual.solid(rgb, like) for rgb in o.tearing_colors]

    def _content(self, index: int, content: Image) -> None:
        o = self.o
        scan = self.scan
        if self.previous is None:
            scan.start_image = content.copy()
            scan.heat = np.zeros(content.shape[:2], np.float32)
            is_new = True
        else:
            limit = o.min_changed * content.size
            is_new = visual.changed_values(content, self.previous, o.pixel_threshold) > limit
            if is_new:
                assert scan.heat is not None
                changed = visual.changed_mask(content, self.previous, o.pixel_threshold)
                np.add(scan.heat, 1.0, out=scan.heat, where=changed > 0)
        if is_new:
            scan.unique.append(index)
            scan.final_image = content
            if o.checkerboard is not None:
                board = o.checkerboard
                self.unique_checks = [
                    visual.checkerboard_fraction(content, board.colors, board.square, o.tolerance)
                ]
            if (
                self.references
                and len(visual.tearing_images(content, self.references, o.pixel_threshold, 0.01))
                > 1
            ):
                scan.torn.append(index)
        scan.checkerboard.extend(self.unique_checks)
        self.previous = content
        if self.video_path is not None:
            if self.video is None:
                fps = _fps(scan.times)
                self.video = VideoArtifact(
                    self.video_path, fps, (content.shape[1], content.shape[0]), o.video_max_width
                )
            self.video.write(content)

    def finish(self, name: str) -> _Scan:
        if self.video is not None:
            self.video.close()
        scan = self.scan
        stopped = f"the recording stops at frame {len(scan.times) - 1} ({_span(scan.times)})"
        if scan.area is None:
            if self.green is not None and self.red_first is not None:
                raise SyncError(
                    f"{name}: a red (end) screen at frame {self.red_first} comes before "
                    f"the green (start) screen at frame {self.green_first}"
                )
            if self.green is not None:
                raise SyncError(f"{name}: the green (start) screen never ends; {stopped}")
            raise SyncError(f"{name}: no green (start) screen found in {len(scan.times)} frames")
        if scan.end < 0:
            raise SyncError(
                f"{name}: no red (end) screen after the green one at frame {scan.start}; "
                f"{stopped} (did the capture stop mid-run?)"
            )
        if scan.end == scan.start:
            raise SyncError(
                f"{name}: the red screen follows the green one at frame {scan.start} "
                "with nothing between"
            )
        return scan


def analyze(
    recording: Recording, options: AnalysisOptions | None = None, artifacts: Artifacts | None = None
) -> VisualMetrics:
    """Visual metrics of a recording; raises SyncError when it cannot be trusted at all."""
    options = options or AnalysisOptions()
    artifacts = artifacts or Artifacts()
    first = _Pass1(options, artifacts.video)
    try:
        for index, t, image in recording.frames():
            assert image is not None
            if not first.feed(index, t, image):
                break
    finally:
        if first.video is not None and first.scan.end < 0:
            first.video.close()
            first.video = None
    scan = first.finish(recording.name)
    frames = _progress(recording, scan, options)
    result = _metrics(recording.name, scan, frames, options)
    if artifacts.heatmap is not None and scan.heat is not None:
        result.artifacts["heatmap"] = str(write_heatmap(artifacts.heatmap, scan.heat))
    if artifacts.video is not None:
        result.artifacts["video"] = str(artifacts.video)
    if artifacts.progress is not None:
        payload = {"source": recording.name, "frames": [f.model_dump() for f in frames]}
        result.artifacts["progress"] = str(write_json(artifacts.progress, payload))
    return result


def _progress(recording: Recording, scan: _Scan, options: AnalysisOptions) -> list[FrameProgress]:
    """Pass 2: each changed frame against the first and the last."""
    assert scan.area is not None and scan.start_image is not None and scan.final_image is not None
    unique = set(scan.unique)
    final = scan.final_image
    start_hist = visual.histogram(scan.start_image, options.ignore_white)
    final_hist = visual.histogram(final, options.ignore_white)
    start_similar = visual.similarity(scan.start_image, final, options.pixel_threshold)
    frames: list[FrameProgress] = []
    t0 = scan.times[scan.start]
    progress = similar = 0.0
    for index, t, image in recording.frames(lambda i: i in unique):
        if index < scan.start:
            continue
        if index >= scan.end:
            break
        if image is not None:
            content = scan.area.crop(image)
            similar = visual.similarity(content, final, options.pixel_threshold)
            if options.progress == "pixel":
                progress = visual.pixel_progress(similar, start_similar)
            else:
                progress = visual.histogram_progress(
                    visual.histogram(content, options.ignore_white), start_hist, final_hist
                )
        frames.append(
            FrameProgress(
                index=index,
                t_ms=t - t0,
                unique=image is not None,
                progress=progress,
                similarity=similar,
            )
        )
    frames[-1].progress = 1.0  # the last frame is complete by definition
    return frames


def _metrics(
    name: str, scan: _Scan, frames: list[FrameProgress], options: AnalysisOptions
) -> VisualMetrics:
    assert scan.area is not None and scan.start_match is not None
    times = [f.t_ms for f in frames]
    progress = [f.progress for f in frames]
    end_t = scan.times[scan.end] - scan.times[scan.start]
    changes = [f.t_ms for f in frames[1:] if f.unique]
    fps, variable, dropped = _frame_rate(scan.times[: scan.end + 1])
    complete = visual.first_reaching(times, progress, 1.0)
    checker = scan.checkerboard
    return VisualMetrics(
        source=name,
        start_frame=scan.start,
        end_frame=scan.end,
        frames_analysed=len(frames),
        fps_capture=round(fps, 3),
        variable_frame_rate=variable,
        dropped_frames=dropped,
        unique_frames=len(scan.unique),
        unique_fps=round(len(scan.unique) / (end_t / 1000.0), 3) if end_t > 0 else 0.0,
        first_visual_change_ms=changes[0] if changes else None,
        last_visual_change_ms=changes[-1] if changes else None,
        visually_complete_ms=complete,
        visual_complete_85_ms=visual.first_reaching(times, progress, 0.85),
        visual_complete_95_ms=visual.first_reaching(times, progress, 0.95),
        visual_complete_99_ms=visual.first_reaching(times, progress, 0.99),
        speed_index=round(visual.speed_index(times, progress), 3),
        speed_index_method=options.progress,
        duration_ms=end_t,
        sync_confidence=round(min(scan.start_match.confidence, scan.end_confidence), 4),
        start_confidence=round(scan.start_match.confidence, 4),
        end_confidence=round(scan.end_confidence, 4),
        content_area=scan.area,
        checkerboard_percent=round(100 * float(np.mean(checker)), 3)
        if options.checkerboard and checker
        else None,
        torn_frames=scan.torn if options.tearing_colors else None,
        frames=frames,
    )


def _fps(times: list[float]) -> float:
    return _frame_rate(times)[0] if len(times) >= 3 else 60.0


def _frame_rate(times: list[float]) -> tuple[float, bool, int]:
    """Capture rate, whether it varies, and frames missing from a constant-rate capture (gaps
    that are whole multiples of the usual interval). A variable-rate recording (screen
    recorders emit frames only on change) has no missing frames to count."""
    if len(times) < 3:
        return 60.0, False, 0
    intervals = np.diff(np.asarray(times))
    ratio = intervals / float(np.median(intervals))
    # Containers round timestamps (16, 17, 17 ms at 60 fps): average the ordinary intervals.
    usual = float(intervals[(ratio > 0.5) & (ratio < 1.5)].mean())
    ratio = intervals / usual
    off_grid = np.abs(ratio - np.round(ratio)) > 0.15
    variable = bool(off_grid.mean() > 0.05)
    dropped = 0 if variable else int(np.sum(np.maximum(np.round(ratio) - 1, 0)))
    return 1000.0 / usual, variable, dropped


def _span(times: list[float]) -> str:
    return f"{times[-1] - times[0]:.0f} ms after the first frame" if times else "before any frame"
