"""Credentials files labd writes: only a regular file of the given path gets mode 0600."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from labd.cli.auth_cmd import _write_private
from labd.errors import UsageError


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_link_or_a_device_is_refused_even_with_force(tmp_path: Path, kind: str) -> None:
    shared = tmp_path / "shared"
    shared.write_text("theirs")
    shared.chmod(0o666)
    out = tmp_path / "creds"
    if kind == "link":
        out.symlink_to(shared)
    else:
        os.mkfifo(out)
    with pytest.raises(UsageError, match="not a regular file"):
        _write_private(out, "secret", force=True)
    assert shared.read_text() == "theirs" and shared.stat().st_mode & 0o777 == 0o666


def test_a_regular_file_is_written_private(tmp_path: Path) -> None:
    out = tmp_path / "creds"
    out.write_text("old")
    out.chmod(0o644)
    _write_private(out, "secret", force=True)
    assert out.read_text() == "secret" and out.stat().st_mode & 0o777 == 0o600
