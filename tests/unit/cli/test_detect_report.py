"""What `labd detect` says about a change from a level of 0 (an absolute change, labelled as
one, not a percentage) and about series it cannot judge (too short, or changes within the
builds that set the reference level), in text and in JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from labd.cli.main import main


def write(path: Path, series: dict[str, list[float]]) -> str:
    rows = "".join(
        f"{name},{build},{value!r}\n"
        for name, values in series.items()
        for build, value in enumerate(values)
    )
    path.write_text("series,build,value\n" + rows, encoding="utf-8")
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["detect", *argv])
    return code, capsys.readouterr().out


def as_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code, out = run(capsys, *argv, "--json")
    return code, json.loads(out)


def unwrapped(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("new", [2.0, 5.0])
def test_a_change_from_0_is_an_absolute_change_labelled_as_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], new: float
) -> None:
    history = write(tmp_path / "h.csv", {"dropped": [0.0] * 30 + [new] * 10})
    code, out = run(capsys, history)
    assert code == 1
    # the label on a line of its own in the cell: the numbers are not split
    assert f"│ {new:+g} [{new:+g}, {new:+g}] " in out
    assert "│ (absolute; the level before was 0) │" in out
    assert "00.0%" not in out  # was +200.0% [+200.0%, +200.0%]
    code, answer = as_json(capsys, history)
    (alert,) = answer["alerts"]
    assert code == 1 and alert["index"] == 30 and alert["direction"] == "up"
    # magnitude stays relative: undefined here, so null, as `labd compare`'s ratio to 0 is
    assert (alert["magnitude"], alert["magnitude_low"], alert["magnitude_high"]) == (None,) * 3
    assert alert["relative"] is False and alert["level_before"] == 0.0
    assert (alert["absolute_change"], alert["absolute_change_low"]) == (new, new)
    assert alert["absolute_change_high"] == new


def test_a_level_within_its_interval_of_0_gives_no_relative_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A level of 0.02 with noise of 1 around it: +1,000% or +50,000% says nothing."""
    values = np.random.default_rng(3).normal(0, 1, 80)
    values[:50] += 0.02 - np.median(values[:50])
    values[50:] += 10
    history = write(tmp_path / "h.csv", {"offset": [float(v) for v in values]})
    code, answer = as_json(capsys, history)
    (alert,) = answer["alerts"]
    assert code == 1 and abs(alert["index"] - 50) <= 1
    assert alert["magnitude"] is None and alert["relative"] is False
    assert alert["level_before"] != 0 and 8 < alert["absolute_change"] < 12
    assert alert["absolute_change_low"] < alert["absolute_change"] < alert["absolute_change_high"]
    code, out = run(capsys, history)
    assert "│ (absolute; the level before, 0.2" in out and "interval of 0)" in out


def test_a_relative_change_keeps_its_magnitude_beside_the_absolute_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = 100 * (1 + np.random.default_rng(1).normal(0, 0.005, 80))
    values[50:] *= 1.06
    history = write(tmp_path / "h.csv", {"load": [float(v) for v in values]})
    code, answer = as_json(capsys, history)
    (alert,) = answer["alerts"]
    assert code == 1 and alert["relative"] is True
    assert alert["magnitude"] == pytest.approx(0.06, abs=0.01)
    assert alert["magnitude"] * alert["level_before"] == pytest.approx(alert["absolute_change"])
    for side in ("low", "high"):
        assert alert[f"magnitude_{side}"] * abs(alert["level_before"]) == pytest.approx(
            alert[f"absolute_change_{side}"]
        )
    code, out = run(capsys, history)
    assert "absolute" not in out and "% [+" in out


def test_a_series_too_short_to_judge_is_not_no_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = write(
        tmp_path / "h.csv", {"s": [10.0, 10.0, 50.0], "t": [100.0] * 13, "u": [100.0] * 14}
    )
    code, out = run(capsys, history)
    text = unwrapped(out)
    # exit 0: no regression was found (docs/guide.md); the text says what was not judged
    assert code == 0
    assert "s: 3 builds, too few to judge (ets+rank+vote needs 14: its first 10 set" in text
    assert "t: 13 builds, too few to judge" in text
    assert "u: no change found; monitored from build 10 (index 10) on" in text
    assert "s: no change found" not in text and "t: no change found" not in text
    code, answer = as_json(capsys, history)
    assert code == 0 and answer["alerts"] == []
    assert (answer["method"], answer["first_dated"], answer["fewest_builds"]) == (
        "ets+rank+vote",
        10,
        14,
    )
    series = {s["series"]: s for s in answer["series"]}
    assert series["s"] == {
        "series": "s",
        "builds": 3,
        "judged": False,
        "monitored_from": None,
        "monitored_from_build": None,
        "alerts": 0,
        "regressions": 0,
        "higher_is_better": False,
    }
    assert (series["t"]["judged"], series["t"]["monitored_from"]) == (False, 10)
    assert (series["u"]["judged"], series["u"]["monitored_from_build"]) == (True, "10")


def test_each_method_says_how_many_builds_it_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = write(tmp_path / "h.csv", {"s": [float(v % 3) for v in range(40)]})
    code, out = run(capsys, history, "--method", "rank")
    assert code == 0 and "s: 40 builds, too few to judge (rank needs 54" in unwrapped(out)
    code, out = run(capsys, history, "--method", "talos")
    assert code == 0 and "s: no change found; monitored from build 12 (index 12) on" in out


def test_builds_before_monitoring_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A doubling within the first 10 builds is in the reference level: not "no change found"
    alone; one beginning at build 8 is dated at 10, marked as possibly earlier."""
    history = write(
        tmp_path / "h.csv",
        {
            "early": [100.0] * 5 + [200.0] * 10,
            "eight": [100.0 + i % 3 for i in range(8)] + [200.0 + i % 3 for i in range(32)],
        },
    )
    code, out = run(capsys, history)
    text = unwrapped(out)
    assert code == 1
    assert "early: no change found; monitored from build 10 (index 10) on (the 10 builds" in text
    assert "eight: 1 change (1 regression; lower is better); monitored from build 10" in text
    assert "│ 10* │" in text
    assert "* dated at the first build monitored: the change may have begun within the 10" in text
    code, answer = as_json(capsys, history)
    (alert,) = answer["alerts"]
    assert alert["series"] == "eight" and alert["index"] == 10
    assert [s["monitored_from"] for s in answer["series"]] == [10, 10]


def test_many_quiet_series_take_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file of thousands of series printed a line for each one without a change."""
    series = {f"q{i}": [100.0] * 20 for i in range(30)} | {"short": [1.0] * 3}
    code, text = run(capsys, write(tmp_path / "quiet.csv", series))
    text = unwrapped(text)
    assert code == 0
    assert "30 series: no change found; each monitored from index 10 on" in text
    assert "q7:" not in text and "short: 3 builds, too few to judge" in text


def test_only_a_regression_fails_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CI gate on `labd detect` must not fail on an improvement: a fall is one where lower is
    better (a file's default), a rise with --higher-is-better; exit 1 only for a regression."""
    rng = np.random.default_rng(7)
    fall = [*(100 + rng.normal(0, 1, 40)).tolist(), *(80 + rng.normal(0, 1, 20)).tolist()]
    history = write(tmp_path / "h.csv", {"load_ms": fall})
    code, out = run(capsys, history)
    assert code == 0 and "│ improvement │" in out and "│ regression │" not in out
    assert "load_ms: 1 change (0 regressions; lower is better)" in unwrapped(out)
    code, answer = as_json(capsys, history)
    (alert,) = answer["alerts"]
    assert code == 0 and (alert["verdict"], alert["direction"]) == ("improvement", "down")
    code, answer = as_json(capsys, history, "--higher-is-better")
    (alert,) = answer["alerts"]
    assert code == 1 and alert["verdict"] == "regression"
    assert answer["series"][0]["higher_is_better"] is True


def test_a_table_written_to_a_pipe_has_every_name_and_figure_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`labd detect | cat` and `labd compare a b | cat` (a CI log) squeezed their tables to 110
    columns: series names were cut mid-name and the metric column of compare shrank to `…`."""
    monkeypatch.delenv("COLUMNS", raising=False)
    rng = np.random.default_rng(3)
    name = "pageload/example.com/fully_loaded_ms_on_the_cold_cache_path_" + "x" * 40
    step = [*(100 + rng.normal(0, 1, 40)).tolist(), *(110 + rng.normal(0, 1, 20)).tolist()]
    code, out = run(capsys, write(tmp_path / "h.csv", {name: step}))
    assert code == 1 and "…" not in out
    assert f"│ {name} │" in out
    metrics = [f"{name}_{i}" for i in range(3)]
    for side, level in (("base", 100), ("new", 105)):
        rows = [f"{m},{v:.3f}" for m in metrics for v in level + rng.normal(0, 1, 30)]
        (tmp_path / f"{side}.csv").write_text("metric,value\n" + "\n".join(rows) + "\n")
    code = main(["compare", str(tmp_path / "base.csv"), str(tmp_path / "new.csv")])
    out = capsys.readouterr().out
    assert code == 1 and "…" not in out
    assert all(re.search(f"│ {m} │ +mean [0-9.]+ ± [0-9.]+ n=30 │", out) for m in metrics)
