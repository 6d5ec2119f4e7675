"""`labd compare` on inputs that make a comparison partial or wrong: one page of the API's
paged results, metrics on one side only, a job that did not succeed, values written as
strings, units that differ; and the messages for a metric, column or job that does not fit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from labd.cli.main import main

VALUES = [100.0 + (i % 5) * 0.2 for i in range(20)]


def record(job_id: str, index: int, values: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """One iteration as `labd jobs results ID --format json` writes it."""
    return {
        "job_id": job_id, "attempt": 1, "index": index, "warmup": False, "values": values,
        "error": "", "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:00:01Z", "device_id": "d1", "variant": "",
        "set_aside": False, "flags": [], "fingerprint": {"model": "Rig 1"}, **extra,
    }  # fmt: skip


def result(job_id: str, state: str = "succeeded", count: int = 20, **top: Any) -> dict[str, Any]:
    iterations = [record(job_id, i, {"cpu_time_ms": VALUES[i % 20]}) for i in range(count)]
    spec = {"suite": "s", "test": "t", "metrics": [], "build": {}}
    job = {"id": job_id, "attempts": 1, "spec": spec, "device_id": "d1", "state": state,
           "error": "device lost" if state == "failed" else ""}  # fmt: skip
    return {"job": job, "iterations": iterations, **top}


def write(path: Path, content: Any) -> str:
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["compare", *args])
    out, err = capsys.readouterr()
    return code, out, err.strip()


class Pages:
    """The daemon's paged GET /jobs/J/results, 1,000 iterations a page (as the API sends)."""

    def __init__(self, whole: dict[str, Any], limit: int = 1000) -> None:
        self.whole, self.limit = whole, limit

    def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        offset = int(path.partition("offset=")[2].partition("&")[0] or 0)
        iterations = self.whole["iterations"][offset : offset + self.limit]
        end, total = offset + len(iterations), len(self.whole["iterations"])
        return {"job": self.whole["job"], "iterations": iterations, "offset": offset,
                "total": total, "next": end if end < total else None}  # fmt: skip


def test_one_page_of_the_api_is_refused_and_the_joined_file_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first page ("next": 1000 of 1500) was compared as the whole job, n_new 1000."""
    whole = result("J", count=1500)
    pages = Pages(whole)
    first = write(tmp_path / "page.json", pages.call("GET", "/jobs/J/results"))
    last = write(tmp_path / "last.json", pages.call("GET", "/jobs/J/results?offset=1000"))
    good = write(tmp_path / "good.json", result("G"))
    assert run(capsys, good, first) == (
        2, "", "page.json: page 1 of a paged answer, not the whole job: iterations 0 to 999 of "
        "1500, the next page from offset 1000; `labd jobs results J --format json` writes "
        "every page in one file",
    )  # fmt: skip
    assert run(capsys, last, good)[2] == (
        "last.json: a page of a paged answer, not the whole job: iterations 1000 to 1499 of "
        "1500; `labd jobs results J --format json` writes every page in one file"
    )
    # A first page whose "next" was dropped still says the job has 1,500.
    cut = pages.call("GET", "/jobs/J/results") | {"next": None}
    assert run(capsys, good, write(tmp_path / "cut.json", cut))[2] == (
        "cut.json: a page of a paged answer, not the whole job: iterations 0 to 999 of 1500; "
        "`labd jobs results J --format json` writes every page in one file"
    )
    # What `labd jobs results J --format json` writes (every page joined) is the whole job.
    monkeypatch.setattr("labd.cli.client.Client.call", lambda _, *a, **k: pages.call(*a, **k))
    assert main(["jobs", "results", "J", "--format", "json", "--via", "api"]) == 0
    joined = write(tmp_path / "joined.json", capsys.readouterr().out)
    code, out, _ = run(capsys, good, joined, "--json")
    assert code == 0 and json.loads(out)["metrics"][0]["n_new"] == 1500


def test_metrics_on_one_side_only_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """paint_ms, only in base, was left out without a word."""
    rows = "".join(f"load_ms,{v}\npaint_ms,{v}\n" for v in VALUES)
    base = write(tmp_path / "base.csv", "metric,value\n" + rows)
    new = write(tmp_path / "new.csv", "metric,value\n" + "".join(f"load_ms,{v}\n" for v in VALUES))
    code, out, err = run(capsys, base, new)
    assert code == 0 and "warning: not compared, missing from new: paint_ms" in out
    code, out, err = run(capsys, new, base, "--json")
    assert code == 0 and json.loads(out)["missing"] == {"base": ["paint_ms"], "new": []}
    assert err == "warning: not compared, missing from base: paint_ms"
    # Asked for by name, a metric one side lacks is said to be missing there.
    assert run(capsys, base, new, "--metric", "paint_ms")[::2] == (
        2, "nothing to compare: 'paint_ms' is missing from new (base has ['load_ms', "
        "'paint_ms'], new has ['load_ms'])",
    )  # fmt: skip


def test_a_metric_asked_for_that_neither_side_has_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "no metric in common", though both sides hold "value"."""
    sample = write(tmp_path / "a.csv", "\n".join(map(str, VALUES)))
    assert run(capsys, sample, sample, "--metric", "nope")[::2] == (
        2, "--metric 'nope': in neither base nor new (base has ['value'], new has ['value'])"
    )  # fmt: skip


@pytest.mark.parametrize("state", ["failed", "cancelled", "timed_out", "running"])
def test_a_job_that_did_not_succeed_is_named_with_its_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], state: str
) -> None:
    failed = write(tmp_path / "failed.json", result("F1", state))
    good = write(tmp_path / "good.json", result("G"))
    code, out, _ = run(capsys, failed, good)
    error = " (device lost)" if state == "failed" else ""
    assert code == 0
    assert (
        f"warning: base: job F1 did not succeed (state {state}): its values may be partial{error}"
        in out
    )
    code, out, err = run(capsys, good, failed, "--json")
    assert json.loads(out)["not_succeeded"] == {
        "new": {"job": "F1", "state": state, "error": error.strip(" ()")}
    }
    assert err.startswith("warning: new: job F1 did not succeed")
    assert 'not_succeeded": {}' in run(capsys, good, good, "--json")[1]


def test_a_failed_job_by_id_is_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("labd.cli.client.Client.call", lambda *_: result("F2", "failed"))
    code, out, _ = run(capsys, "F2", "F2")
    assert code == 0
    for side in ("base", "new"):
        assert f"warning: {side}: job F2 did not succeed (state failed)" in out


def test_a_side_of_a_job_that_is_not_ab_is_named_as_such(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It said "no measured iteration with values"."""
    monkeypatch.setattr("labd.cli.client.Client.call", lambda *_: result("J3"))
    assert run(capsys, "J3@base", "J3")[::2] == (
        2, "J3@base: job J3 is not an A/B job, so it has no base and new sides; compare the "
        "whole job as J3",
    )  # fmt: skip


def test_the_sides_of_an_ab_job_are_compared_whole(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job's `total` counts both variants: each side, half of it, is no page."""
    ab = result("AB", count=40)
    for i, it in enumerate(ab["iterations"]):
        it["variant"] = "base" if i % 2 else "new"
    ab["job"]["spec"]["ab"] = {}
    answer = ab | {"offset": 0, "total": 40, "next": None}
    monkeypatch.setattr("labd.cli.client.Client.call", lambda *_: json.loads(json.dumps(answer)))
    code, out, err = run(capsys, "AB@base", "AB@new", "--json")
    assert code == 0, err
    assert json.loads(out)["metrics"][0]["n_base"] == 20


def test_a_value_written_as_a_string_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "12" was read as 12 (true was already refused)."""
    data = result("S")
    data["iterations"][3]["values"]["cpu_time_ms"] = "12"
    quoted = write(tmp_path / "s.json", data)
    good = write(tmp_path / "good.json", result("G"))
    assert run(capsys, good, quoted)[::2] == (
        2, "s.json: iteration 3: cpu_time_ms: not a number: '12' (a string)"
    )  # fmt: skip


def test_a_unit_difference_is_flagged_like_a_direction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def with_unit(job_id: str, unit: str) -> dict[str, Any]:
        data = result(job_id)
        for it in data["iterations"]:
            declared = {"cpu_time_ms": {"unit": unit, "higher_is_better": False}}
            it["fingerprint"] = {"model": "Rig 1", "metrics": declared}
        return data

    base = write(tmp_path / "base.json", with_unit("a", "<i>ms</i>"))
    new = write(tmp_path / "new.json", with_unit("b", "ms"))
    line = "unit of cpu_time_ms: '<i>ms</i>' -> 'ms' (the values are compared as they are)"
    code, out, _ = run(capsys, base, new)
    assert code == 0 and "conditions differ between base and new" in out and line in out
    assert json.loads(run(capsys, base, new, "--json")[1])["conditions_differ"] == [line]
    assert json.loads(run(capsys, base, base, "--json")[1])["conditions_differ"] == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "metric,value,extra\nload_ms,1,2\n",
            "bad.csv: line 1: 3 columns; expected one number per line, or the header "
            "metric,value and then one metric,value pair per line",
        ),
        ("metric,value\nload_ms,1\n,1\n", "bad.csv: line 3: no metric name before the value"),
    ],
)
def test_a_csv_of_another_shape_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    good = write(tmp_path / "good.csv", "\n".join(map(str, VALUES)))
    assert run(capsys, good, write(tmp_path / "bad.csv", content))[::2] == (2, message)


def test_a_value_without_a_metric_name_in_a_result_json_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = result("E")
    data["iterations"][2]["values"][""] = 1.0
    good = write(tmp_path / "good.json", result("G"))
    assert run(capsys, good, write(tmp_path / "e.json", data))[::2] == (
        2, "e.json: iteration 2: a value without a metric name"
    )  # fmt: skip


def test_a_device_is_named_by_its_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """/dev/null was named "null"."""
    good = write(tmp_path / "good.csv", "\n".join(map(str, VALUES)))
    assert run(capsys, good, "/dev/null")[::2] == (2, "/dev/null: the file is empty")
