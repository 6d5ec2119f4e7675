"""`labd analyze` as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import pytest

from labd.capture.synthetic import PageLoad

REQUIRED = {
    "start_frame", "end_frame", "fps_capture", "unique_fps", "first_visual_change_ms",
    "last_visual_change_ms", "visually_complete_ms", "speed_index", "dropped_frames",
    "sync_confidence",
}  # fmt: skip


def labd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labd", *args], capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def page_video(tmp_path_factory: pytest.TempPathFactory) -> tuple[PageLoad, Path]:
    page = PageLoad.staircase()
    return page, page.write(tmp_path_factory.mktemp("video") / "page.mkv")


def test_json_output_and_artifacts(page_video: tuple[PageLoad, Path], tmp_path: Path) -> None:
    page, video = page_video
    out = labd(
        "analyze", str(video), "--json",
        "--video-out", str(tmp_path / "span.webm"),
        "--heatmap", str(tmp_path / "heat.png"),
        "--progress-out", str(tmp_path / "progress.json"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""  # no codec chatter for operators
    result = json.loads(out.stdout)
    assert result.keys() >= REQUIRED
    assert result["start_frame"] == page.start_frame
    assert result["speed_index"] == pytest.approx(page.speed_index(), rel=0.01)
    # The video holds the analysed span, in a codec browsers play.
    playback = cv2.VideoCapture(result["artifacts"]["video"])
    fourcc = int(playback.get(cv2.CAP_PROP_FOURCC)).to_bytes(4, "little").decode()
    frames = 0
    while playback.read()[0]:
        frames += 1
    assert fourcc.upper() == "VP80"
    assert frames == page.length
    assert cv2.imread(result["artifacts"]["heatmap"]).shape[:2] == (440, 640)
    progress = json.loads(Path(result["artifacts"]["progress"]).read_text())["frames"]
    assert [f["progress"] for f in progress] == pytest.approx(page.progress())


def test_table_output(page_video: tuple[PageLoad, Path]) -> None:
    out = labd("analyze", str(page_video[1]))
    assert out.returncode == 0
    assert "visually complete    433 ms" in out.stdout
    assert "speed index          300" in out.stdout


def test_bad_input_exits_2_with_the_reason(
    tmp_path: Path, page_video: tuple[PageLoad, Path]
) -> None:
    (tmp_path / "zero.mp4").write_bytes(b"")
    video = str(page_video[1])
    cases = [
        (["analyze", str(tmp_path / "zero.mp4")], "zero.mp4: the file is empty"),
        (
            ["analyze", video, "--start-color", "red", "--end-color", "green"],
            "comes before",
        ),
        (["analyze", video, "--start-color", "teal-ish"], "colour 'teal-ish'"),
        (["analyze", video, "--video-out", "x.mp4"], "write a .webm"),
        (
            ["analyze", video, "--video-out", str(tmp_path / "nodir/span.webm")],
            f"span.webm: no such directory {tmp_path / 'nodir'}",
        ),
        (
            ["analyze", video, "--heatmap", str(tmp_path / "nodir/heat.png")],
            f"heat.png: no such directory {tmp_path / 'nodir'}",
        ),
    ]
    for args, message in cases:
        out = labd(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert message in out.stderr
        assert "Traceback" not in out.stderr


def test_a_damaged_file_is_said_in_labd_s_words_alone(
    tmp_path: Path, page_video: tuple[PageLoad, Path]
) -> None:
    """libav's own lines ("[ffv1 @ 0x...] slice CRC mismatch") came on stderr beside labd's."""
    import os
    import random

    data = bytearray(page_video[1].read_bytes())
    chance = random.Random(1)
    for i in range(len(data) // 2, len(data), 997):  # past the green screen
        data[i] = chance.randrange(256)
    damaged = tmp_path / "damaged.mkv"
    damaged.write_bytes(bytes(data))
    env = {k: v for k, v in os.environ.items() if k != "OPENCV_FFMPEG_LOGLEVEL"}
    out = subprocess.run(
        [sys.executable, "-m", "labd", "analyze", str(damaged)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert out.returncode == 2
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"{damaged}: no red (end) screen")


def test_progress_in_a_terminal_and_only_there(
    page_video: tuple[PageLoad, Path], tmp_path: Path
) -> None:
    """On a terminal `labd analyze` shows which pass it is in and how far, on one line
    rewritten in place, and ends it with the time taken (or, when the analysis fails, ends
    the line so the error stands on its own); piped (CI) it says nothing unless asked, and
    stdout holds the results alone."""
    _, video = page_video
    code, stdout, shown = _on_a_terminal(str(video))
    assert code == 0
    assert "\rpass 1 of 2 (finding the sync screens and the changes): frame 1 of " in shown
    assert "pass 2 of 2 (measuring visual progress): frame" in shown
    assert shown.rstrip().split("\r")[-1].startswith("analysed in ")
    assert "pass" not in stdout and "speed index" in stdout

    no_sync = tmp_path / "no-sync.mkv"
    PageLoad.staircase(start_color=(0, 0, 255)).write(no_sync)
    code, _, shown = _on_a_terminal(str(no_sync))
    assert code == 2
    assert shown.splitlines()[-1].endswith("no green (start) screen found in 75 frames")

    piped = labd("analyze", str(video))
    assert piped.returncode == 0 and piped.stderr == ""
    logged = labd("analyze", str(video), "--show-progress", "always")
    lines = logged.stderr.splitlines()
    assert lines[0].startswith("pass 1 of 2") and lines[-1].startswith("analysed in ")
    assert "\r" not in logged.stderr and logged.stdout == piped.stdout


def _on_a_terminal(*args: str) -> tuple[int, str, str]:
    """`labd analyze ARGS` with stderr on a pseudo-terminal: (exit code, stdout, what the
    terminal got)."""
    import os
    import pty

    primary, secondary = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "labd", "analyze", *args],
            stdout=subprocess.PIPE, stderr=secondary, text=True, timeout=120,
        )  # fmt: skip
        os.close(secondary)
        seen = b""
        while chunk := _read(primary):
            seen += chunk
    finally:
        os.close(primary)
    return done.returncode, done.stdout, seen.decode()


def _read(fd: int) -> bytes:
    """What the terminal got; b"" once the writer is gone (EIO on Linux)."""
    import os

    try:
        return os.read(fd, 4096)
    except OSError:
        return b""
