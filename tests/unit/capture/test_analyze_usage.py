"""`labd analyze` refuses what it cannot use as a usage error (exit 2) that names it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from labd.capture.synthetic import PageLoad


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return PageLoad.staircase(width=320, height=240).write(
        tmp_path_factory.mktemp("video") / "page.mkv"
    )


def labd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labd", *args], capture_output=True, text=True, timeout=120
    )


def test_bad_options_and_inputs_are_usage_errors(video: Path, tmp_path: Path) -> None:
    times = tmp_path / "times.txt"
    times.write_text("0\n16.7\nnan\n50\n")
    huge = tmp_path / "huge.txt"
    huge.write_text("0\n1e300\n")
    underscored = tmp_path / "underscored.txt"  # Python's float reads 1_000; no clock writes it
    underscored.write_text("0\n1_000\n")
    backwards = tmp_path / "backwards.txt"
    backwards.write_text("0\n16.7\n16.7\n50\n")
    short = tmp_path / "short.txt"
    short.write_text("0\n16.7\n33.3\n")
    long = tmp_path / "long.txt"  # another, longer recording's: the analysis never reads past red
    long.write_text("".join(f"{16.7 * i:.1f}\n" for i in range(1000)))
    cases = [
        (["--tolerance", "-5"], "argument --tolerance: must be from 0 to 765, got -5"),
        (["--tolerance", "100000"], "argument --tolerance: must be from 0 to 765"),
        (["--checkerboard", "white,red,0"], "SIZE (a square's side in pixels) must be from 2"),
        (["--timestamps", str(times)], "value 3 ('nan') is not a time in ms (finite, within"),
        (["--timestamps", str(huge)], "value 2 ('1e300') is not a time in ms (finite, within"),
        (["--timestamps", str(underscored)], "value 2 ('1_000') is not a time in ms"),
        (["--progress-out", "/dev/full"], "/dev/full: cannot write it (No space left on device)"),
        (["--blank-color", "sky"], "colour 'sky'"),
        (["--timestamps", str(backwards)], "value 3 (16.7) is not after the one before it"),
        (["--timestamps", str(short)], "the timestamps give 3 frame times but the video has "),
        (["--timestamps", str(long)], "the timestamps give 1000 frame times but the video has "),
        (
            ["--start-color", "red", "--end-color", "#F01010"],
            "start colour red and end colour #F01010 are within the tolerance (100)",
        ),
        (["--tearing-colors", "blue"], "tearing colours: give two or more"),
    ]
    for args, message in cases:
        out = labd("analyze", str(video), *args)
        assert out.returncode == 2, (args, out.stderr)
        assert message in out.stderr, (args, out.stderr)
        assert "unexpected error" not in out.stderr and "Traceback" not in out.stderr


def test_a_path_that_is_not_a_video_file_says_what_it_is(tmp_path: Path) -> None:
    for path, message in [
        ("/dev/null", "/dev/null: not a video file but a character device"),
        (str(tmp_path), "not a video file but a directory"),
        (str(tmp_path / "missing.mkv"), "missing.mkv: no such file"),
    ]:
        out = labd("analyze", path)
        assert out.returncode == 2
        assert message in out.stderr


def test_a_spools_times_file_beside_the_video_gives_the_frame_times(
    video: Path, tmp_path: Path
) -> None:
    """A spool's container claims the nominal rate; the capture times are in the .times file
    `labd capture` writes beside it, and `labd analyze` reads them without being told."""
    import json
    import shutil

    import cv2

    spool = shutil.copy(video, tmp_path / "spool.mkv")
    nominal = json.loads(labd("analyze", str(spool), "--json").stdout)
    frames = int(cv2.VideoCapture(str(spool)).get(cv2.CAP_PROP_FRAME_COUNT))
    step = 1000 / nominal["fps_capture"]
    (tmp_path / "spool.times").write_text("".join(f"{3 * step * i:.3f}\n" for i in range(frames)))
    slowed = json.loads(labd("analyze", str(spool), "--json").stdout)
    expected = 3 * nominal["visually_complete_ms"]
    assert slowed["visually_complete_ms"] == pytest.approx(expected, rel=0.01)
    assert slowed["fps_capture"] == pytest.approx(nominal["fps_capture"] / 3, rel=0.01)


def test_given_times_before_zero_are_taken_as_they_are(video: Path, tmp_path: Path) -> None:
    """A capture clock's times may be negative (measured from an event after the start): they
    were replaced by the container's nominal rate, with no word (a tester's find)."""
    import json

    import cv2

    frames = int(cv2.VideoCapture(str(video)).get(cv2.CAP_PROP_FRAME_COUNT))
    times = tmp_path / "times.txt"
    times.write_text("".join(f"{-10_000 + 50 * i}\n" for i in range(frames)))
    shifted = json.loads(labd("analyze", str(video), "--json", "--timestamps", str(times)).stdout)
    times.write_text("".join(f"{50 * i}\n" for i in range(frames)))
    plain = json.loads(labd("analyze", str(video), "--json", "--timestamps", str(times)).stdout)
    assert shifted["fps_capture"] == plain["fps_capture"] == pytest.approx(20)
    assert shifted["speed_index"] == pytest.approx(plain["speed_index"])
