"""`labd detect --suite --test` on a stored history holding a value stored before the runner
refused such values (1e300): one line naming the series, job and build, exit 2, as a history
file's line would be named; not "unexpected error: ValueError" and a crash log."""

from __future__ import annotations

import argparse
import re
from typing import Any

import pytest

from labd.cli import stats_cmd
from labd.errors import UsageError


class History:
    """The daemon's /history answer, as the API sends it."""

    def __init__(self, values: list[Any]) -> None:
        self.values = values

    def history(self, suite: str, test: str) -> dict[str, Any]:
        n = len(self.values)
        series = {"builds": [f"r{i}" for i in range(n)], "jobs": [f"j{i}" for i in range(n)],
                  "values": self.values}  # fmt: skip
        return {"suite": suite, "test": test, "series": {f"{suite}/{test}/x_ms/rig": series}}


@pytest.mark.parametrize(
    ("value", "reason"),
    [(1e300, "1e+300 is out of range"), (None, "None is not a number")],  # null: an older NaN
)
def test_a_stored_value_the_statistics_cannot_take_is_named_with_its_job(
    monkeypatch: pytest.MonkeyPatch, value: Any, reason: str
) -> None:
    monkeypatch.setattr("labd.cli.client.Client.from_args", lambda *_: History([5.0, value]))
    args = argparse.Namespace(suite="s", test="t")
    with pytest.raises(UsageError, match=re.escape(f"s/t/x_ms/rig: job j1 (build r1): {reason}")):
        stats_cmd._stored_history(args)
    monkeypatch.setattr("labd.cli.client.Client.from_args", lambda *_: History([5.0, 6.0]))
    assert stats_cmd._stored_history(args) == (
        {"s/t/x_ms/rig": (["r0", "r1"], [5.0, 6.0])},
        {"s/t/x_ms/rig": False},  # a history without a direction: lower is better
    )
