"""What an analysis of a recording is asked (its options) and what it finds (visual metrics,
each frame's progress, the artifacts it wrote)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from labd.capture.colors import PRESETS, RGB, color_name
from labd.capture.sync import Rect


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
    blank_color: RGB | None = Field(
        PRESETS["white"],
        description="The page's blank colour: visual progress is measured from a frame of it, "
        "as WebPageTest and browsertime measure from the blank page shown before navigating "
        "(the screen shows the green sync screen, not the page, until the first paint). None: "
        "from the first frame after the green screen, whatever it shows.",
    )
    ignore_white: bool = True
    checkerboard: Checkerboard | None = None
    tearing_colors: list[RGB] = Field(default_factory=list)
    video_max_width: int = Field(
        960,
        ge=16,
        le=4096,
        description="kept video scaled down to this width (the console cuts stills of videos "
        "up to 4096 pixels a side)",
    )
    time_zero_ms: float | None = Field(
        None,
        description="Measure times from this capture timestamp (e.g. when Enter was pressed) "
        "instead of from the first frame after the green screen.",
    )
    paced_fps: float | None = Field(
        None,
        gt=0,
        le=1000,
        description="The rate a live capture polled the screen at: frames missing from the "
        "analysed span are counted from the gaps between its frames' times against it, however "
        "uneven a loaded host made them. None: read the rate from the frames (a recording).",
    )

    @model_validator(mode="after")
    def _colors_told_apart(self) -> AnalysisOptions:
        """Colours a pixel within the tolerance of both would make screens indistinguishable."""
        pairs = [("start", self.start_color, "end", self.end_color)]
        if len(self.tearing_colors) == 1:
            raise ValueError("tearing colours: give two or more (one colour cannot tear)")
        pairs += [
            ("tearing", a, "tearing", b)
            for i, a in enumerate(self.tearing_colors)
            for b in self.tearing_colors[i + 1 :]
        ]
        for what_a, a, what_b, b in pairs:
            if sum(abs(x - y) for x, y in zip(a, b, strict=True)) <= self.tolerance:
                raise ValueError(
                    f"{what_a} colour {color_name(a)} and {what_b} colour {color_name(b)} are "
                    f"within the tolerance ({self.tolerance}) of each other: a frame of one "
                    "would match both"
                )
        return self


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
    # The capture's noise (one channel value's deviation, in levels, on the green screen) and
    # the channel difference that counted as a change: the option's, or 6 noise deviations
    # of a difference where that is more (a camera's noise made every frame new).
    capture_noise: float = 0.0
    pixel_threshold: int = 12
    artifacts: dict[str, str] = Field(default_factory=dict)
    frames: list[FrameProgress] = Field(default_factory=list, exclude=True)


@dataclass
class Artifacts:
    video: Path | None = None
    heatmap: Path | None = None
    progress: Path | None = None


def untrustworthy(values: dict[str, float], min_sync: float, max_dropped: int) -> list[str]:
    """Why a page load's visual metrics cannot be trusted, if they cannot."""
    reasons = []
    if values["sync_confidence"] < min_sync:
        reasons.append(
            f"sync confidence {values['sync_confidence']:.2f} below {min_sync:g}: "
            "the green or red screen was not found clearly"
        )
    if values["dropped_frames"] > max_dropped:
        reasons.append(
            f"{values['dropped_frames']:.0f} dropped frames (more than {max_dropped}): "
            "visual changes may have been missed"
        )
    return reasons
