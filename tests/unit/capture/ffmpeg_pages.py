"""Page loads drawn by ffmpeg, not by labd: solid blocks painted at known frames, so the
visual metrics' ground truth is known from the blocks' areas and frame numbers alone."""

from __future__ import annotations

import itertools
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import need_program

WIDTH, HEIGHT, FPS = 320, 240, 30


@dataclass(frozen=True)
class Paint:
    frame: int  # the first frame that shows it
    x: int
    y: int
    w: int
    h: int
    color: str  # an ffmpeg colour name

    @property
    def area(self) -> int:
        return self.w * self.h


def write(
    path: Path,
    paints: list[Paint],
    green_until: int,
    red_from: int,
    background: str = "white",
    codec: list[str] | None = None,
    limited_range: bool = False,
) -> Path:
    """Green up to frame `green_until`, then the page on `background` with `paints`, then red
    from `red_from` (five frames of it). Lossless FFV1 unless `codec` says otherwise;
    `limited_range` squeezes every level into 16-235 as many capture cards do."""
    ffmpeg = need_program("ffmpeg")
    boxes = [
        f"drawbox=x={p.x}:y={p.y}:w={p.w}:h={p.h}:color={p.color}:t=fill:enable='gte(n,{p.frame})'"
        for p in paints
    ]
    boxes.append(
        f"drawbox=x=0:y=0:w={WIDTH}:h={HEIGHT}:color=lime:t=fill:enable='lt(n,{green_until})'"
    )
    boxes.append(
        f"drawbox=x=0:y=0:w={WIDTH}:h={HEIGHT}:color=red:t=fill:enable='gte(n,{red_from})'"
    )
    if limited_range:
        boxes.append("lutrgb=r='16+val*219/255':g='16+val*219/255':b='16+val*219/255'")
    frames = red_from + 5
    source = f"color={background}:s={WIDTH}x{HEIGHT}:r={FPS}:d={frames / FPS}"
    command = [ffmpeg, "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", source]
    command += ["-vf", ",".join(["format=rgb24", *boxes]), "-frames:v", str(frames)]
    command += codec or ["-c:v", "ffv1", "-pix_fmt", "bgr0"]
    subprocess.run([*command, str(path)], check=True, timeout=60)
    return path


def speed_index(paints: list[Paint], first_frame: int) -> float:
    """Ground truth in ms from `first_frame` (the first frame after green): progress is the
    painted share of the final page's painted area (blocks of distinct colours on white, so
    histogram and pixel progress agree)."""
    total = sum(p.area for p in paints)
    events = sorted({max(p.frame, first_frame) for p in paints} | {first_frame})
    si = 0.0
    for start, end in itertools.pairwise(events):
        drawn = sum(p.area for p in paints if p.frame <= start)
        si += (end - start) * 1000 / FPS * (1 - drawn / total)
    return si
