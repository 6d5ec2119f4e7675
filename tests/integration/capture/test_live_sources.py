"""Live sources recorded in their own process: an X11 display (Xvfb), a capture device (a
video file stands in for /dev/videoN: OpenCV opens both alike) and Android's H.264 screen
stream (ffmpeg produces the same elementary stream `adb exec-out screenrecord` does)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from labd.capture import VideoFile, analyze
from labd.capture.errors import CaptureError
from labd.capture.live import Recorder, SourceSpec, screenrecord_command
from labd.capture.synthetic import PageLoad
from tests.conftest import need_program
from tests.xpaint import Painter

GREEN, WHITE, RED, CHROME = (0, 255, 0), (255, 255, 255), (255, 0, 0), (60, 60, 60)


def test_x11_grab_records_a_page_load_between_green_and_red(xvfb: str, tmp_path: Path) -> None:
    painter = Painter(xvfb)
    painter.rect(CHROME)
    recorder = Recorder(SourceSpec("x11", xvfb, fps=30), tmp_path / "x11.avi", seconds=30)
    recorder.start()
    try:
        painter.rect(GREEN, 0, 40, 640, 440)
        time.sleep(0.5)
        painter.rect(WHITE, 0, 40, 640, 440)
        shown = time.monotonic()
        for i, color in enumerate([(200, 30, 40), (30, 90, 200), (20, 150, 60)]):
            time.sleep(0.2)
            painter.rect(color, 40 + i * 200, 80, 150, 150)
        complete = time.monotonic() - shown
        time.sleep(0.3)
        painter.rect(RED, 0, 40, 640, 440)
        time.sleep(0.4)
    finally:
        spool = recorder.stop()
        painter.close()
    assert spool.frames == len(spool.timestamps) > 30
    result = analyze(VideoFile(spool.path, spool.timestamps))
    assert (result.content_area.y, result.content_area.h, result.content_area.w) == (40, 440, 640)
    assert result.sync_confidence > 0.99
    assert result.unique_frames == 4  # the white page and three blocks
    frame = 1000 / 30
    assert result.visually_complete_ms == pytest.approx(complete * 1000, abs=3 * frame)
    assert result.dropped_frames == 0


def test_a_capture_device_records_until_its_stream_ends(tmp_path: Path) -> None:
    page = PageLoad.staircase(width=320, height=240)
    card = page.write(tmp_path / "card.avi", "MJPG")
    recorder = Recorder(SourceSpec("device", str(card), fps=60), tmp_path / "spool.avi")
    recorder.start()
    spool = recorder.stop_when_done(30)
    assert spool.frames == page.lead + page.length + page.tail
    assert analyze(VideoFile(spool.path, spool.timestamps)).unique_frames == 1 + len(page.blocks)


def test_an_h264_screen_stream_is_decoded_as_it_arrives(tmp_path: Path) -> None:
    ffmpeg = need_program("ffmpeg")
    page = PageLoad.staircase(width=320, height=240)
    lossless = page.write(tmp_path / "page.mkv")
    # What screenrecord writes to stdout: a raw H.264 elementary stream.
    stream = [ffmpeg, "-loglevel", "error", "-re", "-i", str(lossless), "-c:v", "libx264"]
    stream += ["-preset", "ultrafast", "-tune", "zerolatency", "-f", "h264", "-"]
    spec = SourceSpec("h264", "emulator-5554", size=(320, 240), command=tuple(stream))
    recorder = Recorder(spec, tmp_path / "screen.avi")
    recorder.start()
    spool = recorder.stop_when_done(30)
    assert spool.frames == page.lead + page.length + page.tail
    result = analyze(VideoFile(spool.path, spool.timestamps))
    assert (result.start_frame, result.end_frame) == (page.start_frame, page.end_frame)


def test_screenrecord_arguments_are_words_not_a_shell_line() -> None:
    command = screenrecord_command("emulator-5554; rm -rf /", (1080, 1920), adb="/opt/adb")
    assert command[:3] == ["/opt/adb", "-s", "emulator-5554; rm -rf /"]
    assert command[3:] == [
        "exec-out",
        "screenrecord",
        "--output-format=h264",
        "--size=1080x1920",
        "-",
    ]


def test_a_display_that_cannot_be_opened_is_a_clear_error(tmp_path: Path) -> None:
    recorder = Recorder(SourceSpec("x11", ":4242"), tmp_path / "none.avi")
    recorder.start()
    with pytest.raises(CaptureError, match="X11 display ':4242': cannot open it"):
        recorder.stop()


def test_frames_are_dropped_and_counted_when_encoding_falls_behind(tmp_path: Path) -> None:
    page = PageLoad.staircase(width=1280, height=720, lead=60, length=300, fps=1000)
    card = page.write(tmp_path / "card.avi", "MJPG")
    # A one-frame buffer and a file played at its own 1000 frames/s: far faster than MJPG
    # encodes at 720p.
    recorder = Recorder(SourceSpec("device", str(card)), tmp_path / "spool.avi", buffer=1)
    recorder.start()
    spool = recorder.stop_when_done(60)
    assert spool.dropped > 0
    assert spool.frames + spool.dropped == page.lead + page.length + page.tail


def test_labd_capture_records_a_display(xvfb: str, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    out = tmp_path / "screen.avi"
    command = [sys.executable, "-m", "labd", "capture", "--x11", f"{xvfb}+0,0,320x200"]
    command += ["--seconds", "1", "--fps", "20", "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["path"] == str(out)
    assert 15 <= summary["frames"] <= 21  # 20 per second, for one second
    assert summary["dropped"] <= 2
    assert summary["frames"] == len(out.with_suffix(".times").read_text().split())


def test_labd_capture_says_when_the_source_ends_before_the_time_asked_for(
    tmp_path: Path,
) -> None:
    """A capture card unplugged, a stream cut: the recording used to end early with exit 0
    and no error, and a job filming it failed later on a missing red screen."""
    import json
    import subprocess
    import sys

    card = PageLoad.staircase(width=160, height=120).write(tmp_path / "card.avi", "MJPG")
    out = tmp_path / "short.avi"
    command = [sys.executable, "-m", "labd", "capture", "--v4l2", str(card)]
    done = subprocess.run(
        [*command, "--seconds", "30", "-o", str(out)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3, done.stderr
    summary = json.loads(done.stdout)
    assert summary["frames"] == 75 and summary["error"] == ""
    assert re.fullmatch(
        rf"labd: {re.escape(str(out))}: the source ended \d+\.\d s into the 30 s asked for\n",
        done.stderr,
    )
