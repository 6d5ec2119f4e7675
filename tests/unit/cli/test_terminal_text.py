"""Text from outside (a job's error quoting a program's stderr, a file's series names) is
printed with its control characters and bidi controls as visible escapes, never raw: an ESC
sequence recoloured the terminal, retitled its window or cleared it. JSON stays exact."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from labd.cli import jobs_cmd
from labd.cli.main import main
from labd.cli.text import markup, shown

HOSTILE = "boom \x1b[31mred\x1b]0;title\x07 \x1b[2J \u202eevil"
ESCAPED = "boom \\x1b[31mred\\x1b]0;title\\x07 \\x1b[2J \\u202eevil"
RAW = ("\x1b", "\x07", "\u202e")


def test_the_helper_escapes_controls_and_bidi_and_keeps_the_rest() -> None:
    assert shown(HOSTILE) == ESCAPED
    assert shown("a\tb\r\nc\x00\x9b\u2066\ud800") == "a\\tb\\r\\nc\\x00\\x9b\\u2066\\ud800"
    assert shown("two\nlines\x1b", lines=True) == "two\nlines\\x1b"
    assert shown("café [x] ✓ 東京") == "café [x] ✓ 東京"
    assert markup("[/]\x1b[1m") == "\\[/]\\x1b[1m"


def job(error: str) -> dict[str, Any]:
    spec = {"suite": "s", "test": "t", "scenario": "command", "max_attempts": 1}
    return {"id": "j1", "spec": spec, "state": "failed", "attempts": 1, "device_id": "host",
            "iterations_done": 1, "iterations_total": 3, "error": error}  # fmt: skip


class FakeClient:
    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer

    def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        return self.answer


@pytest.mark.parametrize("as_json", [False, True])
def test_jobs_show_escapes_the_error_it_quotes_and_json_stays_exact(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    error = "exit status 1: " + HOSTILE + "\nsecond line"
    monkeypatch.setattr(jobs_cmd, "_client", lambda args: FakeClient({"job": job(error)}))
    args = argparse.Namespace(via="http", id="j1", json=as_json)
    assert jobs_cmd.show(args) == 0
    out = capsys.readouterr().out
    if as_json:
        assert json.loads(out)["job"]["error"] == error
        return
    assert not any(c in out for c in RAW)
    assert f"error      exit status 1: {ESCAPED}\nsecond line" in out


def test_the_result_table_escapes_the_jobs_error_and_metric_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    summary = {"n": 3, "mean": 1.0, "median": 1.0, "stddev": 0.0, "cov": 0.0}
    summary |= {"min": 1.0, "max": 1.0, "p95": 1.0}
    jobs_cmd._print_results({"job": job(HOSTILE), "summary": {"\x1b[2Jload": summary}})
    out = capsys.readouterr().out
    assert not any(c in out for c in RAW)
    assert f"error: {ESCAPED}" in out and "\\x1b[2Jload" in out


def test_detect_escapes_a_series_name_from_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "load\x1b]0;pwned\x07\u202e"
    rows = "".join(f"{name},{b},{100 if b < 50 else 110}.{b % 3}\n" for b in range(100))
    (tmp_path / "h.csv").write_text("series,build,value\n" + rows, encoding="utf-8")
    assert main(["detect", str(tmp_path / "h.csv")]) == 1
    out = capsys.readouterr().out
    assert not any(c in out for c in RAW)
    assert "load\\x1b]0;pwned\\x07\\u202e" in out
    assert main(["detect", str(tmp_path / "h.csv"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["alerts"][0]["series"] == name


def test_an_error_message_quoting_outside_text_is_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no\x1b[2Jsuch.csv"
    assert main(["detect", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "no\\x1b[2Jsuch.csv: no such file" in err
