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
    cases = [
        (["--tolerance", "-5"], "argument --tolerance: must be from 0 to 765, got -5"),
        (["--tolerance", "100000"], "argument --tolerance: must be from 0 to 765"),
        (["--checkerboard", "white,red,0"], "SIZE (a square's side in pixels) must be from 2"),
        (["--timestamps", str(times)], "value 3 ('nan') is not a finite time in ms"),
        (["--progress-out", "/dev/full"], "/dev/full: cannot write it (No space left on device)"),
        (["--blank-color", "sky"], "colour 'sky'"),
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
