"""Recordings with exact ground truth: a page load between a green and a red screen, drawn
frame by frame. Tests and benchmarks check the analyses against them; a lab can record one
through its own capture chain to check that chain.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from numpy.typing import NDArray

from labd.capture.colors import RGB, to_bgr

Image = NDArray[np.uint8]

CHROME = (60, 60, 60)  # a strip of browser chrome above the content, never analysed
PALETTE: list[RGB] = [
    (200, 30, 40),
    (30, 90, 200),
    (20, 150, 60),
    (120, 40, 160),
    (230, 140, 0),
    (0, 0, 0),
]


@dataclass(frozen=True)
class Block:
    at_frame: int  # frames after the first content frame
    x: int
    y: int
    w: int
    h: int
    color: RGB


@dataclass
class PageLoad:
    """Green for `lead` frames, the page for `length` frames (blocks appearing), then red."""

    width: int = 640
    height: int = 480
    fps: float = 60.0
    chrome: int = 40  # pixels of chrome at the top
    lead: int = 10
    length: int = 60
    tail: int = 5
    blocks: list[Block] = field(default_factory=list)
    background: RGB = (255, 255, 255)
    start_color: RGB = (0, 255, 0)
    end_color: RGB = (255, 0, 0)
    animate: bool = False  # a moving bar in every frame (every frame unique)

    @classmethod
    def staircase(
        cls, width: int = 640, height: int = 480, steps: int = 5, spacing: int = 6, **kw: object
    ) -> PageLoad:
        """Blocks of different sizes appearing every `spacing` frames."""
        page = cls(width=width, height=height, **kw)  # type: ignore[arg-type]
        content_h = height - page.chrome
        blocks = []
        for i in range(steps):
            w = (width // (steps + 1)) // 2 * 2
            h = ((i + 1) * content_h // (steps + 2)) // 2 * 2
            x = (w // 2 + i * w) // 2 * 2
            blocks.append(
                Block(
                    at_frame=2 + i * spacing,
                    x=x,
                    y=20,
                    w=w - 4,
                    h=h,
                    color=PALETTE[i % len(PALETTE)],
                )
            )
        page.blocks = blocks
        return page

    @property
    def start_frame(self) -> int:
        return self.lead

    @property
    def end_frame(self) -> int:
        return self.lead + self.length

    def frames(self) -> Iterator[Image]:
        frame = np.empty((self.height, self.width, 3), np.uint8)
        frame[:] = to_bgr(CHROME)
        content = frame[self.chrome :]
        content[:] = to_bgr(self.start_color)
        for _ in range(self.lead):
            yield frame.copy()
        content[:] = to_bgr(self.background)
        for i in range(self.length):
            for block in self.blocks:
                if block.at_frame == i:
                    content[block.y : block.y + block.h, block.x : block.x + block.w] = to_bgr(
                        block.color
                    )
            if self.animate:
                shown = content.copy()
                x = (i * 7) % (self.width - 16)
                shown[-12:, x : x + 16] = (0, 0, 0)
                yield np.vstack([frame[: self.chrome], shown])
            else:
                yield frame.copy()
        content[:] = to_bgr(self.end_color)
        for _ in range(self.tail):
            yield frame.copy()

    def timed_frames(self) -> list[tuple[float, Image]]:
        return [(i * 1000.0 / self.fps, f) for i, f in enumerate(self.frames())]

    # Ground truth, in ms from the first frame after the green screen. The last frame is the
    # complete page, so blocks due after it do not count.
    def shown(self) -> list[Block]:
        return [b for b in self.blocks if b.at_frame < self.length]

    def progress(self) -> list[float]:
        total = sum(b.w * b.h for b in self.shown())
        drawn = 0
        result = []
        for i in range(self.length):
            drawn += sum(b.w * b.h for b in self.shown() if b.at_frame == i)
            result.append(drawn / total if total else 1.0)
        return result

    def times(self) -> list[float]:
        return [i * 1000.0 / self.fps for i in range(self.length)]

    def speed_index(self) -> float:
        times, progress = self.times(), self.progress()
        return sum((times[i] - times[i - 1]) * (1 - progress[i - 1]) for i in range(1, len(times)))

    def visually_complete_ms(self) -> float:
        return max(b.at_frame for b in self.shown()) * 1000.0 / self.fps

    def first_visual_change_ms(self) -> float:
        return min(b.at_frame for b in self.shown()) * 1000.0 / self.fps

    def write(self, path: Path, fourcc: str = "FFV1") -> Path:
        """Losslessly by default (FFV1 in .mkv), so the ground truth holds exactly."""
        writer = cv2.VideoWriter(
            str(path), cv2.VideoWriter.fourcc(*fourcc), self.fps, (self.width, self.height)
        )
        if not writer.isOpened():
            raise OSError(f"{path}: cannot write {fourcc}")
        for frame in self.frames():
            writer.write(frame)
        writer.release()
        return path
