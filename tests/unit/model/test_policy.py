"""The admin's policy: a program is the one the check approved, wherever the job runs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from labd.model import Policy


def test_a_relative_path_is_refused_for_it_names_another_program_in_the_jobs_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An independent tester's attack: with python3 allowed and labd started in /work, the
    submit check resolved `../../usr/bin/python3` against labd's directory (the real python3),
    then the job ran it from a `cwd` of the submitter's choice, where the same path named the
    submitter's own script."""
    python3 = shutil.which("python3")
    assert python3
    policy = Policy.resolve(["python3"], str(Path(python3).parent), [], "nobody", euid=1000)
    depth = Path(python3).parent.parts[1:]  # from / to python3's directory
    monkeypatch.chdir(Path(python3).parent)
    climbing = "/".join([".."] * len(depth)) + python3
    assert os.path.realpath(climbing) == os.path.realpath(python3)  # labd's view: allowed
    with pytest.raises(ValueError, match="a path must be absolute"):
        policy.program(climbing)
    assert policy.program(python3) == python3  # an absolute path is still taken
    assert policy.program("python3") == python3  # and a name, on the policy's path
