"""The job page's figures: set-aside iterations with their reasons, kept out of the summary
and marked on the plot in iteration order."""

from __future__ import annotations

from datetime import UTC, datetime

from labd.console.jobpage import _figures, _set_aside
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
    assert "Set aside" in aside and "cpu throttled: 3 events" in aside and "<td>7</td>" in aside
    figures = _figures(job, its)
    summary = figures.split("<tr>")[2]
    assert "<td>load_ms</td><td>ms</td><td>5</td>" in summary  # the 900 ms one is not counted
    assert figures.count('class="marked"') == 1 and figures.count('class="warm"') == 1
    assert "load_ms (ms)" in figures and ">iteration<" in figures
