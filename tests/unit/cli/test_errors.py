"""What the `labd` command says when something goes wrong: the right exit code and one line
that names what was wrong (never a traceback, never exit 1, which means a regression)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from labd.cli import main as cli


def labd(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labd", *args], cwd=cwd, capture_output=True, text=True,
        check=False, timeout=60,
    )  # fmt: skip


def test_missing_files_are_named_not_taken_for_job_ids(tmp_path: Path) -> None:
    done = labd("compare", "/no/such/file1", "/no/such/file2", cwd=tmp_path)
    assert (done.returncode, done.stderr.strip()) == (2, "/no/such/file1: no such file")


@pytest.mark.parametrize(
    ("job_id", "says"),
    [
        ("pr#42", "holds '#'"),
        ("a+b", "holds '+'"),
        ("a/b", "holds '/'"),
        (".hidden", "starts with '.'"),
        ("x" * 200, "is 200 characters long"),
    ],
)
def test_ids_are_checked_before_anything_is_sent(tmp_path: Path, job_id: str, says: str) -> None:
    done = labd("jobs", "show", job_id, cwd=tmp_path)
    assert done.returncode == 2 and says in done.stderr


def test_an_unexpected_error_is_one_line_naming_its_log_and_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def broken(_: argparse.Namespace) -> int:
        return {}["no such key"]  # type: ignore[no-any-return]

    monkeypatch.setattr(cli, "_version", broken)
    assert cli.main(["version"]) == 3
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("labd: unexpected error: KeyError: 'no such key' (details in ")
    log = Path(line.rsplit("details in ", 1)[1].rstrip(")"))
    assert log.parent == tmp_path / "labd" and "Traceback" in log.read_text()


def test_an_unexpected_error_never_prints_a_key_it_quotes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    key = "q3Vx8mJ0b2tlbi1rZXktdGhhdC1pcy0zMi1ieXRlcyE"

    def broken(_: argparse.Namespace) -> int:
        raise TypeError(f"cannot render {{'k1': '{key}'}}")

    monkeypatch.setattr(cli, "_version", broken)
    assert cli.main(["version"]) == 3
    line = capsys.readouterr().err
    assert key not in line and "cannot render" in line


@pytest.mark.parametrize("url", ["http://[::1", "https://[::1/x", "unix:", "unix://", "ftp://x"])
def test_a_malformed_api_url_is_a_usage_error_before_any_connection(url: str) -> None:
    from labd.cli.client import _endpoint_of
    from labd.errors import UsageError

    with pytest.raises(UsageError, match=r"is not http\(s\)://HOST:PORT or unix:/PATH"):
        _endpoint_of(url, lambda: pytest.fail("credentials looked up for a malformed URL"))


def test_a_malformed_ipv6_api_url_exits_2_not_3(tmp_path: Path) -> None:
    done = labd("--api-url", "http://[::1", "devices", "list", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "is not http(s)://HOST:PORT or unix:/PATH" in done.stderr
