"""How `labd jobs results` and `labd submit --wait` print and export a job's results, from an
independent tester's findings: the CSV tells variants and set-aside iterations apart, no
figure is ever cut to fit a width, the tables say what was set aside, a regression found by
`submit --wait` exits 1, and only a succeeded job is exported to Perfherder."""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from labd.auth import redact_job
from labd.cli import jobs_cmd
from labd.model import Iteration, Job, JobState, TestSpec
from labd.store import set_aside
from labd.store.results import summaries

TIMED_OUT = "timed out after 1 s (the run was killed)"  # the runner's flag for a killed run
AB = {"base": {"params": {}}, "new": {"params": {}}}


def view(job: Job, iterations: list[Iteration]) -> dict[str, Any]:
    """A job's results as the API sends them: the store's own summary and set-aside count of
    the iterations, through JSON."""
    data = {
        "job": redact_job(job.model_dump(mode="json")),
        "summary": summaries(job, iterations),
        "set_aside": set_aside(iterations),
        "iterations": [it.model_dump(mode="json") for it in iterations],
        "offset": 0,
        "total": len(iterations),
        "next": None,
    }
    loaded: dict[str, Any] = json.loads(json.dumps(data))
    return loaded


def make_job(state: JobState = JobState.SUCCEEDED, **spec: Any) -> Job:
    test_spec = TestSpec.model_validate(
        {"suite": "host", "test": "startup", "scenario": "script", "iterations": 8,
         "warmup": 0, **spec}
    )  # fmt: skip
    return Job(id="j1", spec=test_spec, state=state, attempts=1, device_id="host-1",
               submitted_at=datetime.now(UTC))  # fmt: skip


def iteration(index: int, values: dict[str, float], **extra: Any) -> Iteration:
    now = datetime.now(UTC)
    return Iteration(job_id="j1", attempt=1, index=index, warmup=False, values=values,
                     started_at=now, finished_at=now, device_id="host-1", **extra)  # fmt: skip


def large_job() -> dict[str, Any]:
    """Eight measured iterations of figures of six digits, the last two killed at their
    time-out and set aside."""
    iterations = [
        iteration(i, {"coldlaunch.fully_drawn_ms": 103_748.0 + 10 * i, "max_rss_kib": 987_654.0})
        for i in range(6)
    ]
    iterations += [
        iteration(i, {"coldlaunch.fully_drawn_ms": 999_999.0}, flags=[TIMED_OUT], set_aside=True)
        for i in (6, 7)
    ]
    units = [{"name": "coldlaunch.fully_drawn_ms", "unit": "ms"},
             {"name": "max_rss_kib", "unit": "KiB"}]  # fmt: skip
    return view(make_job(metrics=units), iterations)


def regressed_ab_job() -> dict[str, Any]:
    """An A/B job whose new variant is 20% slower (a regression), one of its new iterations
    set aside."""
    iterations = [
        iteration(i, {"time_ms": (120.0 if i % 2 else 100.0) + i % 3},
                  variant="new" if i % 2 else "base")
        for i in range(16)
    ]  # fmt: skip
    iterations.append(
        iteration(16, {"time_ms": 500.0}, variant="new", flags=[TIMED_OUT], set_aside=True)
    )
    return view(make_job(ab=AB), iterations)


class FakeClient:
    """The local API as `jobs_cmd` calls it, answering with one job's results."""

    def __init__(self, results: dict[str, Any]) -> None:
        self.data = results
        self.job = {**results["job"], "iterations_done": 8, "iterations_total": 8}

    def results(self, job_id: str) -> dict[str, Any]:
        return self.data

    def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        return {"job": self.job, "created": True}


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Any:
    def answer_with(results: dict[str, Any]) -> None:
        client = FakeClient(results)
        monkeypatch.setattr(jobs_cmd, "_client", lambda args, wait=0.0: client)

    return answer_with


def results_args(fmt: str, config: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(via="api", id="j1", json=False, format=fmt, config=config)


def cells_of(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines()
            if line.startswith("│")]  # fmt: skip


def test_the_csv_tells_variants_and_set_aside_iterations_apart(
    serve: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Base and new rows of an A/B job looked alike, and an iteration killed at its time-out
    was an ordinary row."""
    serve(regressed_ab_job())
    assert jobs_cmd.results(results_args("csv")) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    # The columns there were keep their places (a reader by position keeps working).
    assert list(rows[0])[:7] == ["job_id", "attempt", "iteration", "warmup", "metric", "value",
                                 "error"]  # fmt: skip
    assert [r["variant"] for r in rows[:4]] == ["base", "new", "base", "new"]
    aside = [r for r in rows if r["set_aside"]]
    assert [(r["iteration"], r["variant"], r["value"]) for r in aside] == [("16", "new", "500.0")]
    assert aside[0]["set_aside"] == TIMED_OUT
    assert all(r["set_aside"] == "" for r in rows if r["iteration"] != "16")


def test_a_table_written_to_a_file_has_every_figure_and_header_whole(
    serve: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`env -u COLUMNS labd jobs results ID > t.txt` printed `1037…` for 103748 and `medi…`
    for the header: a CI log is not a terminal, and was cut to 80 columns."""
    monkeypatch.delenv("COLUMNS", raising=False)
    serve(large_job())
    assert jobs_cmd.results(results_args("table")) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    header = next(line for line in out.splitlines() if line.startswith("┃"))
    assert [c.strip() for c in header.split("┃")[1:-1]] == [
        "metric", "unit", "n", "mean", "median", "stddev", "CoV", "min", "max", "p95"]  # fmt: skip
    # The unit the scenario declares (103773 what?)
    assert cells_of(out)[0] == ["coldlaunch.fully_drawn_ms", "ms", "6", "103773", "103773",
                                "18.71", "0.0%", "103748", "103798", "103796"]  # fmt: skip


def on_a_terminal(monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", str(columns))


def uncoloured(out: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", out)  # a terminal's colours


def test_a_narrow_terminal_leaves_statistics_out_and_says_so_never_cutting_a_figure(
    serve: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    on_a_terminal(monkeypatch, 60)
    serve(large_job())
    assert jobs_cmd.results(results_args("table")) == 0
    out = uncoloured(capsys.readouterr().out)
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 60
    assert cells_of(out)[0] == ["coldlaunch.fully_drawn_ms", "ms", "6", "103773", "0.0%"]
    assert "\nleft out to fit: mean, p95, stddev, min, max (all in --json)\n" in out


def test_a_table_too_wide_even_without_the_optional_statistics_is_printed_whole(
    serve: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An A/B table in 40 columns: the terminal wraps its lines, nothing is cut."""
    on_a_terminal(monkeypatch, 40)
    serve(regressed_ab_job())
    jobs_cmd.results(results_args("table"))
    out = uncoloured(capsys.readouterr().out)
    assert "…" not in out
    assert cells_of(out)[1][-2:] == ["+19.68% [+18.64%, +20.73%]", "regression"]


@pytest.mark.parametrize("command", ["results", "submit"])
def test_both_tables_say_how_many_iterations_were_set_aside_and_why(
    command: str,
    serve: Any,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """n was 6 of 8 with no word why, where `labd compare`, `labd report` and the JSON say
    what was set aside."""
    monkeypatch.delenv("COLUMNS", raising=False)
    serve(large_job())
    if command == "results":
        jobs_cmd.results(results_args("table"))
    else:
        jobs_cmd.submit(submit_args(tmp_path, {}))
    assert "\n2 iterations set aside (2x timed out after 1 s)\n" in capsys.readouterr().out


def test_an_ab_jobs_table_says_which_variant_had_iterations_set_aside(
    serve: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    serve(regressed_ab_job())
    jobs_cmd.results(results_args("table"))
    assert "\n1 iteration set aside: new 1 (1x timed out after 1 s)\n" in capsys.readouterr().out


def submit_args(tmp_path: Path, spec: dict[str, Any]) -> argparse.Namespace:
    manifest = tmp_path / "job.toml"
    lines = ['suite = "host"', 'test = "startup"', 'scenario = "script"']
    if spec.get("ab"):
        lines += ["[ab.base.params]", "[ab.new.params]"]
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = tmp_path / "labd.toml"
    config.write_text("", encoding="utf-8")
    return argparse.Namespace(file=str(manifest), config=str(config), via="api", id="",
                              wait=True, json=False, connect_wait=0.0)  # fmt: skip


@pytest.mark.parametrize("as_json", [False, True])
def test_submit_wait_exits_1_when_an_ab_job_finds_a_regression(
    as_json: bool, serve: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The guide's exit 1, "a negative verdict (e.g. a regression was found)": `submit
    --wait` gave 0 for a succeeded A/B job whose verdict was a regression."""
    serve(regressed_ab_job())
    args = submit_args(tmp_path, {"ab": AB})
    args.json = as_json
    assert jobs_cmd.submit(args) == 1
    assert "regression" in capsys.readouterr().out


def test_submit_wait_exits_0_without_a_regression_and_3_for_a_failed_job(
    serve: Any, tmp_path: Path
) -> None:
    serve(large_job())
    assert jobs_cmd.submit(submit_args(tmp_path, {})) == 0
    failed = large_job()
    failed["job"]["state"] = "failed"
    serve(failed)
    assert jobs_cmd.submit(submit_args(tmp_path, {})) == 3


def test_jobs_results_shows_a_regression_and_exits_0(serve: Any) -> None:
    """It reads results (a script exporting a regressed job's values must not stop there):
    `submit --wait` and `labd compare` are the commands that judge."""
    serve(regressed_ab_job())
    assert jobs_cmd.results(results_args("table")) == 0


def test_the_table_says_what_values_iterations_left_out(
    serve: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mark that names no metric and memory the phone did not give were left out of their
    iterations and said only in the JSON and the log (a tester's find)."""
    bad_mark = "'coldlaunch.hero image loaded': not a metric name; left out"
    memory = "memory: dumpsys meminfo gave no figures for org.mozilla.fenix"
    iterations = [
        iteration(
            i, {"time_ms": 100.0 + i}, fingerprint={"notes": [bad_mark] + [memory] * (i == 2)}
        )
        for i in range(3)
    ] + [iteration(3, {"time_ms": 101.0})]
    serve(view(make_job(), iterations))
    jobs_cmd.results(results_args("table"))
    out = " ".join(capsys.readouterr().out.split())
    assert (
        f"values left out in 3 iterations: 3x {bad_mark}; 1x {memory} (each one's in --json)" in out
    )


def test_the_table_says_whether_a_stop_when_stable_job_stopped_or_ran_to_its_cap(
    serve: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job that never became stable ran to its cap and read as one that had (a tester's
    find): the table says which, and why a metric was not stable."""
    rng = np.random.default_rng(1)
    steady = [iteration(i, {"time_ms": 100.0 + 0.01 * (i % 3)}) for i in range(15)]
    serve(view(make_job(iterations=40, stop_when_stable=True), steady))
    jobs_cmd.results(results_args("table"))
    said = " ".join(capsys.readouterr().out.split())
    assert (
        "stop_when_stable: stopped after 15 measured iterations (at most 40): every metric's "
        "interval within +-0.38%" in said
    )
    noisy = [iteration(i, {"time_ms": float(rng.lognormal(4.6, 1.0))}) for i in range(20)]
    serve(view(make_job(iterations=20, stop_when_stable=True), noisy))
    jobs_cmd.results(results_args("table"))
    said = " ".join(capsys.readouterr().out.split())
    assert (
        "stop_when_stable: not stable after 20 measured iterations (at most 20), each metric's "
        "interval asked within +-0.38%: time_ms: interval +-" in said
    )


def test_the_table_says_what_the_diagnostics_find_in_the_jobs_values(
    serve: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A warm-up longer than the manifest's `warmup` showed in `labd compare` only; the
    results a developer reads first said nothing of it (a tester's find)."""
    rng = np.random.default_rng(3)
    values = list(100 + rng.normal(0, 0.5, 30))
    values[:4] = [130.0, 122.0, 115.0, 109.0]
    serve(
        view(make_job(iterations=30), [iteration(i, {"time_ms": v}) for i, v in enumerate(values)])
    )
    jobs_cmd.results(results_args("table"))
    said = " ".join(capsys.readouterr().out.split())
    assert (
        "time_ms: the first 4 iterations look like warm-up: raise the manifest's warmup by 4"
        in said
    )
