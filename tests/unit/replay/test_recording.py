"""The recorder keeps an archive that is already there unless told to replace it."""

from __future__ import annotations

from pathlib import Path

import pytest

from labd.cli import main as cli
from labd.errors import UsageError
from labd.replay.recording import RecordHandler


def test_record_refuses_an_existing_archive_at_start_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recording stopped at once replaced a 3 MB archive of 11 entries with an empty one."""
    out = tmp_path / "site.har"
    out.write_text("recorded before")
    assert cli.main(["replay", "record", str(out), "--port=0"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"{out} exists; labd replay record keeps it (--overwrite replaces it)"
    assert out.read_text() == "recorded before"
    assert not out.with_name("site.har.partial").exists()


def test_a_file_that_appeared_while_recording_is_kept_without_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "site.har"
    handler = RecordHandler(None, out, 1)  # type: ignore[arg-type]
    handler.entries.append({"request": {}})
    out.write_text("made meanwhile")
    with pytest.raises(UsageError, match=r"site.har exists; .* the recording is in .*\.partial"):
        handler.write()
    assert out.read_text() == "made meanwhile"
    assert RecordHandler(None, out, 1, overwrite=True).write() == out  # type: ignore[arg-type]
    assert out.read_text() != "made meanwhile"
