"""Visual progress measured from the blank page, not from the first frame after the green
screen, on page loads ffmpeg draws with known paint times and areas."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from labd.capture import AnalysisOptions, FrameList, VideoFile, analyze
from tests.unit.capture import ffmpeg_pages
from tests.unit.capture.ffmpeg_pages import FPS, Paint

FRAME_MS = 1000 / FPS
# 20,000 pixels of black, then 2,500 of blue: 88.9% of the page is in its first paint.
MOSTLY = Paint(30, 20, 20, 200, 100, "black")
REST = Paint(45, 240, 160, 50, 50, "blue")


def held_paint(path: Path, **kw: object) -> Path:
    """Chromium's paint holding: green until the first paint, which already shows content."""
    return ffmpeg_pages.write(path, [MOSTLY, REST], green_until=30, red_from=75, **kw)  # type: ignore[arg-type]


def blank_first(path: Path) -> Path:
    """Firefox: a blank white page for 500 ms after the green screen, then the same paints."""
    paints = [Paint(45, 20, 20, 200, 100, "black"), Paint(60, 240, 160, 50, 50, "blue")]
    return ffmpeg_pages.write(path, paints, green_until=30, red_from=90)


@pytest.mark.parametrize("method", ["histogram", "pixel"])
def test_a_first_paint_with_content_counts_as_progress(tmp_path: Path, method: str) -> None:
    result = analyze(VideoFile(held_paint(tmp_path / "held.mkv")), AnalysisOptions(progress=method))
    truth = ffmpeg_pages.speed_index([MOSTLY, REST], first_frame=30)
    assert truth == pytest.approx(55.56, abs=0.01)
    assert result.speed_index == pytest.approx(truth, abs=0.5)  # was 500: first frame = 0%
    assert result.visual_complete_85_ms == 0.0  # 88.9% from the first frame on
    assert result.visual_complete_95_ms == pytest.approx(15 * FRAME_MS)
    assert result.visually_complete_ms == pytest.approx(15 * FRAME_MS)
    assert result.first_visual_change_ms == 0.0
    assert result.frames[0].progress == pytest.approx(20000 / 22500, abs=1e-3)


def test_a_blank_page_before_the_first_paint_is_not_progress(tmp_path: Path) -> None:
    paints = [Paint(45, 20, 20, 200, 100, "black"), Paint(60, 240, 160, 50, 50, "blue")]
    result = analyze(VideoFile(blank_first(tmp_path / "blank.mkv")))
    assert result.speed_index == pytest.approx(ffmpeg_pages.speed_index(paints, 30), abs=0.5)
    assert result.visual_complete_85_ms == pytest.approx(15 * FRAME_MS)
    # The white frame after the green one is the blank page, not a visual change.
    assert result.first_visual_change_ms == pytest.approx(15 * FRAME_MS)


def test_both_browsers_behaviours_agree_from_the_users_action(tmp_path: Path) -> None:
    """The same page, painted 500 ms after Enter: Chromium holds green until then, Firefox
    shows white first; measured from Enter both give the same figures."""
    held = VideoFile(held_paint(tmp_path / "held.mkv"))
    blank = VideoFile(blank_first(tmp_path / "blank.mkv"))
    chromium = analyze(held, AnalysisOptions(time_zero_ms=1000 - 500))  # Enter at 500 ms
    firefox = analyze(blank, AnalysisOptions(time_zero_ms=1000))  # Enter as green ends
    truth = 500 + ffmpeg_pages.speed_index([MOSTLY, REST], first_frame=30)
    for result in (chromium, firefox):
        assert result.speed_index == pytest.approx(truth, abs=0.5)
        assert result.first_visual_change_ms == pytest.approx(500)
        assert result.visual_complete_85_ms == pytest.approx(500)
        assert result.visually_complete_ms == pytest.approx(1000)


def test_the_blank_page_is_taken_at_the_capture_chains_levels(tmp_path: Path) -> None:
    """A capture card's 16-235 levels show white as 235 grey: the blank page is what the
    chain makes of white (fitted to the green and red screens as captured), not 255."""
    video = VideoFile(held_paint(tmp_path / "card.mkv", limited_range=True))
    result = analyze(video, AnalysisOptions(progress="pixel"))
    truth = ffmpeg_pages.speed_index([MOSTLY, REST], first_frame=30)
    assert result.speed_index == pytest.approx(truth, abs=0.5)
    # Histograms no longer leave the 235-grey background out (near-white is 250 and up), so
    # they weigh colours differently from areas; the first paint still counts.
    assert analyze(video).visual_complete_85_ms == 0.0


def test_lossy_h264_keeps_the_ground_truth(tmp_path: Path) -> None:
    codec = ["-c:v", "libx264", "-preset", "ultrafast", "-crf", "18", "-pix_fmt", "yuv420p"]
    result = analyze(VideoFile(held_paint(tmp_path / "held.mp4", codec=codec)))
    truth = ffmpeg_pages.speed_index([MOSTLY, REST], first_frame=30)
    assert result.speed_index == pytest.approx(truth, abs=0.02 * 500)
    assert result.visual_complete_85_ms == 0.0


def test_a_dark_page_names_its_blank_colour(tmp_path: Path) -> None:
    paints = [Paint(30, 20, 20, 200, 100, "white"), Paint(45, 240, 160, 50, 50, "blue")]
    video = ffmpeg_pages.write(
        tmp_path / "dark.mkv", paints, green_until=30, red_from=75, background="black"
    )
    result = analyze(VideoFile(video), AnalysisOptions(blank_color=(0, 0, 0), progress="pixel"))
    assert result.speed_index == pytest.approx(ffmpeg_pages.speed_index(paints, 30), abs=0.5)


def test_labd_analyze_measures_from_the_blank_page(tmp_path: Path) -> None:
    """The tester's case: 90% of the page in its first paint, a 16x16 change a second later."""
    paints = [Paint(30, 0, 0, 320, 216, "navy"), Paint(60, 300, 220, 16, 16, "orange")]
    video = ffmpeg_pages.write(tmp_path / "firstpaint.mkv", paints, green_until=30, red_from=90)
    truth = ffmpeg_pages.speed_index(paints, first_frame=30)
    assert truth < 10  # the 16x16 block is 0.4% of what is painted
    for extra in ([], ["--progress", "pixel"]):
        done = subprocess.run(
            [sys.executable, "-m", "labd", "analyze", str(video), "--json", *extra],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["visual_complete_85_ms"] == 0.0  # was 1000
        assert result["speed_index"] == pytest.approx(truth, abs=1.0)  # was 1000
    first = subprocess.run(
        [sys.executable, "-m", "labd", "analyze", str(video), "--json", "--blank-color", "first"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert json.loads(first.stdout)["speed_index"] == pytest.approx(1000)  # the old baseline


@pytest.mark.parametrize("background", ["0x111111", "0xF2F2F2"])
@pytest.mark.parametrize("method", ["histogram", "pixel"])
def test_a_background_painted_before_the_content_is_not_negative_progress(
    tmp_path: Path, background: str, method: str
) -> None:
    """A dark or grey page: its background, painted first over the whole page, is farther
    from the final frame than the white blank is. Measured from the white blank (a re-tester's
    find), progress stayed 0 until the last paint: Speed Index 700 where the truth is 500.
    Progress is measured from whichever of the two is farther from complete."""
    halves = [Paint(39, 0, 0, 320, 120, "red"), Paint(51, 0, 120, 320, 120, "blue")]
    video = ffmpeg_pages.write(
        tmp_path / "bg.mkv", halves, green_until=30, red_from=75, background=background
    )
    result = analyze(VideoFile(video), AnalysisOptions(progress=method))
    truth = ffmpeg_pages.speed_index(halves, first_frame=30)
    assert truth == pytest.approx(500)
    assert result.speed_index == pytest.approx(truth, abs=0.5)


@pytest.mark.parametrize("background", ["0x202020", "0xF0F0F0", "0x808080"])
def test_a_background_painted_after_a_white_first_paint_is_not_negative_progress(
    tmp_path: Path, background: str
) -> None:
    """A late stylesheet or a dark theme: white first, then the whole page's background, then
    the content over it. Measured from the white (a tester's find, in Chromium too), every
    frame before the last read as less than none: Speed Index 1,000 where the truth is 750."""
    late = Paint(39, 0, 0, 320, 240, background)
    halves = [Paint(45, 0, 0, 320, 120, "red"), Paint(60, 0, 120, 320, 120, "blue")]
    video = ffmpeg_pages.write(tmp_path / "late.mkv", [late, *halves], green_until=30, red_from=90)
    result = analyze(VideoFile(video))
    truth = ffmpeg_pages.speed_index(halves, first_frame=30)
    assert truth == pytest.approx(750)
    assert result.speed_index == pytest.approx(truth, abs=0.5)
    assert result.visually_complete_ms == pytest.approx(30 * FRAME_MS)


def _frames(states: list[tuple[tuple[int, int, int], float, int]]) -> FrameList:
    """A page load as BGR frames at 30 fps: green x10, then (background, share of the page
    drawn in blue from the top, frames) states, then red x5."""

    def frame(bgr: tuple[int, int, int], share: float = 0.0) -> np.ndarray:
        image = np.empty((120, 160, 3), np.uint8)
        image[:] = bgr
        image[: int(120 * share)] = (200, 60, 30)
        return image

    shown = [frame((0, 255, 0))] * 10
    for background, share, count in states:
        shown += [frame(background, share)] * count
    shown += [frame((0, 0, 255))] * 5
    return FrameList([(i * 1000 / 30, f) for i, f in enumerate(shown)])


WHITE, BLACK, GREY = (255, 255, 255), (0, 0, 0), (230, 230, 230)


@pytest.mark.parametrize(
    ("states", "truth"),
    [
        # A dark flash mid-load: no progress while shown, and nothing else moves (measured
        # from the farthest frame, the half-drawn frames read 0.75).
        ([(WHITE, 0, 10), (WHITE, 0.5, 5), (BLACK, 0, 1), (WHITE, 0.5, 4), (WHITE, 1, 10)], 516.7),
        # A light grey first paint that gives way to white: the grey is no progress, and the
        # half-drawn page is half.
        ([(GREY, 0, 10), (WHITE, 0.5, 10), (WHITE, 1, 10)], 500.0),
        # A background that stays under the content is progress by the colours it shares.
        ([(WHITE, 0, 6), ((180, 180, 180), 0.0, 6), ((180, 180, 180), 0.3, 6)], 260.0),
    ],
)
def test_colours_the_last_frame_lacks_are_no_progress_and_no_less(
    states: list[tuple[tuple[int, int, int], float, int]], truth: float
) -> None:
    """As WebPageTest matches histograms: a frame's progress is the share of the last frame's
    colours it shows (near-white left out); colours the last frame lacks cost nothing."""
    result = analyze(_frames(states))
    assert result.speed_index == pytest.approx(truth, abs=2.0)
