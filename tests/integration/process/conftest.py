"""What the launcher tests share: each runs with both launchers, and GNU time as the
independent measure."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from labd.process import launcher


@pytest.fixture(params=["c", "python"])
def launcher_kind(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[str]:
    """Each test runs with the C launcher and with the Python one (hosts without cc)."""
    monkeypatch.setenv("LABD_CACHE_DIR", str(tmp_path / "cache"))
    if request.param == "python":
        monkeypatch.setenv("CC", "/nonexistent/cc")
    elif shutil.which("cc") is None:
        pytest.skip("no C compiler here to build the launcher")
    launcher.launcher_command.cache_clear()
    assert launcher.launcher_command()[1].startswith(request.param)
    yield request.param
    launcher.launcher_command.cache_clear()


def gnu_time(argv: list[str], runs: int = 1) -> tuple[int, float]:
    """GNU time's figures: (max RSS KiB of one run, CPU seconds of `runs` runs in a row). It
    truncates user and system time to steps of 10 ms, too coarse for one run of a 10 ms
    program: CPU is taken over many runs (a shell loop), and half a step is added to each of
    the two to make them unbiased."""
    if runs > 1:
        loop = f'i=0; while [ $i -lt {runs} ]; do "$@"; i=$((i+1)); done'
        argv = ["sh", "-c", loop, "sh", *argv]
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M %U %S", *argv], capture_output=True, text=True, check=True
    )
    rss, user, system = done.stderr.strip().splitlines()[-1].split()
    return int(rss), float(user) + float(system) + 0.01
