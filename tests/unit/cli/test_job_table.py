"""A job's result table shows outside strings (metric names, the job's error) as they are."""

from __future__ import annotations

import pytest

from labd.cli.jobs_cmd import _print_results


def test_brackets_in_metric_names_and_errors_are_printed_not_read_as_markup(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """rich reads "[/]" as a closing tag (it raised MarkupError) and "[Errno 2]" as a style."""
    summary = {"n": 3, "mean": 1.0, "median": 1.0, "stddev": 0.0, "cov": 0.0}
    summary |= {"min": 1.0, "max": 1.0, "p95": 1.0}
    results = {
        "job": {
            "spec": {"suite": "s", "test": "t"},
            "state": "failed",
            "device_id": "host",
            "error": "[/] [Errno 2] no such file",
        },
        "summary": {"[/]load_ms": summary},
    }
    _print_results(results)
    out = capsys.readouterr().out
    assert "[/]load_ms" in out and "[/] [Errno 2] no such file" in out
