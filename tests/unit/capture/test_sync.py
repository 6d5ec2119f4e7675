"""Finding the sync screens in recordings as capture chains deliver them."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from labd.capture import AnalysisOptions, FrameList, SyncError, VideoFile, analyze
from labd.capture.colors import PRESETS, parse_color
from labd.capture.synthetic import PageLoad
from labd.errors import UsageError


def limited_range(image: np.ndarray) -> np.ndarray:
    """What many capture cards deliver: video levels 16-235 instead of 0-255."""
    return (image.astype(np.float32) * (219 / 255) + 16).astype(np.uint8)


def test_capture_card_levels_and_jpeg_noise_still_sync(tmp_path: Path) -> None:
    page = PageLoad.staircase(width=800, height=600)
    path = tmp_path / "card.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), page.fps, (800, 600))
    writer.set(cv2.VIDEOWRITER_PROP_QUALITY, 70)
    for frame in page.frames():
        writer.write(limited_range(frame))
    writer.release()
    result = analyze(VideoFile(path))
    assert (result.start_frame, result.end_frame) == (page.start_frame, page.end_frame)
    assert result.sync_confidence > 0.95
    area = result.content_area
    assert abs(area.y - page.chrome) <= 2 and abs(area.h - (page.height - page.chrome)) <= 4
    assert result.visually_complete_ms == pytest.approx(page.visually_complete_ms(), abs=1.0)
    assert result.speed_index == pytest.approx(page.speed_index(), rel=0.02)


def test_a_partly_drawn_green_screen_gives_way_to_the_full_one() -> None:
    page = PageLoad.staircase()
    frames = page.timed_frames()
    # The first lead-in frames show the green screen still being drawn, top part only.
    for k in range(3):
        content = frames[k][1][page.chrome :]
        content[(k + 1) * 100 :] = (255, 255, 255)
    result = analyze(FrameList(frames))
    assert result.start_frame == page.start_frame
    assert result.content_area.h == page.height - page.chrome


def test_browsertime_orange_lead_in_is_a_preset() -> None:
    page = PageLoad.staircase(start_color=PRESETS["orange"])
    options = AnalysisOptions(start_color=parse_color("orange"))
    result = analyze(FrameList(page.timed_frames()), options)
    assert result.start_frame == page.start_frame
    with pytest.raises(SyncError, match=r"no green"):
        analyze(FrameList(page.timed_frames()))


def test_colours_are_names_or_hex() -> None:
    assert parse_color("#DE640D") == (0xDE, 0x64, 0x0D)
    assert parse_color("Red") == (255, 0, 0)
    with pytest.raises(UsageError, match=r"'chartreuse'.*expected #RRGGBB"):
        parse_color("chartreuse")


def test_no_green_screen() -> None:
    black = [(i * 16.7, np.zeros((120, 160, 3), np.uint8)) for i in range(30)]
    with pytest.raises(SyncError, match=r"no green \(start\) screen found in 30 frames"):
        analyze(FrameList(black, name="black.mkv"))


def test_no_red_screen_says_where_the_capture_stopped() -> None:
    page = PageLoad.staircase()
    frames = page.timed_frames()[: page.end_frame - 10]
    with pytest.raises(
        SyncError, match=r"no red \(end\) screen after the green one at frame 10.*stop"
    ):
        analyze(FrameList(frames))


def test_a_file_that_stops_decoding_before_its_header_says_is_called_damaged() -> None:
    """A damaged file read as a capture that stopped (a tester's find): the header's frame
    count says otherwise."""
    page = PageLoad.staircase()
    damaged = FrameList(page.timed_frames()[: page.end_frame - 10], name="damaged.mkv")
    damaged.frame_count = page.end_frame + page.tail  # type: ignore[attr-defined]
    with pytest.raises(SyncError, match=r"header counts \d+ frames, so the file is damaged"):
        analyze(damaged)


def test_red_before_green() -> None:
    page = PageLoad.staircase(start_color=PRESETS["red"], end_color=PRESETS["green"])
    with pytest.raises(
        SyncError,
        match=r"red \(end\) screen at frame 0 comes before the green \(start\) .* frame 70",
    ):
        analyze(FrameList(page.timed_frames()))


def test_green_that_never_ends() -> None:
    page = PageLoad(lead=30, length=0, tail=0)
    with pytest.raises(SyncError, match=r"green \(start\) screen never ends"):
        analyze(FrameList(page.timed_frames()))


def test_empty_corrupt_and_truncated_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(UsageError, match=r"empty.mp4: the file is empty"):
        VideoFile(empty)
    garbage = tmp_path / "garbage.mkv"
    garbage.write_bytes(np.random.default_rng(1).bytes(50_000))
    with pytest.raises(UsageError, match=r"garbage.mkv: (not a video|no decodable frame)"):
        analyze(VideoFile(garbage))
    with pytest.raises(UsageError, match=r"missing.mkv: no such file"):
        VideoFile(tmp_path / "missing.mkv")
    whole = PageLoad.staircase().write(tmp_path / "whole.avi", "MJPG")
    cut = tmp_path / "cut.avi"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size * 2 // 3])
    with pytest.raises(SyncError, match=r"cut.avi: no red .*capture stop mid-run"):
        analyze(VideoFile(cut))
