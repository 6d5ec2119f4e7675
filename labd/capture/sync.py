"""Finding the green (start) and red (end) sync screens, and the content area they mark.

A pixel matches a sync colour when the sum of its channel differences is within a tolerance
(Eideticker used 30 on lossless frames; the default here also absorbs capture cards' limited
range, 16-235, and compression noise). The content area is the largest block of matching
rows and columns, so a strip of browser or OS chrome around it is left out (the seed's
addendum). Scanning works on a subsampled frame; the final rectangle is measured once at full
resolution.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from numpy.typing import NDArray

from labd.capture.colors import RGB, to_bgr
from labd.capture.visual import subsample

Image = NDArray[np.uint8]

_CHANNEL_SUM = np.ones((1, 3), dtype=np.float32)
SCAN_WIDTH = 240  # pixels across a subsampled frame; enough to see a screen-sized block


@dataclass(frozen=True)
class Rect:
    x: int
    y: int
    w: int
    h: int

    @property
    def area(self) -> int:
        return self.w * self.h

    def crop(self, image: Image) -> Image:
        return image[self.y : self.y + self.h, self.x : self.x + self.w]

    def scaled(self, step: int) -> Rect:
        return Rect(self.x * step, self.y * step, self.w * step, self.h * step)


@dataclass(frozen=True)
class SyncMatch:
    rect: Rect
    confidence: float  # fraction of the rectangle's pixels that match the colour


def scan_step(width: int) -> int:
    return max(1, width // SCAN_WIDTH)


def color_mask(image: Image, rgb: RGB, tolerance: int) -> NDArray[np.bool_]:
    """True where the pixel is within `tolerance` (sum over channels) of the colour."""
    reference = np.empty_like(image)
    reference[:] = to_bgr(rgb)
    diff = cv2.absdiff(np.ascontiguousarray(image), reference)
    total = cv2.transform(diff, _CHANNEL_SUM)  # numpy's sum over axis 2 is ~15 times slower
    return np.asarray(total <= tolerance)


def fraction_matching(image: Image, rgb: RGB, tolerance: int) -> float:
    if image.size == 0:
        return 0.0
    return float(color_mask(image, rgb, tolerance).mean())


def _longest_run(flags: NDArray[np.bool_]) -> tuple[int, int] | None:
    """[start, stop) of the longest run of True."""
    best: tuple[int, int] | None = None
    start = -1
    for i, flag in enumerate([*flags.tolist(), False]):
        if flag and start < 0:
            start = i
        elif not flag and start >= 0:
            if best is None or i - start > best[1] - best[0]:
                best = (start, i)
            start = -1
    return best


def find_block(mask: NDArray[np.bool_], min_area: float) -> SyncMatch | None:
    """The largest rectangle of matching rows and columns, if it covers `min_area` of the
    frame."""
    if not mask.any():
        return None
    row_share = mask.mean(axis=1)
    rows = _longest_run(row_share >= 0.5 * row_share.max())
    if rows is None:
        return None
    col_share = mask[rows[0] : rows[1]].mean(axis=0)
    cols = _longest_run(col_share >= 0.5)
    if cols is None:
        return None
    rect = Rect(cols[0], rows[0], cols[1] - cols[0], rows[1] - rows[0])
    if rect.area < min_area * mask.size:
        return None
    return SyncMatch(rect, float(rect.crop(mask).mean()))  # type: ignore[arg-type]


def find_sync(image: Image, rgb: RGB, tolerance: int, min_area: float) -> SyncMatch | None:
    """A screen of this colour in a frame (scanned subsampled), in full-frame coordinates."""
    step = scan_step(image.shape[1])
    match = find_block(color_mask(subsample(image, step), rgb, tolerance), min_area)
    if match is None:
        return None
    return SyncMatch(match.rect.scaled(step), match.confidence)


def exact_block(image: Image, rgb: RGB, tolerance: int, min_area: float) -> SyncMatch | None:
    """The same at full resolution: run once, on the sync frame that gives the content area."""
    return find_block(color_mask(image, rgb, tolerance), min_area)
