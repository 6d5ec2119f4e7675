"""Dispatch latency helpers: percentiles as values, nothing reported when nothing was sent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from labd.sdk import keep_latencies, latency_values, take_latencies, timed


class Keys:
    def __init__(self) -> None:
        self.latencies_ms: list[float] = []


def test_percentiles_match_numpy_and_an_empty_iteration_reports_nothing(tmp_path: Path) -> None:
    values = [1.0, 2.0, 3.0, 4.0, 100.0]
    assert latency_values(values) == {
        "input_latency_p50_ms": 3.0,
        "input_latency_p95_ms": pytest.approx(float(np.percentile(values, 95)), abs=1e-3),
    }
    fingerprint: dict[str, object] = {}
    assert keep_latencies([], tmp_path, fingerprint) == {}
    assert fingerprint == {} and not list(tmp_path.iterdir())


def test_timed_counts_a_failed_dispatch_and_take_empties_the_list() -> None:
    keys = Keys()
    with pytest.raises(RuntimeError), timed(keys.latencies_ms):
        raise RuntimeError("device gone")
    taken = take_latencies(keys)
    assert len(taken) == 1 and taken[0] >= 0
    assert keys.latencies_ms == []
    assert take_latencies(object()) == []  # an untimed input
