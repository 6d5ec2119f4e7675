"""Finding the sync screens in recordings as capture chains deliver them."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from labd.capture import (
    AnalysisOptions,
    Artifacts,
    CaptureError,
    FrameList,
    SyncError,
    VideoFile,
    analyze,
)
from labd.capture.colors import PRESETS, parse_color
from labd.capture.synthetic import Block, PageLoad
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


def test_a_second_green_screen_is_named_not_read_as_the_page() -> None:
    """Green, a first run, green again, the page, red (a tester's file): the numbers came from
    the first green, with the second read as the page's content, and sync confidence 1."""
    first = PageLoad.staircase(tail=0).timed_frames()[:30]
    second = PageLoad.staircase().timed_frames()
    frames = [(i * 1000 / 60, image) for i, (_, image) in enumerate(first + second)]
    with pytest.raises(
        SyncError,
        match=r"the green \(start\) screen again at frame 30, after the content began at frame 10",
    ):
        analyze(FrameList(frames, name="twice.mkv"))


def test_a_page_that_draws_nothing_has_no_visual_progress() -> None:
    """Green, the blank page unchanged, red: it had visually complete = Speed Index = the red
    screen's time, which follows how long the capture waited, not the page."""
    page = PageLoad(blocks=[])
    with pytest.raises(
        CaptureError, match=r"blank.mkv: nothing between the green \(start\) and red"
    ):
        analyze(FrameList(page.timed_frames(), name="blank.mkv"))
    # What a page draws on the blank page, however late, is progress.
    late = PageLoad(blocks=[Block(at_frame=59, x=0, y=0, w=40, h=40, color=(0, 0, 0))])
    result = analyze(FrameList(late.timed_frames()))
    assert result.visually_complete_ms == pytest.approx(late.visually_complete_ms())


def test_the_video_shows_each_change_when_a_variable_rate_capture_saw_it(tmp_path: Path) -> None:
    """A recording that sends frames only on change (a phone's screenrecord): its video showed
    them evenly spaced, changes at 420, 840 and 1261 ms that came at 120, 400 and 800 ms (a
    tester's file); the eye checks the numbers against this video."""
    green, white, red = np.zeros((120, 160, 3), np.uint8), None, None
    green[:] = (0, 255, 0)
    white = np.full_like(green, 255)
    red = np.zeros_like(green)
    red[:] = (0, 0, 255)
    shown, frames = white.copy(), [(0.0, green), (16.7, green), (33.3, green), (50.0, white)]
    for t, x in ((170.0, 0), (450.0, 50), (850.0, 100)):  # 120, 400, 800 ms after content
        shown = shown.copy()
        shown[40:80, x : x + 40] = 0
        frames.append((t, shown))
    frames += [(1200.0, red), (1216.7, red)]
    path = tmp_path / "video.webm"
    analyze(FrameList(frames), artifacts=Artifacts(video=path))
    playback = cv2.VideoCapture(str(path))
    fps = playback.get(cv2.CAP_PROP_FPS)
    dark: list[float] = []  # the share of black in each video frame
    while (read := playback.read())[0]:
        dark.append(float((read[1] < 64).all(axis=2).mean()))
    seen_ms = [
        next(i for i, d in enumerate(dark) if d > level) * 1000 / fps
        for level in (0.05, 0.15, 0.22)
    ]
    assert seen_ms == pytest.approx([120, 400, 800], abs=1000 / fps + 1)
    assert len(dark) * 1000 / fps == pytest.approx(1150, abs=1000 / fps + 1)  # to the red screen


def test_a_refused_recording_leaves_the_video_there_as_it_was(tmp_path: Path) -> None:
    """A page that drew nothing was refused, and its video replaced the one already there."""
    video = tmp_path / "span.webm"
    video.write_text("the last good one")
    with pytest.raises(CaptureError, match="nothing between"):
        analyze(FrameList(PageLoad(blocks=[]).timed_frames()), artifacts=Artifacts(video=video))
    assert video.read_text() == "the last good one"
    assert [p.name for p in tmp_path.iterdir()] == ["span.webm"]  # no partial left behind


def test_a_frame_held_for_a_day_makes_no_endless_video(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import labd.capture.artifacts as artifacts_module

    monkeypatch.setattr(artifacts_module, "MAX_SLOTS", 90)  # 3 s at 30 a second
    green, white, red = (np.zeros((60, 80, 3), np.uint8) for _ in range(3))
    green[:], white[:], red[:] = (0, 255, 0), (255, 255, 255), (0, 0, 255)
    shown = white.copy()
    shown[10:30, 10:30] = 0
    day = 86_400_000.0
    frames = [(0.0, green), (33.3, green), (66.7, white), (100.0, shown), (day, red)]
    video = tmp_path / "v.webm"
    analyze(FrameList(frames), artifacts=Artifacts(video=video))
    assert int(cv2.VideoCapture(str(video)).get(cv2.CAP_PROP_FRAME_COUNT)) <= 91
