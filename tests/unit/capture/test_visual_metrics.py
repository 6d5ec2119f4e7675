"""Visual metrics against recordings whose ground truth is known exactly."""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import pytest

from labd.capture import AnalysisOptions, Artifacts, Checkerboard, FrameList, SyncError, analyze
from labd.capture.colors import PRESETS
from labd.capture.synthetic import Block, PageLoad


def test_staircase_page_load_matches_ground_truth() -> None:
    page = PageLoad.staircase(steps=5, spacing=6)
    result = analyze(FrameList(page.timed_frames()))
    assert result.start_frame == page.start_frame
    assert result.end_frame == page.end_frame
    assert result.first_visual_change_ms == pytest.approx(page.first_visual_change_ms())
    assert result.visually_complete_ms == pytest.approx(page.visually_complete_ms())
    assert result.last_visual_change_ms == pytest.approx(page.visually_complete_ms())
    assert result.speed_index == pytest.approx(page.speed_index(), abs=0.01)
    # The start frame and one per block are the only distinct frames.
    assert result.unique_frames == 1 + len(page.blocks)
    assert result.unique_fps == pytest.approx(6 / (page.length / page.fps))
    # The chrome strip above is not part of the content area.
    assert (result.content_area.y, result.content_area.h) == (
        page.chrome,
        page.height - page.chrome,
    )
    assert result.sync_confidence == 1.0
    assert result.dropped_frames == 0 and not result.variable_frame_rate


def test_progress_per_frame_is_the_drawn_share_of_the_page() -> None:
    page = PageLoad.staircase(steps=4, spacing=5)
    for method in ("histogram", "pixel"):
        result = analyze(FrameList(page.timed_frames()), AnalysisOptions(progress=method))
        measured = [f.progress for f in result.frames]
        if method == "histogram":
            assert measured == pytest.approx(page.progress(), abs=1e-9)
        else:
            # Pixel-exact progress counts pixels of the whole content area, so it is the
            # drawn share of the blocks' pixels as well.
            assert measured == pytest.approx(page.progress(), abs=1e-9)
        assert result.speed_index == pytest.approx(page.speed_index(), abs=0.01)


def test_visual_complete_levels_follow_the_progress_curve() -> None:
    # One block of 80% of the drawn area at frame 3, the rest at frame 20.
    page = PageLoad(
        blocks=[Block(3, 0, 0, 400, 200, (200, 30, 40)), Block(20, 0, 300, 200, 100, (30, 90, 200))]
    )
    result = analyze(FrameList(page.timed_frames()))
    frame_ms = 1000 / page.fps
    assert result.visual_complete_85_ms == pytest.approx(20 * frame_ms)
    assert result.first_visual_change_ms == pytest.approx(3 * frame_ms)
    assert result.visually_complete_ms == pytest.approx(20 * frame_ms)
    # Histogram progress: 80000 of 100000 pixels drawn from frame 3 to 20.
    assert result.speed_index == pytest.approx(3 * frame_ms + 17 * frame_ms * 0.2, abs=0.01)


def test_animation_counts_every_frame_as_unique() -> None:
    page = PageLoad.staircase(animate=True)
    result = analyze(FrameList(page.timed_frames()))
    assert result.unique_frames == page.length
    assert result.unique_fps == pytest.approx(page.fps)


def test_times_are_taken_from_timestamps_not_the_frame_count() -> None:
    """Variable frame rate: a screen recorder sends frames only when something changes."""
    page = PageLoad.staircase(steps=3, spacing=10)
    frames = page.timed_frames()
    # Keep the sync frames and only the frames where something changed, at their own times.
    keep = [
        0,
        1,
        page.start_frame,
        *(page.start_frame + b.at_frame for b in page.blocks),
        page.end_frame,
    ]
    sparse = [frames[i] for i in keep]
    result = analyze(FrameList(sparse))
    assert result.variable_frame_rate
    assert result.dropped_frames == 0
    assert result.visually_complete_ms == pytest.approx(page.visually_complete_ms())
    assert result.speed_index == pytest.approx(page.speed_index(), abs=0.01)


def test_dropped_frames_are_counted_from_gaps_in_a_constant_rate() -> None:
    page = PageLoad.staircase()
    frames = page.timed_frames()
    missing = {25, 26, 40}
    result = analyze(FrameList([f for i, f in enumerate(frames) if i not in missing]))
    assert result.dropped_frames == 3
    assert not result.variable_frame_rate


def test_heat_map_is_hot_where_pixels_change(tmp_path: Path) -> None:
    page = PageLoad(
        blocks=[Block(5, 100, 100, 50, 50, (0, 0, 0)), Block(9, 100, 100, 20, 20, (200, 30, 40))]
    )
    result = analyze(
        FrameList(page.timed_frames()), artifacts=Artifacts(heatmap=tmp_path / "heat.png")
    )
    heat = cv2.imread(result.artifacts["heatmap"])
    assert heat.shape[:2] == (page.height - page.chrome, page.width)
    scale = cv2.applyColorMap(np.array([[0, 127, 255]], np.uint8), cv2.COLORMAP_JET)[0]
    assert (heat[100:120, 100:120] == scale[2]).all()  # changed twice: the hottest
    assert (heat[130:150, 130:150] == scale[1]).all()  # changed once
    assert (heat[200:, :] == scale[0]).all()  # never changed


def test_checkerboard_share_is_measured() -> None:
    page = PageLoad(blocks=[Block(2, 0, 0, 320, 440, (20, 150, 60))])
    frames = page.timed_frames()
    board = np.indices((440, 320)).sum(axis=0) // 16 % 2  # 16 px squares
    for _t, image in frames[page.start_frame + 10 : page.start_frame + 40]:
        checker = np.where(board[..., None] == 1, 192, 255).astype(np.uint8)
        image[page.chrome :, 320:] = checker
    options = AnalysisOptions(
        checkerboard=Checkerboard(colors=((255, 255, 255), (192, 192, 192)), square=16)
    )
    result = analyze(FrameList(frames), options)
    # Half the content area is checkerboard in 30 of the 60 frames: 25%.
    assert result.checkerboard_percent == pytest.approx(25.0, abs=1.5)


def test_tearing_is_found_with_disjoint_colour_frames() -> None:
    page = PageLoad(length=20)
    frames = page.timed_frames()
    colors = [PRESETS["blue"], PRESETS["magenta"]]
    for k, (_t, image) in enumerate(frames[page.start_frame : page.end_frame]):
        content = image[page.chrome :]
        content[:] = colors[k % 2][::-1]
        if k == 7:  # the top half of one frame, the bottom of the next
            content[: content.shape[0] // 2] = colors[0][::-1]
            content[content.shape[0] // 2 :] = colors[1][::-1]
    result = analyze(FrameList(frames), AnalysisOptions(tearing_colors=colors))
    assert result.torn_frames == [page.start_frame + 7]


def test_time_zero_at_the_users_action() -> None:
    """Measured from when Enter was pressed, the wait for the first paint counts too (the
    blank white frame before the first block is not a paint)."""
    page = PageLoad.staircase(steps=5, spacing=6)
    frames = page.timed_frames()
    start_ms = frames[page.start_frame][0]
    plain = analyze(FrameList(frames))
    shifted = analyze(FrameList(frames), AnalysisOptions(time_zero_ms=start_ms - 100))
    assert plain.first_visual_change_ms is not None
    assert shifted.first_visual_change_ms == pytest.approx(plain.first_visual_change_ms + 100)
    assert shifted.visually_complete_ms == pytest.approx(plain.visually_complete_ms + 100)
    assert shifted.speed_index == pytest.approx(plain.speed_index + 100, abs=0.01)
    assert shifted.unique_fps == plain.unique_fps
    with pytest.raises(SyncError, match=r"time zero .* comes after the first frame"):
        analyze(FrameList(frames), AnalysisOptions(time_zero_ms=start_ms + 1))


@pytest.mark.parametrize("sigma", [0.0, 2.0, 3.0, 6.0])
def test_a_noisy_capture_is_measured_in_the_light_of_its_own_noise(sigma: float) -> None:
    """A camera's noise (sigma 3 levels) passed the fixed 12-level threshold in every frame: a
    tester's still page read 83 unique frames, visually complete at the last frame and a first
    change at 0. The noise is measured on the green screen and the threshold raised to it."""
    page = PageLoad.staircase(steps=4, spacing=5)
    rng = np.random.default_rng(3)
    noisy = [
        (t, np.clip(frame + rng.normal(0, sigma, frame.shape).round(), 0, 255).astype(np.uint8))
        for t, frame in page.timed_frames()
    ]
    result = analyze(FrameList(noisy))
    assert result.capture_noise == pytest.approx(sigma, abs=0.35)
    assert (result.pixel_threshold > 12) == (sigma >= 2)  # 6 deviations of a difference
    assert result.pixel_threshold >= 12 and result.pixel_threshold >= 6 * math.sqrt(2) * sigma - 1
    assert result.unique_frames == 1 + len(page.blocks)
    assert result.first_visual_change_ms == pytest.approx(page.first_visual_change_ms())
    assert result.visually_complete_ms == pytest.approx(page.visually_complete_ms())
    assert result.speed_index == pytest.approx(page.speed_index(), rel=0.01)


def test_sync_screens_dimmer_than_white_do_not_make_the_blank_page_a_paint() -> None:
    """Green and red shown at 235, white at 255 (colour management treats them apart): the
    blank fitted to the sync screens was 235 grey, so the white page read as a first paint at
    0 and Speed Index halved (a tester's find). The blank page is taken as shown where the
    first frame is one colour near the fitted one."""
    page = PageLoad.staircase(steps=4, spacing=5, start_color=(0, 235, 0), end_color=(235, 0, 0))
    result = analyze(FrameList(page.timed_frames()))
    assert result.first_visual_change_ms == pytest.approx(page.first_visual_change_ms())
    assert result.speed_index == pytest.approx(page.speed_index(), abs=0.01)


def test_a_paced_capture_counts_the_frames_a_loaded_host_left_out() -> None:
    """A tester's loaded host: every grab a few ms late read the rate as variable, which
    counts no gap, and a 101 ms hole that cost a step 67 ms passed as one dropped frame. A
    capture polled at a known rate counts its gaps against that rate; before the green screen
    ends and after the red one begins, nothing counts."""
    page = PageLoad.staircase()  # 60 fps: 16.7 ms a frame
    rng = np.random.default_rng(3)
    frames = []
    for i, (t, image) in enumerate(page.timed_frames()):
        if i in (2, 3, 4, 30, 31, 32, 33, 50, 72):  # a 5-tick hole in the span at 30-33
            continue
        frames.append((t + float(rng.uniform(0, 8)), image))  # late by up to half a tick
    recorded = analyze(FrameList(frames))
    assert recorded.variable_frame_rate and recorded.dropped_frames == 0  # as it was
    paced = analyze(FrameList(frames), AnalysisOptions(paced_fps=60))
    assert paced.dropped_frames == 5  # 30-33 and 50; not 2-4 (green), not 72 (red)
