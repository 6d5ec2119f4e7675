"""What users see, as pure functions of frames (BGR images of the content area) and times.

Progress is histogram-based, as WebPageTest and browsertime compute it: the share of the last
frame's colours (per channel histograms, near-white pixels left out: page backgrounds would
swamp the counts) that a frame shows, against the blank page's. The pixel-exact option measures
instead the share of pixels already equal to the last frame. Speed Index is the area above the
progress curve.
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


class Scratch:
    """Buffers reused from frame to frame, one set per thread: a fresh 6 MB array for every
    1080p frame costs more in page faults than the arithmetic done in it (5.2 against 1.6 ms
    for `changed_mask` here)."""

    def __init__(self) -> None:
        self.buffers: dict[str, Image] = {}

    def get(self, name: str, shape: tuple[int, ...]) -> Image:
        buffer = self.buffers.get(name)
        if buffer is None or buffer.shape != shape:
            buffer = self.buffers[name] = np.empty(shape, np.uint8)
        return buffer


def changed_mask(a: Image, b: Image, threshold: int, scratch: Scratch | None = None) -> Image:
    """1 where any channel differs by more than `threshold`, else 0. With `scratch`, the
    result lives in its buffer until the next call."""
    scratch = scratch or Scratch()
    over = scratch.get("over", a.shape)
    mask = scratch.get("mask", a.shape[:2])
    cv2.absdiff(a, b, dst=over)
    cv2.threshold(over, threshold, 255, cv2.THRESH_BINARY, dst=over)
    # Grey of a 0/255 image is non-zero wherever one channel is 255 (blue weighs 0.114 * 255).
    cv2.cvtColor(over, cv2.COLOR_BGR2GRAY, dst=mask)
    cv2.threshold(mask, 0, 1, cv2.THRESH_BINARY, dst=mask)
    return mask


def share_changed(mask: Image) -> float:
    return cv2.countNonZero(mask) / mask.size


def similarity(a: Image, b: Image, threshold: int, scratch: Scratch | None = None) -> float:
    """Share of pixels of `a` equal (within threshold) to `b`: the seed's load histogram."""
    return 1.0 - share_changed(changed_mask(a, b, threshold, scratch))


HISTOGRAM_WIDTH = 640  # histograms sample every n-th pixel so that about this many remain across


def subsample(image: Image, step: int) -> Image:
    """Every step-th pixel in both directions (nearest, no blending of colours; far faster
    than copying a strided view)."""
    if step == 1:
        return image
    size = (max(1, image.shape[1] // step), max(1, image.shape[0] // step))
    return np.asarray(cv2.resize(image, size, interpolation=cv2.INTER_NEAREST), dtype=np.uint8)


# A frame-to-frame difference past this many noise deviations counts as a change: at 6, noise
# alone passes in about 2 of 10^9 channel values, far under `min_changed`.
NOISE_DEVIATIONS = 6.0


def capture_noise(before: Image, after: Image) -> float:
    """The capture chain's noise (the standard deviation of one channel value, in levels),
    from two frames of one still, uniform screen: per channel, from their difference (1.4826
    times its median absolute deviation, over sqrt(2) for two frames), or, for a channel whose
    level sits at 0 or 255 where noise is clipped, from the mean distance to that level (of
    a half-normal: sigma / sqrt(2 pi)). The noisiest channel's; 0 for a digital capture."""
    noise = 0.0
    for channel in range(3):
        a = after[..., channel].astype(np.int16)
        level = float(np.median(a))
        if level <= 2 or level >= 253:
            spread = float(np.mean(a if level <= 2 else 255 - a)) * np.sqrt(2 * np.pi)
        else:
            d = a - before[..., channel].astype(np.int16)
            mad = float(np.median(np.abs(d - np.median(d))))
            spread = 1.4826 * mad / np.sqrt(2)
        noise = max(noise, spread)
    return noise


def noise_threshold(noise: float, threshold: int) -> int:
    """The channel difference that counts as a change: `threshold`, or more where the
    capture's own noise would pass it (a camera: every frame read as new)."""
    return max(threshold, int(np.ceil(NOISE_DEVIATIONS * np.sqrt(2) * noise)))


def sampled(image: Image) -> Image:
    """The frame as histograms see it: about HISTOGRAM_WIDTH pixels across."""
    return subsample(image, max(1, image.shape[1] // HISTOGRAM_WIDTH))


def not_white(image: Image) -> Image:
    """255 where a pixel is not near-white (browsertime leaves those out of its histograms)."""
    white = cv2.inRange(image, (WHITE_LEVEL,) * 3, (255,) * 3)
    return np.asarray(cv2.bitwise_not(white), dtype=np.uint8)


def _histograms(image: Image, mask: Image) -> Histogram:
    channels = [cv2.calcHist([image], [c], mask, [256], [0, 256]).ravel() for c in range(3)]
    return np.stack(channels).astype(np.float64)


def histogram_distance(
    image: Image, final: Image, changed: Image, final_kept: Image | None = None
) -> float:
    """How far a frame's colours are from the last frame's: the last frame's colours the frame
    lacks, per channel, over the pixels where the two differ (`changed`, from `changed_mask`;
    images as `sampled` gives them). Pixels equal in both cancel out exactly, so compression
    noise under the threshold and content that only moved (a spinner, a caret) cost nothing.
    Colours the last frame does not hold cost nothing either, as in WebPageTest's matching of
    histograms: a background painted before the content, a splash screen, a skeleton or a dark
    flash is no progress, and no less than none (counted as distance, a late dark background
    made every frame after it read 0 until the last paint). `final_kept`, from
    `not_white(final)`, leaves near-white out."""
    if cv2.countNonZero(changed) == 0:
        return 0.0
    mine, theirs = changed, changed
    if final_kept is not None:
        mine = np.asarray(cv2.bitwise_and(changed, not_white(image)), dtype=np.uint8)
        theirs = np.asarray(cv2.bitwise_and(changed, final_kept), dtype=np.uint8)
    missing = _histograms(final, theirs) - _histograms(image, mine)
    return float(np.maximum(missing, 0.0).sum())


def histogram_progress(distance: float, start_distance: float) -> float:
    """Visual progress from histogram distances to the last frame, the blank page's being 0%."""
    if start_distance <= 0:
        return 1.0
    return max(0.0, min(1.0, 1.0 - distance / start_distance))


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
    `square` pixels: a pixel of either colour with both colours present around it. Measured
    on every (square // 4)-th pixel, so a square is still 4 pixels across: at 1080x1920 with
    16-pixel squares 6 ms a frame instead of 62, the same share to 0.01% on a test frame."""
    step = max(1, square // 4)
    if step > 1:
        image = np.ascontiguousarray(image[::step, ::step])
        square //= step
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


def as_captured(color: RGB, references: Sequence[tuple[RGB, tuple[float, float, float]]]) -> RGB:
    """`color` as this capture chain shows it, from known colours (the sync screens) as it
    showed them: one gain and offset over all channels, fitted by least squares (a capture
    card's 16-235 levels turn white into 235 grey). Without a spread of known levels to fit,
    the colour as it is."""
    nominal = np.array([c for rgb, _ in references for c in rgb], np.float64)
    seen = np.array([c for _, shown in references for c in shown], np.float64)
    if nominal.size < 2 or float(np.ptp(nominal)) < 64:
        return color
    gain, offset = np.polyfit(nominal, seen, 1)
    r, g, b = (round(min(255.0, max(0.0, float(gain * c + offset)))) for c in color)
    return (r, g, b)


BLANK_NEAR = 48  # levels per channel a blank page may sit from the level fitted for it


def blank_as_shown(expected: Image, first: Image, threshold: int) -> Image:
    """The blank page as the chain showed it, where the first frame after the green screen
    tells: the frame itself where it is one colour (all but 0.1% of it within `threshold` of
    its median) within BLANK_NEAR levels of the colour fitted for the blank and no darker; else
    the near-white the frame shows, where the fitted colour is not near-white but 1% of the
    frame is; else `expected`. A chain that maps saturated sync colours and white apart
    (colour management, a camera's white balance) put white 20 levels below the fitted level,
    and the blank page read as a first paint. A uniform light grey first paint darker than
    the fitted blank is the page's, not the blank."""
    small = sampled(first)
    pixels = small.reshape(-1, 3)
    fitted = expected[0, 0].astype(np.float64)
    median = np.median(pixels, axis=0)
    off = np.abs(small.astype(np.int16) - median.astype(np.int16)).max(axis=2)
    uniform = float(np.mean(off > threshold)) <= 0.001
    near = float(np.abs(median - fitted).max()) <= BLANK_NEAR
    shown: NDArray[np.float64] | None = None
    if uniform and near and bool(np.all(median >= fitted - threshold)):
        shown = median
    elif bool(np.any(fitted < WHITE_LEVEL)) and float(np.min(fitted)) >= 255 - BLANK_NEAR:
        white = np.all(pixels >= WHITE_LEVEL, axis=1)
        if float(np.mean(white)) >= 0.01:
            shown = np.median(pixels[white], axis=0)
    if shown is None:
        return expected
    image = np.empty_like(expected)
    image[:] = np.round(shown).astype(np.uint8)
    return image


def solid(color: RGB, like: Image) -> Image:
    """A frame of one colour, the shape of `like` (tearing tests use solid colours)."""
    image = np.empty_like(like)
    image[:] = to_bgr(color)
    return image
