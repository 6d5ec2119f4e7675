"""The recorder process under sources that misbehave: a stream that stalls, a source that
changes resolution, a region off the screen, a file standing in for a capture card."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from labd.capture import VideoFile, analyze
from labd.capture.errors import CaptureError
from labd.capture.live import Recorder, SourceSpec, Spool
from labd.capture.synthetic import PageLoad
from labd_x11.driver import start_xvfb
from tests.conftest import need_program


def _processes_with(marker: str) -> list[str]:
    """Command lines of live (not zombie) processes that contain `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in line and state != "Z":
            found.append(f"{entry.name}: {line}")
    return found


def test_a_stalled_h264_source_leaves_no_process_behind(tmp_path: Path) -> None:
    need_program("ffmpeg")
    nap = f"7771.{os.getpid()}"  # a duration no other process uses: how the test finds its own
    spec = SourceSpec("h264", "x", size=(320, 240), command=("sleep", nap))
    recorder = Recorder(spec, tmp_path / "stall.avi", seconds=2)
    recorder.start()
    time.sleep(0.5)
    assert _processes_with(f"sleep {nap}")  # the producer runs, sending nothing
    with pytest.raises(CaptureError, match="gave no frame; the source stalled"):
        recorder.stop(timeout=10)
    assert not recorder.process.is_alive()
    time.sleep(0.2)
    assert _processes_with(f"sleep {nap}") == []
    assert [p for p in _processes_with("pipe:0") if str(tmp_path) in p or "h264" in p] == []


def test_a_recorder_that_does_not_stop_is_ended_with_its_whole_group(tmp_path: Path) -> None:
    """The last resort: the recorder itself hangs (here: stopped by SIGSTOP); stop ends it
    and the source's processes together."""
    need_program("ffmpeg")
    nap = f"7772.{os.getpid()}"
    spec = SourceSpec("h264", "x", size=(320, 240), command=("sleep", nap))
    recorder = Recorder(spec, tmp_path / "hung.avi", seconds=60)
    recorder.start()
    time.sleep(0.5)
    assert recorder.process.pid is not None
    os.kill(recorder.process.pid, signal.SIGSTOP)
    with pytest.raises(CaptureError, match="did not stop in 1 s"):
        recorder.stop(timeout=1)
    time.sleep(0.2)
    assert _processes_with(f"sleep {nap}") == []


class _Resizing:
    """Frames of one size, then of another (a phone rotating, a card renegotiating)."""

    fps = 60.0

    def open(self) -> _ResizingSource:
        return _ResizingSource()


class _ResizingSource:
    dropped = 0

    def __init__(self) -> None:
        self.count = 0

    def read(self) -> tuple[float, np.ndarray] | None:
        if self.count == 60:
            return None
        self.count += 1
        w, h = (320, 240) if self.count <= 30 else (640, 480)
        time.sleep(0.005)
        return time.monotonic() * 1000, np.full((h, w, 3), self.count * 4, np.uint8)

    def close(self) -> None:
        pass


def test_a_change_of_resolution_ends_the_recording_with_the_reason(tmp_path: Path) -> None:
    recorder = Recorder(_Resizing(), tmp_path / "resize.avi")  # type: ignore[arg-type]
    recorder.start()
    with pytest.raises(CaptureError, match=r"changed resolution at frame 30: 640x480.*320x240"):
        recorder.stop_when_done(30)
    spool = Spool.load(tmp_path / "resize.avi")
    # Only the frames written are counted and timed, and every one of them decodes.
    assert spool.frames == len(spool.timestamps) == 30
    capture = cv2.VideoCapture(str(spool.path))
    decoded = 0
    while capture.read()[0]:
        decoded += 1
    assert decoded == 30


def test_a_region_off_the_screen_is_refused_with_the_reason(xvfb: str, tmp_path: Path) -> None:
    for region in [(600, 400, 200, 200), (0, 0, 0, 0), (0, 0, 100000, 100000)]:
        recorder = Recorder(SourceSpec("x11", xvfb, region), tmp_path / "region.avi")
        recorder.start()
        x, y, w, h = region
        with pytest.raises(CaptureError, match=rf"region {w}x{h}\+{x}\+{y} is not within"):
            recorder.stop()


def test_labd_capture_names_a_bad_region_without_a_traceback(xvfb: str, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "labd", "capture", "--x11", f"{xvfb}+600,400,200x200"]
    done = subprocess.run(
        [*command, "--seconds", "1", "-o", str(tmp_path / "x.avi")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "is not within the screen" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--fps", "0", "must be from 1 to 240"),
        ("--fps", "-5", "must be from 1 to 240"),
        ("--fps", "nan", "must be from 1 to 240"),
        ("--fps", "inf", "must be from 1 to 240"),
        ("--fps", "1e9", "must be from 1 to 240"),
        ("--seconds", "nan", "must be from 0.1 to 86400"),
        ("--seconds", "0", "must be from 0.1 to 86400"),
        ("--fps", "fast", "not a number"),
    ],
)
def test_labd_capture_checks_its_rate_and_length(
    tmp_path: Path, option: str, value: str, message: str
) -> None:
    command = [sys.executable, "-m", "labd", "capture", "--x11", ":4242", option, value]
    done = subprocess.run(
        [*command, "-o", str(tmp_path / "x.avi")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert f"argument {option}: {message}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_video_file_plays_at_its_own_pace_with_its_own_times(tmp_path: Path) -> None:
    """A file standing in for /dev/videoN: frames come when the video's own times come due,
    stamped with them, so the ground truth survives the capture."""
    page = PageLoad.staircase(width=320, height=240, fps=30, spacing=9)
    card = page.write(tmp_path / "card.avi", "MJPG")
    recorder = Recorder(SourceSpec("device", str(card), fps=60), tmp_path / "spool.avi")
    started = time.monotonic()
    recorder.start()
    spool = recorder.stop_when_done(30)
    took = time.monotonic() - started
    frames = page.lead + page.length + page.tail
    assert spool.frames == frames
    assert took >= (frames - 1) / page.fps  # not as fast as it decodes
    steps = np.diff(spool.timestamps)
    assert steps == pytest.approx(1000 / page.fps, abs=0.5)
    result = analyze(VideoFile(spool.path, spool.timestamps))
    assert result.visually_complete_ms == pytest.approx(page.visually_complete_ms(), abs=0.5)
    assert result.speed_index == pytest.approx(page.speed_index(), rel=0.01)


_KILLED_LABD = """
import sys, time
from pathlib import Path
from labd.capture.live import Recorder, SourceSpec
recorder = Recorder(SourceSpec("x11", sys.argv[1], fps=10), Path(sys.argv[2]), seconds=120)
recorder.start()
print(recorder.process.pid, flush=True)
time.sleep(120)
"""


def test_a_recording_ends_with_the_labd_that_started_it(xvfb: str, tmp_path: Path) -> None:
    """kill -9 of labd left its recording running for load_timeout_s + 60 s: loading the host
    under the retry, and writing into the retry's times file (read back with NUL bytes)."""
    path = tmp_path / "iteration-1" / "capture.avi"
    path.parent.mkdir()
    labd = subprocess.Popen(
        [sys.executable, "-c", _KILLED_LABD, xvfb, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert labd.stdout is not None
    recording = int(labd.stdout.readline())
    time.sleep(1)
    labd.kill()
    labd.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _running(recording):
        time.sleep(0.05)
    assert not _running(recording), "the recording outlived labd"
    assert "labd, which started the recording, is gone" in path.with_suffix(".json").read_text()


def test_a_retry_records_into_fresh_files(xvfb: str, tmp_path: Path) -> None:
    """The files of an attempt whose recorder may still be writing are unlinked, not
    truncated: its writes go to the old file, not into the retry's."""
    path = tmp_path / "capture.avi"
    path.with_suffix(".times").write_text("1.000\n" * 1000)
    old = path.with_suffix(".times").open("r+")  # the killed attempt's recorder, writing on
    old.seek(6000)  # where its 1,000 frames had got to
    recorder = Recorder(SourceSpec("x11", xvfb, fps=10), path, seconds=30)
    recorder.start()
    time.sleep(0.5)
    old.write("9.999\n")  # past the end of a file truncated under it: a hole of NUL bytes
    old.close()
    spool = recorder.stop()
    assert spool.frames == len(spool.timestamps) > 0
    assert 9.999 not in spool.timestamps


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for whoever inherited it to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_a_display_killed_while_recorded_is_named(tmp_path: Path) -> None:
    """Was "the capture process died (exit code 1)": closing the lost display raised too."""
    need_program("Xvfb")
    xvfb, display = start_xvfb("320x240")  # its own, to kill
    recorder = Recorder(SourceSpec("x11", display, fps=10), tmp_path / "gone.avi", seconds=30)
    recorder.start()
    time.sleep(0.5)
    xvfb.kill()
    xvfb.wait()
    with pytest.raises(CaptureError, match=rf"X11 display '{display}': the screen could not be"):
        recorder.stop()
