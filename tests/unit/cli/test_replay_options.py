"""`labd replay serve` checks its shaping options as a manifest's [network] is checked: a bad
value is a one-line usage error naming the option (exit 2), never a crash (exit 3) nor a
server started with values a manifest refuses (`--loss nan`, `--jitter-ms 1e300`)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from labd.cli import main as cli
from labd.model import NetworkSpec
from labd.replay.har import har_document, har_entry
from tests.unit.replay.test_har import WHEN


@pytest.fixture
def har(tmp_path: Path) -> Path:
    path = tmp_path / "site.har"
    entry = har_entry("GET", "http://e.test/", [], b"", 200, "OK", [], b"x", WHEN, 1.0)
    path.write_text(json.dumps(har_document([entry], "test")))
    return path


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--latency-ms", "-1", "greater than or equal to 0"),
        ("--latency-ms", "nan", "must be a finite number, got nan"),
        ("--latency-ms", "inf", "must be a finite number, got inf"),
        ("--latency-ms", "1e308", "less than or equal to 10000"),
        ("--down-kbps", "-5", "greater than or equal to 0"),
        ("--down-kbps", "nan", "must be a finite number"),
        ("--up-kbps", "nan", "must be a finite number"),
        ("--up-kbps", "inf", "must be a finite number"),
        ("--down-kbps", "-inf", "must be a finite number"),
        ("--loss", "1.5", "less than 1"),
        ("--loss", "nan", "must be a finite number"),
        ("--loss", "-0.1", "greater than or equal to 0"),
        ("--jitter-ms", "nan", "must be a finite number"),
        ("--jitter-ms", "1e300", "less than or equal to 10000"),
        # These were a ValueError or OverflowError (exit 3), or accepted (-1).
        ("--max-archive-mb", "nan", "must be a finite number above 0, got nan"),
        ("--max-archive-mb", "inf", "must be a finite number above 0, got inf"),
        ("--max-archive-mb", "-1", "must be a finite number above 0, got -1"),
        ("--max-archive-mb", "0", "must be a finite number above 0"),
        ("--profile", "", "network profile '': unknown"),  # was silently no profile
        ("--host", "999.1.1.1", "cannot listen on 999.1.1.1:0"),  # was "unexpected error"
        ("--port", "99999", "must be from 0 to 65535"),
        ("--port", "-1", "must be from 0 to 65535"),
    ],
)
def test_a_bad_option_is_one_line_naming_it_exit_2(
    har: Path, option: str, value: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["replay", "serve", str(har), "--port=0", f"{option}={value}"]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"{option}: ") and says in line, line
    assert captured.out == ""  # no start line: the server never started


def test_a_port_in_use_is_a_usage_error_naming_it(
    har: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was "unexpected error: OSError", exit 3."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        for command in (["serve", str(har)], ["record", str(har.with_name("out.har"))]):
            assert cli.main(["replay", *command, "--port", str(port)]) == 2
            (line,) = capsys.readouterr().err.strip().splitlines()
            assert line.startswith(f"--port: cannot listen on 127.0.0.1:{port}: "), line


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_record_checks_its_body_limit(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["replay", "record", str(tmp_path / "out.har"), f"--max-body-mb={value}"]) == 2
    assert capsys.readouterr().err.startswith("--max-body-mb: must be a finite number above 0")


def test_record_checks_its_port_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["replay", "record", str(tmp_path / "out.har"), "--port", "70000"]) == 2
    assert capsys.readouterr().err.startswith("--port: must be from 0 to 65535")


def test_every_bad_option_is_named(har: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["replay", "serve", str(har), "--down-kbps", "-5", "--loss", "2"]
    assert cli.main(args) == 2
    assert [line.split(":")[0] for line in capsys.readouterr().err.splitlines()] == [
        "--down-kbps",
        "--loss",
    ]


@pytest.mark.parametrize("key", ["latency_ms", "down_kbps", "up_kbps", "jitter_ms", "loss"])
def test_the_manifest_refuses_what_the_options_refuse(key: str) -> None:
    for bad in (float("nan"), float("inf"), -1.0, "inf"):
        with pytest.raises(ValidationError):
            NetworkSpec.model_validate({"archive": "site.har", key: bad})


def test_a_stored_spec_with_an_infinite_bandwidth_stays_readable() -> None:
    stored = {"archive": "site.har", "down_kbps": float("inf")}
    assert NetworkSpec.model_validate(stored, context={"stored": True}).down_kbps == float("inf")


def test_an_archive_nested_too_deep_is_a_usage_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It crashed with RecursionError (exit 3, a crash log)."""
    deep = tmp_path / "deep.har"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert cli.main(["replay", "serve", str(deep), "--port=0"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"{deep}: arrays and objects nested more than 64 deep"


def test_what_is_not_an_archive_file_is_named_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """/dev/zero grew labd by gigabytes (its size says 0), a pipe blocked it for ever, and a
    directory crashed it (IsADirectoryError, exit 3)."""
    import os

    pipe = tmp_path / "pipe.har"
    os.mkfifo(pipe)
    for path, says in [
        ("/dev/zero", "not a regular file, not an archive"),
        (str(pipe), "not a regular file, not an archive"),
        (str(tmp_path), "a directory, not an archive"),
    ]:
        assert cli.main(["replay", "serve", path, "--port=0"]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line == f"{path}: {says}"


def test_record_refuses_an_archive_it_could_not_write_before_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found only at Ctrl-C, a directory or /proc path lost the whole recording."""
    ca = tmp_path / "upstream.pem"
    ca.write_text("not a certificate")
    for args, says in [
        ([str(tmp_path)], f"{tmp_path}: a directory; an archive is written as a file"),
        (["/proc/x.har"], "/proc/x.har: cannot be written: "),
        ([str(tmp_path / "o.har"), "--upstream-ca", str(tmp_path / "none.pem")],
         f"--upstream-ca {tmp_path / 'none.pem'}: No such file or directory"),
        ([str(tmp_path / "o.har"), "--upstream-ca", str(ca)], f"--upstream-ca {ca}: "),
    ]:  # fmt: skip
        assert cli.main(["replay", "record", *args, "--port=0"]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith(says), line
    assert not list(tmp_path.glob("*.partial"))


def test_an_archive_with_nothing_to_serve_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It started (and a job with it ran, measuring 404s)."""
    empty = tmp_path / "empty.har"
    empty.write_text(json.dumps({"log": {"entries": []}}))
    assert cli.main(["replay", "serve", str(empty), "--port=0"]) == 2
    assert capsys.readouterr().err.strip() == f"{empty}: log.entries is empty: nothing to serve"


def test_a_ca_is_never_written_over(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A second `labd replay ca` replaced the CA every device trusted, and its key."""
    assert cli.main(["replay", "ca", str(tmp_path / "ca")]) == 0
    made = {p.name: p.read_bytes() for p in (tmp_path / "ca").iterdir()}
    capsys.readouterr()
    assert cli.main(["replay", "ca", str(tmp_path / "ca")]) == 2
    assert "holds a CA already" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in (tmp_path / "ca").iterdir()} == made
    (tmp_path / "file").write_text("")
    assert cli.main(["replay", "ca", str(tmp_path / "file")]) == 2
    assert "cannot make the directory" in capsys.readouterr().err


def test_a_profile_with_overrides_is_taken_as_a_manifest_takes_it(
    har: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--profile 3g --latency-ms 200` was refused ("not both"); a manifest takes it."""
    from labd.replay import Profile

    served: list[Profile] = []

    async def serve(archive: object, shaper: Any, *_: object) -> dict[str, Any]:
        served.append(shaper.profile)
        return {"misses": [], "misses_not_listed": 0}

    monkeypatch.setattr("labd.replay.serve", serve)
    assert cli.main(["replay", "serve", str(har), "--profile", "3g", "--latency-ms", "200"]) == 0
    assert cli.main(["replay", "serve", str(har), "--down-kbps", "800"]) == 0
    assert cli.main(["replay", "serve", str(har), "--profile", "2g"]) == 0
    assert [(p.name, p.latency_ms, p.down_kbps, p.up_kbps) for p in served] == [
        ("3g+custom", 200, 1600, 768),
        ("none+custom", 0, 800, 0),
        ("2g", 800, 280, 256),  # it was "2g+custom": jitter and loss defaulted to 0
    ]


def test_record_never_replaces_what_is_not_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As root, `labd replay record /dev/null` turned /dev/null into a regular file at Ctrl-C.
    (A device node of our own stands in for /dev/null: a failure harms only it.)"""
    import os
    import stat

    from labd.errors import UsageError
    from labd.replay.recording import RecordHandler

    pipe = tmp_path / "pipe.har"
    os.mkfifo(pipe)
    nodes = [pipe]
    if os.geteuid() == 0:
        null = tmp_path / "null"
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        nodes.append(null)
    for node in nodes:
        assert cli.main(["replay", "record", str(node), "--port=0"]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert (
            line
            == f"{node}: not a regular file (a device, a pipe); an archive is written as a file"
        )
        # And at the end too, should it have become one meanwhile: the recording is kept.
        with pytest.raises(UsageError, match="the recording is in"):
            RecordHandler(None, node, 1).write()  # type: ignore[arg-type]
        assert not stat.S_ISREG(node.lstat().st_mode)
        assert node.with_name(node.name + ".partial").is_file()
