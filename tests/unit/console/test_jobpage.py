"""The job page's figures: set-aside iterations with their reasons, kept out of the summary
and marked on the plot in iteration order."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from labd.console.jobpage import _figures, _offset, _set_aside
from labd.model import Iteration, Job, JobState, TestSpec

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def iteration(index: int, value: float, flags: list[str] | None = None) -> Iteration:
    return Iteration(
        job_id="j",
        attempt=1,
        index=index,
        warmup=index == 0,
        values={"load_ms": value},
        started_at=NOW,
        finished_at=NOW,
        device_id="d",
        flags=flags or [],
        set_aside=bool(flags),
    )


def test_set_aside_iterations_are_listed_with_why_and_kept_out_of_the_summary() -> None:
    spec = TestSpec.model_validate(
        {
            "suite": "s",
            "test": "t",
            "scenario": "sim",
            "metrics": [{"name": "load_ms", "unit": "ms"}],
        }
    )
    job = Job(id="j", spec=spec, state=JobState.SUCCEEDED, attempts=1, submitted_at=NOW)
    its = [iteration(0, 500.0)] + [iteration(i, 100.0 + i) for i in range(1, 6)]
    its.append(iteration(6, 900.0, ["cpu throttled: 3 events"]))
    aside = _set_aside(its)
    # Numbered as the API, the CSV and the artefact folders number it (iteration-6), from 0.
    assert "Set aside" in aside and "cpu throttled: 3 events" in aside and "<td>6</td>" in aside
    figures = _figures(job, its)
    summary = figures.split("<tr>")[2]
    assert "<td>load_ms</td><td>ms</td><td>5</td>" in summary  # the 900 ms one is not counted
    assert figures.count('class="marked"') == 1 and figures.count('class="warm"') == 1
    assert "load_ms (ms)" in figures and ">iteration<" in figures


def test_the_values_table_numbers_iterations_as_the_api_and_the_csv_do() -> None:
    """Iteration 500 of the CSV (`iteration` column) is row 500 of the table, not `#501`."""
    spec = TestSpec.model_validate({"suite": "s", "test": "t", "scenario": "sim"})
    job = Job(id="j", spec=spec, state=JobState.SUCCEEDED, attempts=1, submitted_at=NOW)
    its = [iteration(i, 100.0 + i) for i in range(1200)]
    second = _figures(job, its, 500)
    assert "Iterations 500 to 999 of 1,200" in second
    rows = second.split("<th>error or flags</th></tr>", 1)[1]
    assert rows.startswith("<tr><td>500</td>") and "<td>1000</td>" not in rows
    assert "<td>999</td>" in rows


@pytest.mark.parametrize(
    ("asked", "offset", "says"),
    [
        (None, 0, ""),
        ("7", 0, ""),  # snapped: the page says which rows it holds
        ("1100", 1000, ""),
        ("abc", 0, "?values='abc' is not a number: it takes an iteration of this job, 0 to 1,199"),
        ("-1", 0, "?values=-1 is not an iteration of this job, 0 to 1,199"),
        ("1200", 0, "?values=1200 is not an iteration of this job, 0 to 1,199"),
    ],
)
def test_a_values_page_that_is_no_page_is_named(asked: str | None, offset: int, says: str) -> None:
    assert _offset(asked, 1200)[0] == offset
    problem = _offset(asked, 1200)[1]
    assert problem.startswith(says) and bool(problem) == bool(says)
