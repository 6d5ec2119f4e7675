"""A job's result table: outside strings (metric names, the job's error) shown as they are;
an A/B job's variants and verdict."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from labd.auth import redact_job
from labd.cli.jobs_cmd import _print_results
from labd.model import Iteration, Job, JobState, TestSpec
from labd.store.results import summaries


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


def ab_results() -> dict[str, Any]:
    """An A/B job's results as the API sends them: the summary computed by the store's own
    code (labd.store.results) from a job and its iterations, through JSON."""
    spec = TestSpec.model_validate(
        {"suite": "s", "test": "t", "scenario": "script", "iterations": 8, "warmup": 0,
         "ab": {"base": {"params": {}}, "new": {"params": {}}}}
    )  # fmt: skip
    now = datetime.now(UTC)
    job = Job(id="ab1", spec=spec, state=JobState.SUCCEEDED, attempts=1, device_id="d1",
              submitted_at=now)  # fmt: skip
    iterations = []
    for i in range(16):
        variant = "new" if i % 2 else "base"
        values = {"time_ms": (120.0 if i % 2 else 100.0) + i % 3}
        if variant == "new":
            values["only_new"] = 5.0 + i % 4  # reported by one variant: nothing to compare
        iterations.append(
            Iteration(job_id="ab1", attempt=1, index=i, warmup=False, values=values,
                      started_at=now, finished_at=now, device_id="d1", variant=variant)
        )  # fmt: skip
    view = {"job": redact_job(job.model_dump(mode="json")), "summary": summaries(job, iterations)}
    loaded: dict[str, Any] = json.loads(json.dumps(view))
    return loaded


def test_an_ab_jobs_table_shows_both_variants_and_the_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The summary of an A/B job is per variant; the table read it as a plain job's and
    failed with KeyError: 'n' once the job had succeeded."""
    results = ab_results()
    assert set(results["summary"]["time_ms"]) >= {"base", "new", "verdict", "ratio"}
    _print_results(results)
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("│")
    ]
    assert rows == [
        ["time_ms", "base", "8", "101", "101", "0.9258", "0.9%", "100", "102", "102", "", ""],
        ["", "new", "8", "120.9", "121", "0.8345", "0.7%", "120", "122", "122",
         "+19.68% [+18.64%, +20.73%]", "regression"],
        ["only_new", "base", *["-"] * 8, "", ""],  # reported by new only: nothing compared
        ["", "new", "8", "7", "7", "1.069", "15.3%", "6", "8", "8", "-", "-"],
    ]  # fmt: skip


def test_a_summary_whose_spread_overflowed_shows_dashes_not_a_crash(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Values of 1e300 stored before the runner refused them overflow the spread to null:
    `labd jobs results` raised TypeError (abs of None) instead of printing the table."""
    spec = TestSpec.model_validate(
        {"suite": "s", "test": "t", "scenario": "script", "iterations": 3, "warmup": 0}
    )
    now = datetime.now(UTC)
    job = Job(id="j1", spec=spec, state=JobState.SUCCEEDED, attempts=1, device_id="d1",
              submitted_at=now)  # fmt: skip
    iterations = [
        Iteration(job_id="j1", attempt=1, index=i, warmup=False, values={"x_ms": value},
                  started_at=now, finished_at=now, device_id="d1")
        for i, value in enumerate([1e300, 2e300, -1e300])
    ]  # fmt: skip
    with pytest.warns(RuntimeWarning):  # numpy's overflow, the cause of the nulls
        summary = summaries(job, iterations)
    results = {"job": redact_job(job.model_dump(mode="json")), "summary": summary}
    monkeypatch.setenv("COLUMNS", "200")  # every figure whole
    _print_results(json.loads(json.dumps(results)))
    row = next(line for line in capsys.readouterr().out.splitlines() if "x_ms" in line)
    assert [cell.strip() for cell in row.split("│")[1:-1]] == [
        "x_ms", "3", "6.667e+299", "1e+300", "-", "-", "-1e+300", "2e+300", "1.9e+300"
    ]  # fmt: skip
