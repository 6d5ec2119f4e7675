"""From a recording to what users saw, in two streaming passes over the frames.

Pass 1 finds the green screen (and from it the content area), the first frame after it, the red
screen, and which frames differ from their predecessor; it builds the heat map, checkerboard and
tearing figures and writes the video artifact. Pass 2 visits only the frames that changed and
measures each against the last frame before the red screen (visual progress, load histogram).
Memory stays bounded: a few frames and per-frame numbers, whatever the length.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from numpy.typing import NDArray

from labd.capture import visual
from labd.capture.artifacts import VideoArtifact, write_heatmap, write_json
from labd.capture.colors import color_name
from labd.capture.errors import CaptureError, SyncError
from labd.capture.findings import (
    AnalysisOptions,
    Artifacts,
    FrameProgress,
    VisualMetrics,
)
from labd.capture.parallel import ordered_map
from labd.capture.sources import Recording
from labd.capture.sync import Rect, SyncMatch, exact_block, find_sync, fraction_matching, scan_step
from labd.capture.visual import subsample

Image = NDArray[np.uint8]


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
    # The sync screens' colours as the capture chain delivered them (RGB), for its levels.
    start_seen: tuple[float, float, float] | None = None
    end_seen: tuple[float, float, float] | None = None
    heat: NDArray[np.float32] | None = None
    # The capture's noise, measured on the green screen, and the channel difference that
    # counts as a change in its light (the option's, or more).
    noise: float = 0.0
    pixel_threshold: int = 0
    checkerboard: list[float] = field(default_factory=list)
    torn: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class _FrameChange:
    changed: float  # share of pixels that differ from the previous frame
    checkerboard: float | None
    torn: bool


class _Pass1:
    """Sync screens and content area in frame order; per-frame comparisons on every core."""

    def __init__(self, options: AnalysisOptions, video: Path | None) -> None:
        self.o = options
        self.scan = _Scan()
        self.video_path = video
        self.video: VideoArtifact | None = None
        self.green: tuple[int, Image, SyncMatch] | None = None
        self.green_first: int | None = None
        self.green_frames: list[Image] = []  # the last two, for the capture's noise
        self.red_first: int | None = None
        self.references: list[Image] = []
        self.checkerboard = 0.0  # of the latest new frame: repeated frames show the same
        # Each worker thread counts changes into a heat map of its own; summed at the end.
        self.heat_maps: list[NDArray[np.float32]] = []
        self.worker = threading.local()

    def run(self, recording: Recording) -> _Scan:
        try:
            pairs = self._content_frames(recording)
            for (index, content, _previous), change in ordered_map(self._compare, pairs):
                self._take(index, content, change)
        finally:
            if self.video is not None:
                ended = self.scan.end >= 0
                self.video.close(self.scan.times[self.scan.end] if ended else None)
        if self.heat_maps:
            self.scan.heat = np.sum(self.heat_maps, axis=0, dtype=np.float32)
        return self._checked(recording.name, getattr(recording, "frame_count", 0))

    def _content_frames(self, recording: Recording) -> Iterator[tuple[int, Image, Image | None]]:
        """(index, content, previous content) from the first frame after the green screen up
        to the red one."""
        previous: Image | None = None
        for index, t, image in recording.frames():
            assert image is not None
            self.scan.times.append(t)
            if self.scan.area is None:
                self._before_content(index, image)
                if self.scan.area is None:
                    continue
            content = self.scan.area.crop(image)
            step = scan_step(content.shape[1])
            small = subsample(content, step)
            green = fraction_matching(small, self.o.start_color, self.o.tolerance)
            if green >= self.o.sync_threshold:
                # A second start screen: the numbers would count the first run, and what
                # came between, as the page's load. Which one starts the run is not ours
                # to guess.
                start = f"{color_name(self.o.start_color)} (start) screen"
                raise SyncError(
                    f"{recording.name}: the {start} again at frame {index}, after the content "
                    f"began at frame {self.scan.start}: a flicker or damage in the {start}, two "
                    "runs in one recording, or a page that shows the start colour itself"
                )
            red = fraction_matching(small, self.o.end_color, self.o.tolerance)
            if red >= self.o.sync_threshold:
                self.scan.end = index
                self.scan.end_seen = _seen(subsample(content, step))
                self.scan.end_confidence = fraction_matching(
                    content, self.o.end_color, self.o.tolerance
                )
                return
            yield index, content, previous
            previous = content

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
            kept = image.copy()
            self.green_frames = [*self.green_frames[-1:], kept]
            if self.green is None or match.rect.area >= self.green[2].rect.area:
                self.green = (index, kept, match)
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
        self.scan.start_seen = _seen(
            subsample(match.rect.crop(self.green[1]), scan_step(match.rect.w))
        )
        self.green = None
        self.scan.pixel_threshold = o.pixel_threshold
        if len(self.green_frames) == 2:
            step = scan_step(match.rect.w)
            before, after = (subsample(match.rect.crop(f), step) for f in self.green_frames)
            self.scan.noise = visual.capture_noise(before, after)
            self.scan.pixel_threshold = visual.noise_threshold(self.scan.noise, o.pixel_threshold)
            # Set before the first content frame is compared (they are made after this).
            self.o = o.model_copy(update={"pixel_threshold": self.scan.pixel_threshold})
        self.green_frames = []
        like = np.zeros((match.rect.h, match.rect.w, 3), np.uint8)
        self.references = [visual.solid(rgb, like) for rgb in o.tearing_colors]

    def _compare(self, item: tuple[int, Image, Image | None]) -> _FrameChange:
        """Runs on a worker thread: everything about one frame that needs only it and the
        frame before it."""
        _, content, previous = item
        o = self.o
        if previous is None:  # the first frame after the green screen is new by definition
            changed, mask = 1.0, None
        else:
            mask = visual.changed_mask(content, previous, o.pixel_threshold, self._scratch())
            changed = visual.share_changed(mask)
        if changed <= o.min_changed:
            return _FrameChange(changed, None, False)
        if mask is not None:
            heat = getattr(self.worker, "heat", None)
            if heat is None:
                heat = self.worker.heat = np.zeros(mask.shape, np.float32)
                self.heat_maps.append(heat)  # list.append is atomic
            cv2.accumulate(mask, heat)
        board = None
        if o.checkerboard is not None:
            spec = o.checkerboard
            board = visual.checkerboard_fraction(content, spec.colors, spec.square, o.tolerance)
        torn = (
            bool(self.references)
            and len(visual.tearing_images(content, self.references, o.pixel_threshold, 0.01)) > 1
        )
        return _FrameChange(changed, board, torn)

    def _scratch(self) -> visual.Scratch:
        scratch: visual.Scratch | None = getattr(self.worker, "scratch", None)
        if scratch is None:
            scratch = self.worker.scratch = visual.Scratch()
        return scratch

    def _take(self, index: int, content: Image, change: _FrameChange) -> None:
        """In frame order: the running state."""
        scan = self.scan
        if scan.start_image is None:
            scan.start_image = content
            scan.heat = np.zeros(content.shape[:2], np.float32)
        if change.changed > self.o.min_changed:
            scan.unique.append(index)
            scan.final_image = content
            if change.torn:
                scan.torn.append(index)
            if change.checkerboard is not None:
                self.checkerboard = change.checkerboard
        if self.o.checkerboard is not None:
            scan.checkerboard.append(self.checkerboard)
        if self.video_path is not None:
            if self.video is None:
                size = (content.shape[1], content.shape[0])
                self.video = VideoArtifact(
                    self.video_path, _fps(scan.times), size, self.o.video_max_width
                )
            self.video.write(content, scan.times[index])

    def _checked(self, name: str, claimed: int = 0) -> _Scan:
        """The scan, or a SyncError saying what is missing. `claimed`: the frames the file's
        header counts, for a file that stops decoding before them (damaged, not a capture
        that stopped)."""
        scan = self.scan
        start_name = color_name(self.o.start_color)
        start = f"{start_name} (start) screen"
        end = f"{color_name(self.o.end_color)} (end) screen"
        stopped = f"the recording stops at frame {len(scan.times) - 1} ({_span(scan.times)})"
        if 0 < len(scan.times) < claimed and scan.end < 0:
            stopped += (
                f"; its header counts {claimed} frames, so the file is damaged or truncated"
                " (frames past it did not decode)"
            )
        if scan.area is None:
            if self.green is not None and self.red_first is not None:
                raise SyncError(
                    f"{name}: a {end} at frame {self.red_first} comes before "
                    f"the {start} at frame {self.green_first}"
                )
            if self.green is not None:
                raise SyncError(f"{name}: the {start} never ends; {stopped}")
            raise SyncError(f"{name}: no {start} found in {len(scan.times)} frames")
        if scan.end < 0:
            raise SyncError(
                f"{name}: no {end} after the {start_name} one at frame {scan.start}; "
                f"{stopped} (did the capture stop mid-run?)"
            )
        if scan.end == scan.start:
            raise SyncError(
                f"{name}: the {end} follows the {start_name} one at frame {scan.start} "
                "with nothing between"
            )
        return scan


def analyze(
    recording: Recording, options: AnalysisOptions | None = None, artifacts: Artifacts | None = None
) -> VisualMetrics:
    """Visual metrics of a recording; raises SyncError when it cannot be trusted at all."""
    options = options or AnalysisOptions()
    artifacts = artifacts or Artifacts()
    # The video is written beside its name and put in place only for a recording that is
    # analysed: a refused one replaced a video already there.
    for wanted in (artifacts.video, artifacts.heatmap, artifacts.progress):
        if wanted is not None and not wanted.parent.is_dir():  # said before any work
            raise CaptureError(f"{wanted}: no such directory {wanted.parent}")
    video = artifacts.video
    partial = video.with_name(f".{video.stem}.partial{video.suffix}") if video else None
    try:
        scan = _Pass1(options, partial).run(recording)
        options = options.model_copy(update={"pixel_threshold": scan.pixel_threshold})
        frames, painted = _progress(recording, scan, options)
        result = _metrics(recording.name, scan, frames, painted, options)
    except BaseException:
        if partial is not None:
            partial.unlink(missing_ok=True)
        raise
    if partial is not None and video is not None and partial.exists():
        partial.replace(video)
    if artifacts.heatmap is not None and scan.heat is not None:
        result.artifacts["heatmap"] = str(write_heatmap(artifacts.heatmap, scan.heat))
    if artifacts.video is not None:
        result.artifacts["video"] = str(artifacts.video)
    if artifacts.progress is not None:
        payload = {"source": recording.name, "frames": [f.model_dump() for f in frames]}
        result.artifacts["progress"] = str(write_json(artifacts.progress, payload))
    return result


def _progress(
    recording: Recording, scan: _Scan, options: AnalysisOptions
) -> tuple[list[FrameProgress], int | None]:
    """Pass 2: each new frame against the last one (on every core), repeats carried over;
    and which of them first differs from the blank page (None: none does)."""
    assert scan.area is not None and scan.start_image is not None and scan.final_image is not None
    area = scan.area
    threshold = options.pixel_threshold
    final = scan.final_image
    final_sampled = visual.sampled(final)
    final_kept = visual.not_white(final_sampled) if options.ignore_white else None
    # Progress starts from the blank page, not from the first frame after the green screen:
    # a browser that holds the previous paint until the page's first one (Chromium) shows
    # green until then, so its first frame already holds content that must count.
    blank = scan.start_image
    if options.blank_color is not None:
        assert scan.start_seen is not None and scan.end_seen is not None
        seen = [(options.start_color, scan.start_seen), (options.end_color, scan.end_seen)]
        fitted = visual.solid(visual.as_captured(options.blank_color, seen), scan.start_image)
        blank = visual.blank_as_shown(fitted, scan.start_image, threshold)
    blank_sampled = visual.sampled(blank)

    worker = threading.local()

    def measure(image: Image) -> tuple[float, float, bool]:
        """(similarity to the last frame, histogram distance from it, whether it differs
        from the blank page). The load histogram is measured on the sampled frame, unless
        progress is to be pixel-exact."""
        if not hasattr(worker, "scratch"):
            worker.scratch = visual.Scratch()
        small = visual.sampled(image)
        painted = visual.share_changed(
            visual.changed_mask(small, blank_sampled, threshold, worker.scratch)
        )
        drawn = painted > options.min_changed
        if options.progress == "pixel":
            return visual.similarity(image, final, threshold, worker.scratch), 0.0, drawn
        changed = visual.changed_mask(small, final_sampled, threshold, worker.scratch)
        distance = visual.histogram_distance(small, final_sampled, changed, final_kept)
        return 1.0 - visual.share_changed(changed), distance, drawn

    start_similar, start_distance, _ = measure(blank)
    if blank is not scan.start_image:
        # Pixel progress: a background painted over the whole page before its content (a dark
        # or grey page) is less like the last frame than the blank is: measured from the
        # blank, it read as less than no progress, and progress stayed 0 until the last paint
        # (Speed Index = visually complete). It starts from whichever of the two is farther.
        # (Histogram distances count only colours the frame lacks: never more than the blank.)
        first_similar, first_distance, _ = measure(scan.start_image)
        start_similar = min(start_similar, first_similar)
        start_distance = max(start_distance, first_distance)
    unique = set(scan.unique)

    def span() -> Iterator[tuple[int, float, Image | None]]:
        for index, t, image in recording.frames(lambda i: i in unique):
            if index >= scan.end:
                return
            if index >= scan.start:
                yield index, t, None if image is None else area.crop(image)

    frames: list[FrameProgress] = []
    t0 = _time_zero(scan, options)
    progress = similar = 0.0
    painted: int | None = None
    for (index, t, _image), measured in ordered_map(
        lambda item: None if item[2] is None else measure(item[2]), span()
    ):
        if measured is not None:
            similar, distance, drawn = measured
            if drawn and painted is None:
                painted = len(frames)
            if options.progress == "pixel":
                progress = visual.pixel_progress(similar, start_similar)
            elif drawn:
                progress = visual.histogram_progress(distance, start_distance)
            else:  # like the blank page: a level a few steps off it is no progress
                progress = 0.0
        frames.append(
            FrameProgress(
                index=index,
                t_ms=t - t0,
                unique=measured is not None,
                progress=progress,
                similarity=similar,
            )
        )
    frames[-1].progress = 1.0  # the last frame is complete by definition
    return frames, painted


def _metrics(
    name: str,
    scan: _Scan,
    frames: list[FrameProgress],
    painted: int | None,
    options: AnalysisOptions,
) -> VisualMetrics:
    assert scan.area is not None and scan.start_match is not None
    times = [f.t_ms for f in frames]
    progress = [f.progress for f in frames]
    end_t = scan.times[scan.end] - _time_zero(scan, options)
    span = scan.times[scan.end] - scan.times[scan.start]
    changes = [f.t_ms for f in frames[1:] if f.unique]
    if options.blank_color is not None:
        # The first change is the first frame unlike the blank page: a browser that shows
        # the blank page before its first paint (Firefox) has not drawn anything yet.
        if painted is not None:
            changes = [frames[painted].t_ms, *(t for t in changes if t > frames[painted].t_ms)]
    elif options.time_zero_ms is not None:
        # From the user's action, the first frame unlike the green screen is the first change.
        changes.insert(0, frames[0].t_ms)
    if options.time_zero_ms is not None:
        # The screen showed nothing of the page until the first frame after the green one.
        times, progress = [0.0, *times], [0.0, *progress]
    if options.blank_color is not None and painted is None and not changes:
        raise CaptureError(
            f"{name}: nothing between the {color_name(options.start_color)} (start) and "
            f"{color_name(options.end_color)} (end) screens differs from the blank page: the "
            "page drew nothing, so it has no visual progress to measure"
        )
    fps, variable, dropped = _frame_rate(scan.times[: scan.end + 1])
    if options.paced_fps is not None:
        dropped = missed_ticks(scan.times[scan.start : scan.end + 1], options.paced_fps)
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
        unique_fps=round(len(scan.unique) / (span / 1000.0), 3) if span > 0 else 0.0,
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
        capture_noise=round(scan.noise, 2),
        pixel_threshold=scan.pixel_threshold,
        frames=frames,
    )


def _time_zero(scan: _Scan, options: AnalysisOptions) -> float:
    start = scan.times[scan.start]
    if options.time_zero_ms is None:
        return start
    if options.time_zero_ms > start:
        raise SyncError(
            f"time zero ({options.time_zero_ms:.0f} ms) comes after the first frame after the "
            f"green screen ({start:.0f} ms)"
        )
    return options.time_zero_ms


def _seen(image: Image) -> tuple[float, float, float]:
    """The median colour of a sync screen as captured, RGB."""
    b, g, r = np.median(image.reshape(-1, 3), axis=0).tolist()
    return (r, g, b)


def _fps(times: list[float]) -> float:
    return _frame_rate(times)[0] if len(times) >= 3 else 60.0


def _frame_rate(times: list[float]) -> tuple[float, bool, int]:
    """Capture rate, whether it varies, and frames missing from a constant-rate capture (gaps
    that are whole multiples of the usual interval). A variable-rate recording (screen
    recorders emit frames only on change) has no missing frames to count."""
    if len(times) < 3:
        return 60.0, False, 0
    intervals = np.diff(np.asarray(times))
    median = float(np.median(intervals))
    if not median > 0:  # most frames share a time: no rate to read from them
        return 60.0, True, 0
    ratio = intervals / median
    # Containers round timestamps (16, 17, 17 ms at 60 fps): average the ordinary intervals.
    # A capture that sends frames only on change may have none near the median: it is one.
    ordinary = intervals[(ratio > 0.5) & (ratio < 1.5)]
    usual = float(ordinary.mean()) if ordinary.size else median
    ratio = intervals / usual
    off_grid = np.abs(ratio - np.round(ratio)) > 0.15
    variable = bool(off_grid.mean() > 0.05)
    dropped = 0 if variable else int(np.sum(np.maximum(np.round(ratio) - 1, 0)))
    return 1000.0 / usual, variable, dropped


def missed_ticks(times: list[float], fps: float) -> int:
    """Frames a capture polled at `fps` left out between `times` (ms): a gap of about k
    intervals holds k - 1. A loaded host makes every grab a little late, which read the rate
    as variable and counted no gap at all, a 101 ms hole among them (a tester's find)."""
    if len(times) < 2:
        return 0
    ticks = np.diff(np.asarray(times)) * fps / 1000.0
    return int(np.sum(np.maximum(np.round(ticks) - 1, 0)))


def _span(times: list[float]) -> str:
    return f"{times[-1] - times[0]:.0f} ms after the first frame" if times else "before any frame"
