"""What users see, as pure functions of frames (BGR images of the content area) and times.

Progress follows WebPageTest and browsertime: a frame's visual progress is how far its colour
histograms have moved from the first frame's towards the last frame's, near-white pixels left
out (page backgrounds would swamp the counts). The pixel-exact option measures instead the share
of pixels already equal to the last frame. Speed Index is the area above the progress curve.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
from numpy.typing import NDArray

from labd.capture.colors import RGB, to_bgr

Image = NDArray[np.uint8]
Histogram = NDArray[np.float64]  # shape (3, 256)

WHITE_LEVEL = 250  # browsertime ignores pixels at least this bright in every channel


def changed_mask(a: Image, b: Image, threshold: int) -> Image:
    """255 where any channel differs by more than `threshold`."""
    over = cv2.threshold(cv2.absdiff(a, b), threshold, 255, cv2.THRESH_BINARY)[1]
    # Grey of a 0/255 image is non-zero wherever one channel is 255 (blue weighs 0.114 * 255).
    grey = cv2.cvtColor(over, cv2.COLOR_BGR2GRAY)
    return np.asarray(cv2.threshold(grey, 0, 255, cv2.THRESH_BINARY)[1], dtype=np.uint8)


def changed_values(a: Image, b: Image, threshold: int) -> int:
    """How many channel values differ by more than `threshold`: a cheap 'did it change'."""
    over = cv2.threshold(cv2.absdiff(a, b), threshold, 255, cv2.THRESH_BINARY)[1]
    return int(cv2.countNonZero(over.reshape(over.shape[0], -1)))


def similarity(a: Image, b: Image, threshold: int) -> float:
    """Share of pixels of `a` equal (within threshold) to `b`: the seed's load histogram."""
    mask = changed_mask(a, b, threshold)
    return 1.0 - cv2.countNonZero(mask) / mask.size


def histogram(image: Image, ignore_white: bool = True) -> Histogram:
    """Per-channel histograms of every other pixel (in both directions), near-white left out."""
    half = cv2.resize(image, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_NEAREST)
    mask = None
    if ignore_white:
        white = cv2.inRange(half, (WHITE_LEVEL,) * 3, (255, 255, 255))
        mask = cv2.bitwise_not(white)
    return np.stack(
        [cv2.calcHist([half], [c], mask, [256], [0, 256]).ravel() for c in range(3)]
    ).astype(np.float64)


def histogram_progress(current: Histogram, start: Histogram, final: Histogram) -> float:
    """How far `current` has moved from `start` towards `final`, 0..1. In every bin that must
    gain or lose pixels, movement in the right direction counts up to the change needed."""
    needed = final - start
    moved = current - start
    total = float(np.abs(needed).sum())
    if total == 0:
        return 1.0
    same_direction = np.sign(moved) == np.sign(needed)
    achieved = np.where(same_direction, np.minimum(np.abs(moved), np.abs(needed)), 0.0)
    return min(1.0, float(achieved.sum()) / total)


def pixel_progress(similar: float, start_similar: float) -> float:
    """Progress from similarity to the last frame, relative to where the first frame stood."""
    if start_similar >= 1.0:
        return 1.0
    return max(0.0, min(1.0, (similar - start_similar) / (1.0 - start_similar)))


def speed_index(times_ms: Sequence[float], progress: Sequence[float]) -> float:
    """Area above the visual progress curve, in ms: each interval weighs by what was still
    missing at its start."""
    total = 0.0
    for i in range(1, len(times_ms)):
        total += (times_ms[i] - times_ms[i - 1]) * (1.0 - progress[i - 1])
    return total


def first_reaching(times_ms: Sequence[float], progress: Sequence[float], level: float) -> float:
    """Time of the first frame at or above `level` of progress (the last frame reaches 1)."""
    for t, p in zip(times_ms, progress, strict=True):
        if p >= level - 1e-9:
            return t
    return times_ms[-1]


def checkerboard_fraction(
    image: Image, colors: tuple[RGB, RGB], square: int, tolerance: int
) -> float:
    """Share of pixels that belong to a checkerboard of the two colours with squares of
    `square` pixels: a pixel of either colour with both colours present around it."""
    near = []
    for rgb in colors:
        reference = np.empty_like(image)
        reference[:] = to_bgr(rgb)
        distance = cv2.transform(cv2.absdiff(image, reference), np.ones((1, 3), np.float32))
        near.append((distance <= tolerance).astype(np.float32))
    window = (2 * square, 2 * square)
    around_a = cv2.boxFilter(near[0], -1, window)
    around_b = cv2.boxFilter(near[1], -1, window)
    board = (near[0] + near[1] > 0) & (around_a > 0.2) & (around_b > 0.2)
    return float(board.mean())


def tearing_images(
    image: Image, references: Sequence[Image], threshold: int, min_share: float
) -> list[int]:
    """Which of the known, pairwise disjoint images this frame shows parts of. More than one
    means the frame tore (the seed's test: no false positives by construction)."""
    shown = []
    for index, reference in enumerate(references):
        if similarity(image, reference, threshold) >= min_share:
            shown.append(index)
    return shown


def solid(color: RGB, like: Image) -> Image:
    """A frame of one colour, the shape of `like` (tearing tests use solid colours)."""
    image = np.empty_like(like)
    image[:] = to_bgr(color)
    return image
